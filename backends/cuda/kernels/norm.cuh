//===- norm.cuh - RMSNorm and LayerNorm, one block per token --------------===//
//
// rms_norm reads its row and weights once into registers; layer_norm reads
// the row once per pass (it stays in L1). The sums are in f32, and the
// formulas are the reference executor's:
//   rms_norm:   y = x / sqrt(mean(x^2) + eps) * (w + offset)
//   layer_norm: y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * w + b
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_NORM_CUH
#define SITS_KERNELS_NORM_CUH

#include "sits/common.cuh"

namespace sits {

/// Config: kHidden, kEpsilon, kWeightOffset, kThreads, kOperandBits,
/// Operand. With kOperandBits (16, 8 or 4), `out` is rows of kHidden
/// halves: the operands of the tensor-core GEMV over weights of those bits
/// that reads them (operandHalfIndex),
/// rounded to Operand (F16/BF16) as that GEMV would round them; else f32.
template <class Cfg>
__device__ void rmsNorm(const float *SITS_RESTRICT input,
                        const float *SITS_RESTRICT weight, void *out) {
  const long base = static_cast<long>(tileIndex().x) * Cfg::kHidden;
  const float *x = input + base;
  // The thread's elements and their weights are loaded at once and kept in
  // registers: one trip to memory instead of three in a row.
  constexpr int kPer = (Cfg::kHidden + Cfg::kThreads - 1) / Cfg::kThreads;
  float values[kPer], scales[kPer];
  float squares = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    const int d = threadIdx.x + j * Cfg::kThreads;
    values[j] = d < Cfg::kHidden ? x[d] : 0.0f;
    scales[j] = d < Cfg::kHidden ? weight[d] + Cfg::kWeightOffset : 0.0f;
  }
  for (int j = 0; j < kPer; ++j)
    squares += values[j] * values[j];
  squares = blockSum<Cfg::kThreads>(squares);
  const float rms =
      sqrtf(squares / static_cast<float>(Cfg::kHidden) + Cfg::kEpsilon);
  for (int j = 0; j < kPer; ++j) {
    const int d = threadIdx.x + j * Cfg::kThreads;
    if (d >= Cfg::kHidden)
      continue;
    const float y = values[j] / rms * scales[j];
    if constexpr (Cfg::kOperandBits != 0)
      (static_cast<u16 *>(out) + base)[operandHalfIndex<Cfg::kOperandBits>(d)] =
          Cfg::Operand::store(y);
    else
      (static_cast<float *>(out) + base)[d] = y;
  }
}

/// Config: kHidden, kEpsilon, kHasBias, kThreads. `bias` is unused without
/// kHasBias.
template <class Cfg>
__device__ void
layerNorm(const float *SITS_RESTRICT input, const float *SITS_RESTRICT weight,
          const float *SITS_RESTRICT bias, float *SITS_RESTRICT out) {
  const long base = static_cast<long>(tileIndex().x) * Cfg::kHidden;
  const float *x = input + base;
  float *y = out + base;
  float sum = 0.0f;
  for (int d = threadIdx.x; d < Cfg::kHidden; d += Cfg::kThreads)
    sum += x[d];
  const float mean =
      blockSum<Cfg::kThreads>(sum) / static_cast<float>(Cfg::kHidden);
  float squares = 0.0f;
  for (int d = threadIdx.x; d < Cfg::kHidden; d += Cfg::kThreads) {
    float centered = x[d] - mean;
    squares += centered * centered;
  }
  const float variance =
      blockSum<Cfg::kThreads>(squares) / static_cast<float>(Cfg::kHidden);
  const float deviation = sqrtf(variance + Cfg::kEpsilon);
  for (int d = threadIdx.x; d < Cfg::kHidden; d += Cfg::kThreads) {
    float value = (x[d] - mean) / deviation * weight[d];
    if constexpr (Cfg::kHasBias)
      value += bias[d];
    y[d] = value;
  }
}

} // namespace sits

#endif // SITS_KERNELS_NORM_CUH
