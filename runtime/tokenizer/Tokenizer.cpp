//===- Tokenizer.cpp - The tokenizer.json pipeline ------------------------===//

#include "TokenizerImpl.h"

#include "JsonConfig.h"
#include "TokenizerJson.h"
#include "Unicode.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace sits;
using namespace sits::tok;

Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::fromJson(std::string_view json) {
  return TokenizerImpl::parse(json);
}

std::shared_ptr<const Tokenizer> Tokenizer::fromFile(const std::string &path) {
  auto fail = [&](const char *why) -> std::shared_ptr<const Tokenizer> {
    throw Error(ErrorCode::InvalidTokenizer,
                "cannot read '" + path + "': " + why);
  };
  // O_NONBLOCK so that a FIFO is refused by fstat instead of blocking the
  // open until a writer comes.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return fail(std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      return fail(std::strerror(saved));
    }
    if (n == 0)
      break;
    text.append(buffer, size_t(n));
  }
  ::close(fd);
  return fromJson(text);
}

std::shared_ptr<const TokenizerImpl>
TokenizerImpl::parse(std::string_view json) {
  TokenizerDocument document = parseTokenizerJson(json);
  JsonNode root(document.dom, "");
  if (!document.dom.is_object())
    root.fail("expected a JSON object");

  auto result = std::shared_ptr<TokenizerImpl>(new TokenizerImpl());
  TokenizerImpl &impl = *result;

  // Encoding options that would change the ids of one text.
  JsonNode truncation = root.field("truncation");
  if (!truncation.isNull())
    truncation.fail("truncation is not supported (it must be null; callers "
                    "limit lengths themselves)");
  JsonNode padding = root.field("padding");
  if (!padding.isNull()) {
    // Padding to the longest of a batch does nothing to one text.
    JsonNode strategy = padding.field("strategy");
    bool batchLongest = strategy.value().is_string() &&
                        strategy.value().get<std::string>() == "BatchLongest";
    if (!batchLongest || !padding.field("pad_to_multiple_of").isNull())
      padding.fail("padding is not supported (only null, or BatchLongest "
                   "without pad_to_multiple_of, which changes no single "
                   "encoding)");
  }

  JsonNode model = root.field("model");
  if (model.isNull())
    model.fail("missing (the model is required)");
  // Old files may leave out the type of a BPE model.
  std::string modelType =
      model.has("type") ? model.type()
                        : (document.tables.haveMerges ? "BPE" : std::string());
  if (modelType != "BPE") {
    if (modelType.empty())
      model.field("type").fail("missing (every component names its type)");
    model.field("type").fail(quoteJson(modelType) +
                             " is not supported (supported: BPE)");
  }
  impl.model = BpeModel::parse(model, document.tables);

  if (JsonNode node = root.field("normalizer"); !node.isNull())
    impl.normalizer = parseNormalizer(node);
  if (JsonNode node = root.field("pre_tokenizer"); !node.isNull())
    impl.preTokenizer = parsePreTokenizer(node);
  if (JsonNode node = root.field("post_processor"); !node.isNull())
    impl.postProcessor =
        std::make_unique<PostProcessor>(PostProcessor::parse(node));
  if (JsonNode node = root.field("decoder"); !node.isNull())
    impl.decoder = parseDecoder(node);
  impl.added.build(root.field("added_tokens"), *impl.model,
                   impl.normalizer.get());

  impl.vocabLimit = std::max<uint32_t>(
      impl.model->idLimit(), static_cast<uint32_t>(impl.added.maxId() + 1));
  return result;
}

void TokenizerImpl::encodePiece(std::string_view text, bool atStart,
                                std::vector<int32_t> &ids) const {
  if (text.empty())
    return;
  if (!preTokenizer) {
    model->tokenize(text, ids);
    return;
  }
  preTokenizer->split(text, atStart, [&](std::string_view piece, bool) {
    model->tokenize(piece, ids);
  });
}

std::vector<int32_t> TokenizerImpl::encode(std::string_view text,
                                           bool addSpecialTokens) const {
  size_t invalid = findInvalidUtf8(text);
  if (invalid != std::string_view::npos)
    throw Error(ErrorCode::InvalidText,
                "text is not valid UTF-8 at byte offset " +
                    std::to_string(invalid));

  std::vector<int32_t> ids;
  std::vector<Segment> segments, normalizedSegments;
  if (added.hasRawTokens())
    added.splitRaw(text, segments);
  else if (!text.empty())
    segments.push_back({0, text.size(), -1});

  std::string normalized;
  for (const Segment &segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    std::string_view piece =
        text.substr(segment.begin, segment.end - segment.begin);
    bool atStart = segment.begin == 0;
    if (normalizer) {
      normalized.assign(piece);
      normalizer->normalize(normalized);
      piece = normalized;
    }
    if (!added.hasNormalizedTokens()) {
      encodePiece(piece, atStart, ids);
      continue;
    }
    normalizedSegments.clear();
    added.splitNormalized(piece, normalizedSegments);
    for (const Segment &inner : normalizedSegments) {
      if (inner.id >= 0)
        ids.push_back(inner.id);
      else
        encodePiece(piece.substr(inner.begin, inner.end - inner.begin),
                    atStart && inner.begin == 0, ids);
    }
  }
  if (addSpecialTokens && postProcessor)
    ids = postProcessor->apply(std::move(ids));
  return ids;
}

// Only negative ids are refused: ids past the vocabulary decode to nothing,
// as in `tokenizers`, because models pad their vocabulary beyond their
// tokenizer's (Qwen2: 151936 rows for 151665 tokens) and may sample there.
void TokenizerImpl::checkId(int32_t id) const {
  if (id < 0)
    throw Error(ErrorCode::TokenOutOfVocab,
                "token id " + std::to_string(id) +
                    " is outside the vocabulary [0, " +
                    std::to_string(vocabLimit) + ")");
}

const std::string *TokenizerImpl::decodeString(int32_t id,
                                               bool skipSpecialTokens) const {
  const std::string *token = added.contentOf(id);
  if (!token)
    token = model->idToToken(id);
  if (token && skipSpecialTokens && added.isSpecialContent(*token))
    return nullptr;
  return token;
}

std::string TokenizerImpl::decodeRange(const int32_t *begin, const int32_t *end,
                                       bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(static_cast<size_t>(end - begin));
  for (const int32_t *it = begin; it != end; ++it)
    if (const std::string *token = decodeString(*it, skipSpecialTokens))
      tokens.push_back(*token);
  std::string text;
  if (!decoder) {
    // Without a decoder `tokenizers` joins the tokens with spaces.
    for (size_t i = 0; i < tokens.size(); ++i)
      text += (i ? " " : "") + tokens[i];
    return text;
  }
  decoder->decodeChain(tokens);
  for (const std::string &token : tokens)
    text += token;
  return text;
}

std::string TokenizerImpl::decode(const std::vector<int32_t> &ids,
                                  bool skipSpecialTokens) const {
  for (int32_t id : ids)
    checkId(id);
  return decodeRange(ids.data(), ids.data() + ids.size(), skipSpecialTokens);
}

bool TokenizerImpl::decodesWindowsExactly() const {
  if (!decoder)
    return true;
  StreamWindowNeeds needs;
  decoder->addStreamWindowNeeds(needs);
  return needs.endStrips <= 1;
}

bool TokenizerImpl::continuesByteRun(int32_t id, bool skipSpecialTokens) const {
  if (!decoder || !decoder->hasByteFallback())
    return false;
  const std::string *token = decodeString(id, skipSpecialTokens);
  return token && byteFallbackValue(*token) >= 0;
}

bool TokenizerImpl::decodesToNothing(int32_t id, bool skipSpecialTokens) const {
  return decodeString(id, skipSpecialTokens) == nullptr;
}

std::optional<int32_t> TokenizerImpl::tokenToId(std::string_view token) const {
  if (auto id = added.idOf(token))
    return id;
  return model->tokenToId(token);
}

std::string TokenizerImpl::idToToken(int32_t id) const {
  if (const std::string *token = added.contentOf(id))
    return *token;
  if (const std::string *token = model->idToToken(id))
    return *token;
  return {};
}

std::string TokenizerImpl::kind() const {
  if ((preTokenizer && preTokenizer->hasByteLevel()) ||
      (decoder && decoder->hasByteLevel()))
    return "byte-level BPE";
  if (model->usesByteFallback())
    return "SentencePiece-style BPE (byte fallback)";
  return "BPE";
}
