//===- TextStream.h - One sequence's tokens as streamed text ----*- C++ -*-===//
//
// Turns a sequence's tokens into text as they arrive, for printing or
// sending: never half a UTF-8 character (TokenStreamDecoder), and stop
// strings as OpenAI-style APIs define them: generation ends at the first
// occurrence of any stop string, which is not part of the text. Text that
// could still turn out to be the start of a stop string is held back until
// it is known not to be one. CUDA-free: sits-run, the Python package and the
// CPU reference tools share it.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TEXTSTREAM_H
#define SITS_RUNTIME_TEXTSTREAM_H

#include "sits/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace sits {

class TextStream {
public:
  /// Empty stop strings are refused (InvalidArgument).
  TextStream(std::shared_ptr<const Tokenizer> tokenizer,
             std::vector<std::string> stopStrings = {},
             bool skipSpecialTokens = true);

  /// Appends a token; returns the text that became final. Once a stop
  /// string appeared, `stopped()` is true and later tokens add nothing.
  std::string push(int32_t token);
  /// The text held back at the end of the sequence (an incomplete
  /// character as decode() writes it, a partial stop string as text).
  std::string finish();

  bool stopped() const { return stoppedAtString; }
  /// Every piece returned so far, concatenated.
  const std::string &text() const { return emitted; }

private:
  std::string release(std::string pending, bool atEnd);

  TokenStreamDecoder decoder;
  std::vector<std::string> stops;
  std::string held;
  std::string emitted;
  bool stoppedAtString = false;
};

} // namespace sits

#endif // SITS_RUNTIME_TEXTSTREAM_H
