//===- FuzzTokenizer.cpp - Fuzzes tokenizer.json and encoding -------------===//
//
// Input: `tokenizer.json NUL text`. Parses the tokenizer, encodes the text,
// decodes the ids at once and as a stream, and decodes ids taken from the
// text's bytes (some outside the vocabulary). Only sits::Error may come out;
// any other exception escapes and libFuzzer reports it. The stream decoder's
// contract (its pieces add up to decode()) is checked too.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "sits/Error.h"
#include "sits/Tokenizer.h"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto parts = sits::fuzz::splitInput(data, size, 2);
  std::shared_ptr<const sits::Tokenizer> tokenizer;
  try {
    tokenizer = sits::Tokenizer::fromJson(parts[0]);
  } catch (const sits::Error &) {
    return 0;
  }
  std::string_view text = parts[1];
  try {
    std::vector<int32_t> ids = tokenizer->encode(text, true);
    std::string decoded = tokenizer->decode(ids, false);
    sits::TokenStreamDecoder stream(tokenizer, /*skipSpecialTokens=*/false);
    std::string streamed;
    for (int32_t id : ids)
      streamed += stream.push(id);
    streamed += stream.finish();
    if (streamed != decoded)
      __builtin_trap();
    (void)tokenizer->encode(text, false);
  } catch (const sits::Error &) {
  }
  // Ids from the text's bytes, spread past the vocabulary's end.
  std::vector<int32_t> ids;
  uint32_t vocab = tokenizer->vocabSize();
  for (unsigned char c : text.substr(0, 64))
    ids.push_back(static_cast<int32_t>((c * 2654435761u) % (vocab + 2)));
  try {
    (void)tokenizer->decode(ids, true);
  } catch (const sits::Error &) {
  }
  for (int32_t id : ids)
    (void)tokenizer->idToToken(id);
  return 0;
}
