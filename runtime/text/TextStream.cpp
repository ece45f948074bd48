//===- TextStream.cpp - One sequence's tokens as streamed text ------------===//

#include "sits/TextStream.h"

#include <algorithm>

namespace sits {

TextStream::TextStream(std::shared_ptr<const Tokenizer> tokenizer,
                       std::vector<std::string> stopStrings,
                       bool skipSpecialTokens)
    : decoder(std::move(tokenizer), skipSpecialTokens),
      stops(std::move(stopStrings)) {
  for (const std::string &stop : stops)
    if (stop.empty())
      throw Error(ErrorCode::InvalidArgument, "a stop string is empty");
}

std::string TextStream::release(std::string pending, bool atEnd) {
  // The earliest stop string ends the text before it.
  size_t cut = std::string::npos;
  for (const std::string &stop : stops)
    cut = std::min(cut, pending.find(stop));
  if (cut != std::string::npos) {
    stoppedAtString = true;
    held.clear();
    pending.resize(cut);
    emitted += pending;
    return pending;
  }
  // Hold back the longest tail that a stop string could start with. A stop
  // string can only begin there: everything before was checked with it.
  size_t keep = 0;
  if (!atEnd)
    for (const std::string &stop : stops)
      for (size_t n = std::min(stop.size() - 1, pending.size()); n > keep; --n)
        if (pending.compare(pending.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
  held = pending.substr(pending.size() - keep);
  pending.resize(pending.size() - keep);
  emitted += pending;
  return pending;
}

std::string TextStream::push(int32_t token) {
  if (stoppedAtString)
    return {};
  return release(held + decoder.push(token), /*atEnd=*/false);
}

std::string TextStream::finish() {
  if (stoppedAtString)
    return {};
  return release(held + decoder.finish(), /*atEnd=*/true);
}

} // namespace sits
