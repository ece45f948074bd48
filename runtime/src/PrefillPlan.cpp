//===- PrefillPlan.cpp - Splitting prompts into prefill chunks ------------===//

#include "src/PrefillPlan.h"

#include <algorithm>

namespace sits {
namespace runtime {

std::vector<std::vector<uint32_t>>
planPrefillChunks(const std::vector<uint32_t> &lengths, uint32_t chunk) {
  uint32_t longest = 0;
  for (uint32_t length : lengths)
    longest = std::max(longest, length);
  const uint32_t chunks = (longest + chunk - 1) / chunk;
  std::vector<std::vector<uint32_t>> counts(
      chunks, std::vector<uint32_t>(lengths.size(), 0));
  for (size_t b = 0; b < lengths.size(); ++b) {
    // The final chunk takes what the earlier ones cannot (at least one
    // token); the earlier ones fill up front to back.
    uint64_t earlierRoom = uint64_t(chunks - 1) * chunk;
    uint32_t last = lengths[b] > earlierRoom
                        ? static_cast<uint32_t>(lengths[b] - earlierRoom)
                        : 1;
    uint32_t rest = lengths[b] - last;
    for (uint32_t c = 0; c + 1 < chunks; ++c) {
      counts[c][b] = std::min(chunk, rest);
      rest -= counts[c][b];
    }
    counts[chunks - 1][b] = last;
  }
  return counts;
}

} // namespace runtime
} // namespace sits
