//===- Sampling.h - Sampling and step-advance kernels ----------*- C++ -*-===//
//
// Kernels compiled by nvcc into the runtime library. They run after the
// engine's own launches in every step and are captured into the same CUDA
// graph, so their inputs (parameters, lengths) live in device memory and
// change without re-capture.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_SAMPLING_H
#define SITS_RUNTIME_SRC_SAMPLING_H

#include <cstdint>
#include <cuda_runtime_api.h>

namespace sits {
namespace runtime {

/// Per-sequence sampling parameters, in device memory.
struct DeviceSamplingParams {
  float temperature; ///< <= 0: greedy
  uint32_t topK;     ///< 0: no top-k
  float topP;        ///< >= 1: no top-p
  /// Tells apart sequences sharing a seed (SamplingDraw.h): the index in a
  /// generate batch, 0 for a sequence of Session::step.
  uint32_t stream;
  uint64_t seed;
};

/// Samples one token per sequence from `logits` ([batch, stride] f32, the
/// first `vocab` columns used) into `tokens`, before the step's advance.
/// Randomness is Philox4x32-10 keyed by the seed, with the counter (index
/// of the token drawn, pastLengths[b] + stepLengths[b]; the stream):
/// deterministic, and a sequence's own (SamplingDraw.h).
cudaError_t launchSample(const float *logits, uint32_t batch, uint32_t vocab,
                         uint64_t stride, const DeviceSamplingParams *params,
                         const int32_t *pastLengths, const int32_t *stepLengths,
                         int32_t *tokens, cudaStream_t stream);

/// Ends a step: pastLengths[b] += stepLengths[b] for b < batch; when
/// `sampled` is set, tokenIds[b] = sampled[b] (the next decode input).
cudaError_t launchAdvance(int32_t *pastLengths, const int32_t *stepLengths,
                          uint32_t batch, const int32_t *sampled,
                          int32_t *tokenIds, cudaStream_t stream);

/// Loads the kernels now: a lazily loaded kernel must not load during
/// stream capture.
cudaError_t preloadSamplingKernels();

} // namespace runtime
} // namespace sits

#endif // SITS_RUNTIME_SRC_SAMPLING_H
