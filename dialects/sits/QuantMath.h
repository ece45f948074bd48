//===- QuantMath.h - Exact rounding of sits.quantize/dequantize -*- C++ -*-===//
//
// The arithmetic that `sits.quantize` and `sits.dequantize` specify
// (SitsOps.td), in one place: `--sits-insert-qdq` quantizes weights with it at
// compile time, `--sits-fuse-tvc` dequantizes them to factor the LM head, and
// the CPU reference executor runs the ops with it. A GPU kernel that computes
// anything else differs from the specification.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_QUANTMATH_H
#define SITS_DIALECT_SITS_QUANTMATH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sits::quant {

/// The largest quantized magnitude: 127 for 8 bits, 7 for 4 bits (the range
/// is symmetric; -128 and -8 are never produced).
int maxLevel(unsigned bits);

/// `value` rounded to the nearest IEEE half (ties to even, subnormals kept,
/// overflow to infinity), returned as the exact f32 of that half.
float roundToHalf(float value);

/// The scale of a group whose largest magnitude is `absMax`:
/// non-finite `absMax` -> NaN; else `s = absMax / maxLevel` (f32 division),
/// then, for f16 scales, rounded to f16 and saturated at 65504.
float groupScale(float absMax, unsigned bits, bool halfScale);

/// One element: `clamp(rint(x / scale), -maxLevel, maxLevel)` (f32
/// division, round half to even); 0 when the scale is 0 or NaN. `clipped`
/// is set when the clamp changed the value.
int quantizeElement(float x, float scale, unsigned bits, bool *clipped);

/// Where groups and packed bytes of a grouped tensor lie. Groups are
/// `groupSize` consecutive indices along `axis` (the last group of a line
/// may be shorter); int4 values are packed two per byte along the last
/// dimension (even index in the low nibble), each last-dimension row taking
/// `rowBytes` bytes (at least the packed size; the rest is zero padding).
struct GroupLayout {
  llvm::SmallVector<int64_t, 6> shape;
  int64_t axis = 0;
  int64_t groupSize = 1;
  unsigned bits = 8;
  int64_t rowBytes = 0;

  /// Checks the fields against each other; a message naming the problem.
  std::optional<std::string> check() const;
  /// Bytes a last-dimension row needs without padding.
  static int64_t packedRowBytes(int64_t lastDim, unsigned bits);
  /// Shape of the stored data: `shape` with the last dimension `rowBytes`.
  llvm::SmallVector<int64_t, 6> dataShape() const;
  /// Shape of the scales: `shape` with dimension `axis` divided by the group
  /// size (rounded up).
  llvm::SmallVector<int64_t, 6> scaleShape() const;
  int64_t numElements() const;
  int64_t numDataBytes() const;
  int64_t numScales() const;
};

/// What a quantization did, for audits and calibration logs.
struct QuantStats {
  int64_t groups = 0;
  int64_t values = 0;
  int64_t clipped = 0;
  /// Over groups with a finite scale.
  double scaleMin = 0, scaleMax = 0, scaleSum = 0;
  int64_t finiteScales = 0;
  /// Sum of (x - dequantized x)^2 and the largest |x - dequantized x|.
  double squaredError = 0, maxAbsError = 0;
};

/// sits.quantize: `x` (layout.numElements() values, row-major) into `data`
/// (layout.numDataBytes() bytes: int8 values or packed int4 nibbles, padding
/// zero) and `scales` (layout.numScales() values, exact in the scale type).
///
/// With `clipRatios` (compile-time weight quantization), each group's scale
/// is instead `groupScale(f32(absmax * c))` for the ratio `c` whose levels
/// (the same rounding and clamp) give the smallest sum of squared errors;
/// ties keep the earlier ratio.
void quantize(const float *x, const GroupLayout &layout, bool halfScales,
              int8_t *data, float *scales, QuantStats *stats = nullptr,
              llvm::ArrayRef<float> clipRatios = {});

/// The outer slices of `layout` (the dimensions before its axis): quantize
/// in parts with quantizeOuter.
int64_t outerSlices(const GroupLayout &layout);

/// quantize for the outer slices [outerBegin, outerEnd) only: `x` holds
/// their values; `data` and `scales` are the whole tensor's, of which the
/// slices' rows and scales are written (slices own whole stored rows, so
/// disjoint ranges may be quantized concurrently). `stats` gets the
/// slices' statistics; mergeStats adds such parts up.
void quantizeOuter(const float *x, const GroupLayout &layout,
                   int64_t outerBegin, int64_t outerEnd, bool halfScales,
                   int8_t *data, float *scales, QuantStats *stats = nullptr,
                   llvm::ArrayRef<float> clipRatios = {});

/// Adds the statistics of another part of a tensor to `into`.
void mergeStats(QuantStats &into, const QuantStats &from);

/// sits.dequantize: `out[i] = scale(i) * q(i)`, one f32 product.
void dequantize(const int8_t *data, const float *scales,
                const GroupLayout &layout, float *out);

/// The signed value of int4 element `index` of a packed row.
inline int unpackNibble(const int8_t *row, int64_t index) {
  uint8_t byte = static_cast<uint8_t>(row[index / 2]);
  int nibble = (index % 2) ? (byte >> 4) : (byte & 0xF);
  return nibble >= 8 ? nibble - 16 : nibble;
}

} // namespace sits::quant

#endif // SITS_DIALECT_SITS_QUANTMATH_H
