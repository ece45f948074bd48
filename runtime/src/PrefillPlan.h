//===- PrefillPlan.h - Splitting prompts into prefill chunks ---*- C++ -*-===//

#ifndef SITS_RUNTIME_SRC_PREFILLPLAN_H
#define SITS_RUNTIME_SRC_PREFILLPLAN_H

#include <cstdint>
#include <vector>

namespace sits {
namespace runtime {

/// Tokens of each sequence in each prefill chunk: result[c][b]. Every chunk
/// takes at most `chunk` tokens of a sequence, in order, and every
/// sequence's last token lands in the final chunk (whose logits are
/// sampled); earlier chunks of a short sequence may take none. The number of
/// chunks is ceil(longest / chunk). Lengths must be >= 1, chunk >= 1.
std::vector<std::vector<uint32_t>>
planPrefillChunks(const std::vector<uint32_t> &lengths, uint32_t chunk);

} // namespace runtime
} // namespace sits

#endif // SITS_RUNTIME_SRC_PREFILLPLAN_H
