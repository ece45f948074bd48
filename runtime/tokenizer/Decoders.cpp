//===- Decoders.cpp - tokenizer.json `decoder` ----------------------------===//

#include "Decoders.h"

#include "JsonConfig.h"
#include "PreTokenizers.h"
#include "Regex.h"
#include "Unicode.h"

using namespace sits::tok;

Decoder::~Decoder() = default;

int sits::tok::byteFallbackValue(const std::string &token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    char c = token[i];
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0)
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

namespace {

class SequenceDecoder : public Decoder {
public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> members)
      : members(std::move(members)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &member : members)
      member->decodeChain(tokens);
  }
  bool hasByteFallback() const override {
    for (const auto &member : members)
      if (member->hasByteFallback())
        return true;
    return false;
  }
  bool hasByteLevel() const override {
    for (const auto &member : members)
      if (member->hasByteLevel())
        return true;
    return false;
  }
  void addStreamWindowNeeds(StreamWindowNeeds &needs) const override {
    for (const auto &member : members)
      member->addStreamWindowNeeds(needs);
  }

private:
  std::vector<std::unique_ptr<Decoder>> members;
};

/// Byte-level characters back to bytes, then bytes to text (lossy). A token
/// with a character outside the alphabet (an added token with a space, say)
/// contributes its own UTF-8 bytes.
class ByteLevelDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &token : tokens) {
      size_t start = bytes.size();
      bool inAlphabet = true;
      for (size_t pos = 0; pos < token.size();) {
        size_t length;
        int byte = byteLevelByte(decodeUtf8(token, pos, length));
        if (byte < 0) {
          inAlphabet = false;
          break;
        }
        bytes.push_back(static_cast<char>(byte));
        pos += length;
      }
      if (!inAlphabet) {
        bytes.resize(start);
        bytes += token;
      }
    }
    std::vector<std::string> result(1);
    appendUtf8Lossy(result[0], bytes);
    tokens = std::move(result);
  }
  bool hasByteLevel() const override { return true; }
};

/// The replacement character back to spaces; in the first token it is
/// dropped (it was prepended) unless the prepend scheme is "never".
class MetaspaceDecoder : public Decoder {
public:
  MetaspaceDecoder(std::string replacement, bool dropInFirst)
      : replacement(std::move(replacement)), dropInFirst(dropInFirst) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string &token = tokens[i];
      std::string out;
      out.reserve(token.size());
      size_t pos = 0;
      while (pos < token.size()) {
        if (token.compare(pos, replacement.size(), replacement) == 0) {
          if (!(i == 0 && dropInFirst))
            out.push_back(' ');
          pos += replacement.size();
          continue;
        }
        out.push_back(token[pos++]);
      }
      tokens[i] = std::move(out);
    }
  }

private:
  std::string replacement;
  bool dropInFirst;
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern(std::move(pattern)), content(std::move(content)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<Span> spans;
    for (std::string &token : tokens) {
      spans.clear();
      pattern->findMatches(token, spans);
      if (spans.size() == 1 && !spans[0].isMatch)
        continue;
      std::string out;
      for (const Span &span : spans) {
        if (span.isMatch)
          out += content;
        else
          out.append(token, span.begin, span.end - span.begin);
      }
      token = std::move(out);
    }
  }

private:
  std::unique_ptr<Pattern> pattern;
  std::string content;
};

/// Runs of `<0xAB>` tokens become their bytes as text when they are valid
/// UTF-8 as a whole, else one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    auto flush = [&] {
      if (run.empty())
        return;
      if (findInvalidUtf8(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run.size(); ++i)
          out.emplace_back(kReplacementChar);
      }
      run.clear();
    };
    for (std::string &token : tokens) {
      int byte = byteFallbackValue(token);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }
  bool hasByteFallback() const override { return true; }
};

class FuseDecoder : public Decoder {
public:
  void addStreamWindowNeeds(StreamWindowNeeds &needs) const override {
    needs.afterFuse = true;
  }
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string joined;
    for (const std::string &token : tokens)
      joined += token;
    tokens.assign(1, std::move(joined));
  }
};

/// Removes up to `start` leading and `stop` trailing `content` characters
/// from every token.
class StripDecoder : public Decoder {
public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content(std::move(content)), start(start), stop(stop) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t i = 0; i < start && begin < end &&
                         token.compare(begin, content.size(), content) == 0;
           ++i)
        begin += content.size();
      for (size_t i = 0;
           i < stop && end >= begin + content.size() &&
           token.compare(end - content.size(), content.size(), content) == 0;
           ++i)
        end -= content.size();
      if (begin != 0 || end != token.size())
        token = token.substr(begin, end - begin);
    }
  }
  void addStreamWindowNeeds(StreamWindowNeeds &needs) const override {
    // Before a Fuse it strips each token alone.
    if (needs.afterFuse && (start != 0 || stop != 0))
      ++needs.endStrips;
  }

private:
  std::string content;
  size_t start, stop;
};

} // namespace

std::unique_ptr<Decoder> sits::tok::parseDecoder(const JsonNode &node) {
  std::string type = node.type();
  if (type == "Sequence") {
    JsonNode list = node.field("decoders");
    std::vector<std::unique_ptr<Decoder>> members;
    for (size_t i = 0, e = list.arraySize(); i < e; ++i)
      members.push_back(parseDecoder(list.element(i)));
    return std::make_unique<SequenceDecoder>(std::move(members));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    // Older files say add_prefix_space instead of prepend_scheme.
    bool drop;
    JsonNode scheme = node.field("prepend_scheme");
    if (scheme.isNull()) {
      drop = node.boolField("add_prefix_space", true);
    } else {
      std::string name = scheme.asString();
      if (name != "always" && name != "first" && name != "never")
        scheme.fail(quoteJson(name) +
                    " is not a prepend scheme (always, first, never)");
      drop = name != "never";
    }
    return std::make_unique<MetaspaceDecoder>(node.charField("replacement"),
                                              drop);
  }
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(parsePattern(node.field("pattern")),
                                            node.stringField("content"));
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(
        node.charField("content"),
        static_cast<size_t>(node.integerField("start", 0, 1 << 20, 0)),
        static_cast<size_t>(node.integerField("stop", 0, 1 << 20, 0)));
  node.unsupportedType(type, {"Sequence", "ByteLevel", "Metaspace", "Replace",
                              "ByteFallback", "Fuse", "Strip"});
}
