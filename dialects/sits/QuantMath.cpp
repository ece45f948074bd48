//===- QuantMath.cpp - The exact rounding of sits.quantize/dequantize -----===//

#include "dialects/sits/QuantMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace sits::quant;

int sits::quant::maxLevel(unsigned bits) { return bits == 4 ? 7 : 127; }

float sits::quant::roundToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = bits & 0x80000000u;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xFF);
  uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFF)
    return value; // NaN stays NaN, infinities stay.
  auto withSign = [&](float magnitude) {
    return sign ? -magnitude : magnitude;
  };
  if (exponent == 0)
    return withSign(0.0f); // f32 subnormals are far below half's 2^-24.
  int32_t halfExponent = exponent - 127 + 15;
  if (halfExponent <= 0) {
    // A half subnormal: a multiple of 2^-24. value / 2^-24 =
    // (1.mantissa) * 2^(exponent - 126), rounded half to even.
    int32_t shift = 126 - exponent;
    uint32_t full = mantissa | 0x800000u;
    if (shift > 24)
      return withSign(0.0f);
    uint32_t quotient = full >> shift;
    uint32_t remainder = full & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (quotient & 1)))
      ++quotient;
    return withSign(std::ldexp(static_cast<float>(quotient), -24));
  }
  uint32_t kept = mantissa >> 13;
  uint32_t remainder = mantissa & 0x1FFFu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (kept & 1)))
    ++kept;
  if (kept == 0x400u) {
    kept = 0;
    ++halfExponent;
  }
  if (halfExponent >= 31)
    return withSign(std::numeric_limits<float>::infinity());
  uint32_t out = sign | (static_cast<uint32_t>(halfExponent - 15 + 127) << 23) |
                 (kept << 13);
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

float sits::quant::groupScale(float absMax, unsigned bits, bool halfScale) {
  if (!std::isfinite(absMax))
    return std::numeric_limits<float>::quiet_NaN();
  float scale = absMax / static_cast<float>(maxLevel(bits));
  if (halfScale) {
    scale = roundToHalf(scale);
    if (!(scale <= 65504.0f))
      scale = 65504.0f;
  }
  return scale;
}

int sits::quant::quantizeElement(float x, float scale, unsigned bits,
                                 bool *clipped) {
  if (clipped)
    *clipped = false;
  if (!(scale > 0.0f))
    return 0;
  float level = std::nearbyint(x / scale);
  float limit = static_cast<float>(maxLevel(bits));
  if (level > limit || level < -limit) {
    if (clipped)
      *clipped = true;
    level = level > 0 ? limit : -limit;
  }
  return static_cast<int>(level);
}

//===----------------------------------------------------------------------===//
// GroupLayout
//===----------------------------------------------------------------------===//

int64_t GroupLayout::packedRowBytes(int64_t lastDim, unsigned bits) {
  return bits == 4 ? (lastDim + 1) / 2 : lastDim;
}

std::optional<std::string> GroupLayout::check() const {
  if (shape.empty())
    return std::string("a quantized tensor must have rank >= 1");
  if (bits != 4 && bits != 8)
    return "bits must be 4 or 8, got " + std::to_string(bits);
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return "axis " + std::to_string(axis) + " is outside rank " +
           std::to_string(shape.size());
  if (groupSize < 1)
    return "group_size must be >= 1, got " + std::to_string(groupSize);
  for (int64_t dim : shape)
    if (dim < 0)
      return std::string("dimensions must be known");
  int64_t minimum = packedRowBytes(shape.back(), bits);
  if (rowBytes < minimum || rowBytes > minimum + 15)
    return "rows take " + std::to_string(rowBytes) + " bytes, but " +
           std::to_string(shape.back()) + " " + std::to_string(bits) +
           "-bit values need " + std::to_string(minimum) +
           " (plus at most 15 bytes of padding)";
  return std::nullopt;
}

llvm::SmallVector<int64_t, 6> GroupLayout::dataShape() const {
  llvm::SmallVector<int64_t, 6> result(shape);
  result.back() = rowBytes;
  return result;
}

llvm::SmallVector<int64_t, 6> GroupLayout::scaleShape() const {
  llvm::SmallVector<int64_t, 6> result(shape);
  result[axis] = (shape[axis] + groupSize - 1) / groupSize;
  return result;
}

static int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims)
    count *= dim;
  return count;
}

int64_t GroupLayout::numElements() const { return product(shape); }
int64_t GroupLayout::numDataBytes() const { return product(dataShape()); }
int64_t GroupLayout::numScales() const { return product(scaleShape()); }

//===----------------------------------------------------------------------===//
// Quantize and dequantize
//===----------------------------------------------------------------------===//

namespace {
/// Visits every group: `outer` x `groups` x `inner` with the flat indices of
/// the group's elements and of its scale.
struct GroupWalk {
  int64_t outer, extent, inner, groupSize, groups, lastDim, rowBytes;
  unsigned bits;

  explicit GroupWalk(const GroupLayout &layout)
      : outer(product(
            llvm::ArrayRef<int64_t>(layout.shape).take_front(layout.axis))),
        extent(layout.shape[layout.axis]),
        inner(product(
            llvm::ArrayRef<int64_t>(layout.shape).drop_front(layout.axis + 1))),
        groupSize(layout.groupSize),
        groups((extent + layout.groupSize - 1) / layout.groupSize),
        lastDim(layout.shape.back()), rowBytes(layout.rowBytes),
        bits(layout.bits) {}

  int64_t element(int64_t o, int64_t a, int64_t i) const {
    return (o * extent + a) * inner + i;
  }
  int64_t scale(int64_t o, int64_t g, int64_t i) const {
    return (o * groups + g) * inner + i;
  }
  /// The stored value of element `flat`.
  int load(const int8_t *data, int64_t flat) const {
    const int8_t *row = data + (flat / lastDim) * rowBytes;
    int64_t column = flat % lastDim;
    return bits == 4 ? unpackNibble(row, column) : row[column];
  }
  void store(int8_t *data, int64_t flat, int value) const {
    int8_t *row = data + (flat / lastDim) * rowBytes;
    int64_t column = flat % lastDim;
    if (bits == 8) {
      row[column] = static_cast<int8_t>(value);
      return;
    }
    uint8_t byte = static_cast<uint8_t>(row[column / 2]);
    uint8_t nibble = static_cast<uint8_t>(value) & 0xF;
    byte = (column % 2) ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4))
                        : static_cast<uint8_t>((byte & 0xF0) | nibble);
    row[column / 2] = static_cast<int8_t>(byte);
  }
};
} // namespace

/// Sum of squared errors of quantizing `x[flat(a)]`, a in [begin, end),
/// with `scale`.
template <typename Flat>
static double groupError(const float *x, Flat flat, int64_t begin, int64_t end,
                         float scale, unsigned bits) {
  double sum = 0;
  for (int64_t a = begin; a < end; ++a) {
    float value = x[flat(a)];
    int level = quantizeElement(value, scale, bits, nullptr);
    double error = double(value) - double(scale * float(level));
    sum += error * error;
  }
  return sum;
}

int64_t sits::quant::outerSlices(const GroupLayout &layout) {
  return GroupWalk(layout).outer;
}

void sits::quant::quantizeOuter(const float *x, const GroupLayout &layout,
                                int64_t outerBegin, int64_t outerEnd,
                                bool halfScales, int8_t *data, float *scales,
                                QuantStats *stats,
                                llvm::ArrayRef<float> clipRatios) {
  GroupWalk walk(layout);
  if (outerBegin >= outerEnd || walk.lastDim == 0)
    return;
  // The slices own whole stored rows: a slice is extent * inner elements,
  // a multiple of the last dimension (axis < rank - 1), or one row.
  const int64_t sliceRows = walk.extent * walk.inner / walk.lastDim;
  std::fill(data + outerBegin * sliceRows * walk.rowBytes,
            data + outerEnd * sliceRows * walk.rowBytes, int8_t(0));
  // `x` holds the slices from outerBegin.
  x -= walk.element(outerBegin, 0, 0);
  for (int64_t o = outerBegin; o < outerEnd; ++o)
    for (int64_t g = 0; g < walk.groups; ++g) {
      int64_t begin = g * walk.groupSize;
      int64_t end = std::min(walk.extent, begin + walk.groupSize);
      for (int64_t i = 0; i < walk.inner; ++i) {
        float absMax = 0.0f;
        bool nonFinite = false;
        for (int64_t a = begin; a < end; ++a) {
          float value = x[walk.element(o, a, i)];
          nonFinite |= !std::isfinite(value);
          absMax = std::max(absMax, std::fabs(value));
        }
        float scale = groupScale(
            nonFinite ? std::numeric_limits<float>::infinity() : absMax,
            layout.bits, halfScales);
        if (!nonFinite && !clipRatios.empty()) {
          auto flat = [&](int64_t a) { return walk.element(o, a, i); };
          double best = std::numeric_limits<double>::infinity();
          for (float ratio : clipRatios) {
            float candidate =
                groupScale(absMax * ratio, layout.bits, halfScales);
            double error =
                groupError(x, flat, begin, end, candidate, layout.bits);
            if (error < best) {
              best = error;
              scale = candidate;
            }
          }
        }
        scales[walk.scale(o, g, i)] = scale;
        for (int64_t a = begin; a < end; ++a) {
          int64_t flat = walk.element(o, a, i);
          bool clipped;
          int level = quantizeElement(x[flat], scale, layout.bits, &clipped);
          walk.store(data, flat, level);
          if (stats) {
            stats->clipped += clipped;
            double error = double(x[flat]) - double(scale * float(level));
            if (std::isfinite(error)) {
              stats->squaredError += error * error;
              stats->maxAbsError =
                  std::max(stats->maxAbsError, std::fabs(error));
            }
          }
        }
        if (!stats)
          continue;
        ++stats->groups;
        stats->values += end - begin;
        if (std::isfinite(scale)) {
          stats->scaleMin = stats->finiteScales
                                ? std::min<double>(stats->scaleMin, scale)
                                : scale;
          stats->scaleMax = std::max<double>(stats->scaleMax, scale);
          stats->scaleSum += scale;
          ++stats->finiteScales;
        }
      }
    }
}

void sits::quant::quantize(const float *x, const GroupLayout &layout,
                           bool halfScales, int8_t *data, float *scales,
                           QuantStats *stats,
                           llvm::ArrayRef<float> clipRatios) {
  quantizeOuter(x, layout, 0, outerSlices(layout), halfScales, data, scales,
                stats, clipRatios);
}

void sits::quant::mergeStats(QuantStats &into, const QuantStats &from) {
  into.groups += from.groups;
  into.values += from.values;
  into.clipped += from.clipped;
  if (from.finiteScales) {
    into.scaleMin = into.finiteScales ? std::min(into.scaleMin, from.scaleMin)
                                      : from.scaleMin;
    into.scaleMax = into.finiteScales ? std::max(into.scaleMax, from.scaleMax)
                                      : from.scaleMax;
    into.scaleSum += from.scaleSum;
    into.finiteScales += from.finiteScales;
  }
  into.squaredError += from.squaredError;
  into.maxAbsError = std::max(into.maxAbsError, from.maxAbsError);
}

void sits::quant::dequantize(const int8_t *data, const float *scales,
                             const GroupLayout &layout, float *out) {
  GroupWalk walk(layout);
  for (int64_t o = 0; o < walk.outer; ++o)
    for (int64_t a = 0; a < walk.extent; ++a) {
      int64_t g = a / walk.groupSize;
      for (int64_t i = 0; i < walk.inner; ++i) {
        int64_t flat = walk.element(o, a, i);
        out[flat] = scales[walk.scale(o, g, i)] *
                    static_cast<float>(walk.load(data, flat));
      }
    }
}
