//===- Tvc.h - The TVC LM head's requests (internal) -----------*- C++ -*-===//

#ifndef SITS_RUNTIME_SRC_TVC_H
#define SITS_RUNTIME_SRC_TVC_H

#include <cstdint>
#include <string>

namespace sits::runtime {

/// The largest top-k an engine's TVC head serves exactly (metadata
/// `tvc.exact_top`); 0 when the engine has no TVC head.
uint32_t tvcExactTop(const std::string &metadataJson);

/// Throws InvalidArgument when a TVC head (exactTop > 0) cannot serve the
/// sampling request exactly: it gives exact logits for greedy decoding and
/// top-k with k <= exactTop only, -inf for the tokens it proved cannot
/// enter them, so sampling without top-k would lose the tail.
void checkTvcSampling(uint32_t exactTop, float temperature, uint32_t topK);

} // namespace sits::runtime

#endif // SITS_RUNTIME_SRC_TVC_H
