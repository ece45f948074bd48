//===- KVCalibration.h - Statistics of a quantized KV cache -----*- C++ -*-===//
//
// The quantization kernel of a quantized KV cache (codegen's kv_quant.cuh)
// counts, per layer, kv head and K/V, in the engine's `kv_calibration`
// buffer: eight u64 words, [tokens quantized, groups (finite scales),
// values, values clipped, f64 sum of scales, f64 sum of squared errors,
// 0xffffffff - f32 bits of the smallest scale, f32 bits of the largest].
// This turns those words into the calibration log (JSON) and a summary.
// Plain C++17, shared by sits-run, sits-bench and sits-emulate.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_KVCALIBRATION_H
#define SITS_RUNTIME_KVCALIBRATION_H

#include "sits/EngineFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits {
namespace format {

/// Name of the buffer that holds the counters.
constexpr const char *kKVCalibrationBuffer = "kv_calibration";
constexpr int kKVCalibrationWords = 8;

struct KVCalibrationStats {
  uint64_t tokens = 0, groups = 0, values = 0, clipped = 0;
  double scaleMin = 0, scaleMean = 0, scaleMax = 0, meanSquaredError = 0;
};

/// The statistics of (layer, head, K when `keys`) from the buffer's words.
KVCalibrationStats kvCalibrationAt(const KVCacheConfig &kv,
                                   const std::vector<uint64_t> &words,
                                   uint32_t layer, uint32_t head, bool keys);

/// The calibration log: the cache's quantization config, per layer and kv
/// head the K and V statistics, and totals.
std::string kvCalibrationJson(const KVCacheConfig &kv,
                              const std::vector<uint64_t> &words);

/// A few lines: per layer (heads merged) and K/V, tokens, scale
/// min/mean/max, clipped values, mean squared error.
std::string kvCalibrationSummary(const KVCacheConfig &kv,
                                 const std::vector<uint64_t> &words);

/// Whether `path` can be written (its folder exists and is writable, and it
/// is not a folder); false with `*error` naming the cause. Tools check this
/// before a run so that a bad path costs no GPU time.
bool checkWritablePath(const std::string &path, std::string *error);

/// Writes `text` to `path` atomically (a temporary file renamed over it);
/// false with `*error` naming the cause.
bool writeTextFileAtomic(const std::string &path, const std::string &text,
                         std::string *error);

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_KVCALIBRATION_H
