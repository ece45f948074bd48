//===- TokenStreamDecoder.cpp - Decoding tokens as they arrive ------------===//
//
// The prefix-window method of TGI and `tokenizers`' DecodeStream: decode a
// window of recent ids twice, without and with the new ones, and emit the
// difference once it is final. Decoding the window from its first token on
// both times keeps position-dependent decoders (Metaspace and Strip drop the
// first token's leading space) consistent, and holding back while the text
// ends in U+FFFD keeps byte-level characters split across tokens whole.
// Two rules more than DecodeStream: while the last token is a byte-fallback
// token `<0xAB>` nothing is emitted, because ByteFallback decodes a run of
// them as a whole and one invalid byte turns the entire run into U+FFFD;
// and a new window starts only at a token from which the ids already
// emitted decode to a non-empty text (else the window goes on). That rule
// is for a Strip of a character c from the joined text's ends (after a
// Fuse): a window's ends are not the sequence's. With such a window, when
// the emitted part's text holds a character other than c, its leading and
// trailing runs of c are its own, so both decodes strip them alike, and
// the trailing c held back are the ones the last piece held back; when it
// is all c, being non-empty after the strip it has more c than the strip
// takes from both ends (without the rule, each token of a run of spaces
// lost some). A decoder that strips the joined text more than once decodes
// the whole sequence every time. So the pieces always add up to decode()
// of all the ids.
//
//===----------------------------------------------------------------------===//

#include "TokenizerImpl.h"

#include "Unicode.h"

using namespace sits;
using namespace sits::tok;

struct TokenStreamDecoder::State {
  std::shared_ptr<const Tokenizer> tokenizer;
  const TokenizerImpl *impl = nullptr; // null for other implementations
  bool skipSpecialTokens = true;
  /// The decoder strips the joined text's ends so that no window is exact:
  /// the window is always the whole sequence
  /// (TokenizerImpl::decodesWindowsExactly, asked once).
  bool wholeSequence = false;
  // ids[0, readIndex) decoded to `prefixText` (the window's already emitted
  // part); ids[readIndex, end) are not emitted yet.
  std::vector<int32_t> ids;
  size_t readIndex = 0;
  std::string prefixText;
  bool inByteRun = false;

  /// The text of ids[begin, end).
  std::string decodeRange(size_t begin, size_t end) const {
    if (impl)
      return impl->decodeRange(ids.data() + begin, ids.data() + end,
                               skipSpecialTokens);
    return tokenizer->decode(
        std::vector<int32_t>(ids.begin() + begin, ids.begin() + end),
        skipSpecialTokens);
  }
};

namespace {

bool endsWithReplacement(const std::string &text) {
  return text.size() >= kReplacementChar.size() &&
         text.compare(text.size() - kReplacementChar.size(),
                      kReplacementChar.size(), kReplacementChar) == 0;
}

bool startsWith(const std::string &text, const std::string &prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

TokenStreamDecoder::TokenStreamDecoder(
    std::shared_ptr<const Tokenizer> tokenizer, bool skipSpecialTokens)
    : state(std::make_unique<State>()) {
  if (!tokenizer)
    throw Error(ErrorCode::InvalidArgument,
                "TokenStreamDecoder needs a tokenizer");
  state->impl = dynamic_cast<const TokenizerImpl *>(tokenizer.get());
  state->wholeSequence = state->impl && !state->impl->decodesWindowsExactly();
  state->tokenizer = std::move(tokenizer);
  state->skipSpecialTokens = skipSpecialTokens;
}

TokenStreamDecoder::~TokenStreamDecoder() = default;
TokenStreamDecoder::TokenStreamDecoder(TokenStreamDecoder &&) noexcept =
    default;
TokenStreamDecoder &
TokenStreamDecoder::operator=(TokenStreamDecoder &&) noexcept = default;

std::string TokenStreamDecoder::push(int32_t id) {
  State &s = *state;
  if (s.impl) {
    s.impl->checkId(id);
  } else if (id < 0) {
    throw Error(ErrorCode::TokenOutOfVocab, "token id " + std::to_string(id) +
                                                " is outside the vocabulary");
  }
  s.ids.push_back(id);
  if (s.impl && !s.impl->decodesToNothing(id, s.skipSpecialTokens))
    s.inByteRun = s.impl->continuesByteRun(id, s.skipSpecialTokens);
  if (s.inByteRun)
    return {};

  std::string text = s.decodeRange(0, s.ids.size());
  if (text.size() <= s.prefixText.size() || endsWithReplacement(text) ||
      !startsWith(text, s.prefixText))
    return {};
  std::string fresh = text.substr(s.prefixText.size());
  // The new window starts where the emitted part of this one ended, or
  // 1, 2, 4, ... 64 tokens earlier where that part decodes to nothing (any
  // start whose part decodes to some text will do), else this window goes
  // on.
  constexpr size_t kMostTokensBack = 64;
  std::string windowText;
  size_t start = 0;
  if (!s.wholeSequence)
    for (size_t back = 0; back <= kMostTokensBack && back < s.readIndex;
         back = back ? 2 * back : 1) {
      windowText = s.decodeRange(s.readIndex - back, s.ids.size());
      if (!windowText.empty()) {
        start = s.readIndex - back;
        break;
      }
    }
  if (start == 0)
    windowText = std::move(text);
  s.ids.erase(s.ids.begin(), s.ids.begin() + start);
  s.readIndex = s.ids.size();
  s.prefixText = std::move(windowText);
  return fresh;
}

std::string TokenStreamDecoder::finish() {
  State &s = *state;
  std::string text = s.decodeRange(0, s.ids.size());
  std::string rest;
  if (startsWith(text, s.prefixText)) {
    rest = text.substr(s.prefixText.size());
  } else {
    size_t common = 0;
    while (common < text.size() && common < s.prefixText.size() &&
           text[common] == s.prefixText[common])
      ++common;
    rest = text.substr(common);
  }
  s.ids.clear();
  s.readIndex = 0;
  s.prefixText.clear();
  s.inByteRun = false;
  return rest;
}
