//===- RaiseContribOps.cpp - ONNX Runtime GenAI graphs into sits ----------===//
//
// The GenAI model builder's ops (OnnxContribOps.td) become the sits program
// its dynamo-exported twin raises to:
// - SimplifiedLayerNormalization: sits.rms_norm;
// - SkipSimplifiedLayerNormalization: sits.add, then sits.rms_norm (the sum
//   is its fourth output);
// - MatMulNBits with constant weights: with 4 or 8 bits and the default
//   (or an all-2^(bits-1)) zero point, the levels are kept: sits.dequantize
//   of `q - 2^(bits-1)` (the engine's signed levels, same nibble order) and
//   the scales rounded to f16 (the engine's scale type; the audit gives the
//   largest relative change), feeding sits.linear, so the engine's
//   quantized GEMV reads them unchanged; other zero points are dequantized
//   at compile time, `(q - zero_point) * scale` in f32;
// - GatherBlockQuantized of a constant table (a tied int4 embedding):
//   sits.embedding of the table dequantized to f32.
// GroupQueryAttention: RaiseGroupQueryAttention.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/sits/QuantMath.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

/// The constant 1-D weight of a norm, or null.
Value normWeight(Value weight) {
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  return type && type.getRank() == 1 && getConstant(weight) ? weight : Value();
}

void raiseSimplifiedNorm(RaiseContext &rc, SimplifiedLayerNormalizationOp op) {
  Value weight = normWeight(op.getScale());
  auto type = dyn_cast<RankedTensorType>(op.getX().getType());
  if (!weight || !type || !getFloatElementType(op.getX()) ||
      (op.getAxis() != -1 && op.getAxis() != type.getRank() - 1) ||
      llvm::any_of(op.getInvStdVar(), [](Value v) { return !v.use_empty(); })) {
    rc.noteNotRaised(op, "SimplifiedLayerNormalization over more than the "
                         "last dim, without a constant weight, or with its "
                         "inv_std_var used");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  auto norm =
      RMSNormOp::create(b, op.getLoc(), op.getY().getType(), op.getX(), weight,
                        op.getEpsilonAttr(), b.getF32FloatAttr(0.0f));
  op.getY().replaceAllUsesWith(norm.getResult());
  rc.recordRaise("rms_norms_raised", {op}, "sits.rms_norm",
                 "SimplifiedLayerNormalization over the last dim is "
                 "x / sqrt(mean(x^2) + eps) * w");
}

void raiseSkipNorm(RaiseContext &rc, MsSkipSimplifiedLayerNormalizationOp op) {
  Value weight = normWeight(op.getGamma());
  auto extra = op.getExtraOutputs();
  bool statsUsed = (extra.size() > 0 && !extra[0].use_empty()) ||
                   (extra.size() > 1 && !extra[1].use_empty());
  if (!weight || op.getBias() || statsUsed ||
      op.getInput().getType() != op.getSkip().getType() ||
      op.getOutput().getType() != op.getInput().getType()) {
    rc.noteNotRaised(op, "SkipSimplifiedLayerNormalization with a bias, "
                         "used statistics or operands of different types");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  auto sum = sits::AddOp::create(b, op.getLoc(), op.getInput().getType(),
                                 op.getInput(), op.getSkip());
  auto norm = RMSNormOp::create(b, op.getLoc(), op.getOutput().getType(),
                                sum.getResult(), weight, op.getEpsilonAttr(),
                                b.getF32FloatAttr(0.0f));
  op.getOutput().replaceAllUsesWith(norm.getResult());
  if (extra.size() > 2)
    extra[2].replaceAllUsesWith(sum.getResult());
  rc.recordRaise("rms_norms_raised", {op}, "sits.add, sits.rms_norm",
                 "SkipSimplifiedLayerNormalization is s = input + skip, "
                 "then s / sqrt(mean(s^2) + eps) * gamma; its fourth output "
                 "is s");
}

/// `bits` bits at value `index` of little-endian packed bytes.
int64_t unpackBits(ArrayRef<uint8_t> bytes, int64_t base, int64_t index,
                   int64_t bits) {
  int64_t bit = index * bits;
  return (bytes[base + bit / 8] >> (bit % 8)) & ((int64_t(1) << bits) - 1);
}

/// A block-quantized [n, k] matrix as MatMulNBits and GatherBlockQuantized
/// store it: row r is ceil(k / block) blocks of block * bits / 8 bytes,
/// `(q - zero_point) * scale` per block.
struct BlockQuantized {
  int64_t n, k, bits, block;
  SmallVector<uint8_t> bytes;
  SmallVector<float> scales;
  /// Packed like the levels (per row, ceil(blocks * bits / 8) bytes), or
  /// floats, or neither: 2^(bits-1).
  SmallVector<uint8_t> zpBytes;
  SmallVector<float> zpValues;

  int64_t blocks() const { return (k + block - 1) / block; }
  int64_t blob() const { return block * bits / 8; }
  int64_t zpRow() const { return (blocks() * bits + 7) / 8; }
  float zeroPoint(int64_t row, int64_t j) const {
    if (!zpBytes.empty())
      return static_cast<float>(unpackBits(zpBytes, row * zpRow(), j, bits));
    if (!zpValues.empty())
      return zpValues[row * blocks() + j];
    return static_cast<float>(int64_t(1) << (bits - 1));
  }
  int64_t level(int64_t row, int64_t e) const {
    return unpackBits(bytes, (row * blocks() + e / block) * blob(), e % block,
                      bits);
  }
  /// 4 or 8 bits with zero point 2^(bits-1) everywhere: the engine's
  /// symmetric levels.
  bool isSymmetric() const {
    if ((bits != 4 && bits != 8) || !zpValues.empty())
      return false;
    for (int64_t row = 0; row < n && !zpBytes.empty(); ++row)
      for (int64_t j = 0; j < blocks(); ++j)
        if (zeroPoint(row, j) != static_cast<float>(int64_t(1) << (bits - 1)))
          return false;
    return true;
  }
  /// The [n, k] matrix in f32.
  SmallVector<float> dequantize() const {
    SmallVector<float> weight(n * k);
    for (int64_t row = 0; row < n; ++row)
      for (int64_t e = 0; e < k; ++e)
        weight[row * k + e] =
            (static_cast<float>(level(row, e)) - zeroPoint(row, e / block)) *
            scales[row * blocks() + e / block];
    return weight;
  }
  StringRef describeZeroPoints() const {
    return !zpBytes.empty()    ? "packed zero points"
           : !zpValues.empty() ? "float zero points"
                               : "zero point 2^(bits-1)";
  }
};

/// The constant levels, scales and zero points of a block-quantized
/// matrix, checked against its documented sizes; nullopt otherwise.
std::optional<BlockQuantized> readBlockQuantized(Value levels, Value scales,
                                                 Value zeroPoints, int64_t n,
                                                 int64_t k, int64_t bits,
                                                 int64_t block) {
  BlockQuantized m{n, k, bits, block, {}, {}, {}, {}};
  DenseElementsAttr packed = getDenseConstant(levels);
  DenseElementsAttr scaleValues = getDenseConstant(scales);
  DenseElementsAttr zp = zeroPoints ? getDenseConstant(zeroPoints) : nullptr;
  if (!packed || !scaleValues || (zeroPoints && !zp) ||
      packed.getNumElements() != n * m.blocks() * m.blob() ||
      scaleValues.getNumElements() != n * m.blocks())
    return std::nullopt;
  for (const APInt &v : packed.getValues<APInt>())
    m.bytes.push_back(static_cast<uint8_t>(v.getZExtValue()));
  for (const APFloat &v : scaleValues.getValues<APFloat>())
    m.scales.push_back(v.convertToFloat());
  if (zp && zp.getElementType().isInteger()) {
    for (const APInt &v : zp.getValues<APInt>())
      m.zpBytes.push_back(static_cast<uint8_t>(v.getZExtValue()));
    if (static_cast<int64_t>(m.zpBytes.size()) != n * m.zpRow())
      return std::nullopt;
  } else if (zp) {
    for (const APFloat &v : zp.getValues<APFloat>())
      m.zpValues.push_back(v.convertToFloat());
    if (static_cast<int64_t>(m.zpValues.size()) != n * m.blocks())
      return std::nullopt;
  }
  return m;
}

/// A weight named after the initializer `source` reads (or `fallback`).
std::string weightName(Value source, StringRef fallback) {
  if (auto reshape = definedBy<ReshapeOp>(source))
    source = reshape.getData();
  auto weight = definedBy<WeightOp>(source);
  return weight ? weight.getName().str() : fallback.str();
}

void raiseMatMulNBits(RaiseContext &rc, MsMatMulNBitsOp op) {
  int64_t k = op.getK(), n = op.getN(), bits = op.getBits();
  int64_t block = op.getBlockSize();
  auto type = dyn_cast<RankedTensorType>(op.getY().getType());
  std::optional<BlockQuantized> m = readBlockQuantized(
      op.getB(), op.getScales(), op.getZeroPoints(), n, k, bits, block);
  if (!m || op.getBias() || !type || !type.getElementType().isF32()) {
    rc.noteNotRaised(op, "MatMulNBits with weights, scales or zero points "
                         "that are not constants of the documented sizes, a "
                         "bias, or not f32");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  std::string name = weightName(op.getB(), "matmul_nbits");
  if (m->isSymmetric()) {
    // Levels q - 2^(bits-1), rows of ceil(K * bits / 8) bytes padded with
    // zero levels to a multiple of 16 (what the GEMV streams).
    int64_t middle = int64_t(1) << (bits - 1);
    int64_t packedBytes = (k * bits + 7) / 8;
    int64_t rowBytes = (packedBytes + 15) / 16 * 16;
    SmallVector<int8_t> data(n * rowBytes, 0);
    for (int64_t row = 0; row < n; ++row)
      for (int64_t e = 0; e < k; ++e) {
        int64_t level = m->level(row, e) - middle;
        int8_t &byte = data[row * rowBytes + e * bits / 8];
        if (bits == 8)
          byte = static_cast<int8_t>(level);
        else
          byte = static_cast<int8_t>(
              static_cast<uint8_t>(byte) |
              static_cast<uint8_t>((level & 0xf) << (e % 2 ? 4 : 0)));
      }
    SmallVector<APFloat> halfScales;
    double worst = 0.0;
    for (float scale : m->scales) {
      float rounded = quant::roundToHalf(scale);
      if (scale != 0.0f)
        worst = std::max(worst, std::abs(static_cast<double>(rounded) - scale) /
                                    std::abs(scale));
      APFloat value(rounded);
      bool lost;
      value.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
      halfScales.push_back(value);
    }
    auto dataType = RankedTensorType::get({n, rowBytes}, b.getI8Type());
    auto scalesType = RankedTensorType::get({n, m->blocks()}, b.getF16Type());
    auto dataOp = WeightOp::create(
        b, op.getLoc(), dataType, b.getStringAttr(name),
        DenseElementsAttr::get(dataType, ArrayRef<int8_t>(data)));
    auto scalesOp = WeightOp::create(
        b, op.getLoc(), scalesType, b.getStringAttr(name + ".scales"),
        DenseElementsAttr::get(scalesType, halfScales));
    auto weightType = RankedTensorType::get({n, k}, b.getF32Type());
    auto dequantized = DequantizeOp::create(
        b, op.getLoc(), weightType, dataOp.getResult(), scalesOp.getResult(),
        b.getI64IntegerAttr(bits), b.getI64IntegerAttr(1),
        b.getI64IntegerAttr(block));
    auto linear = LinearOp::create(b, op.getLoc(), op.getY().getType(),
                                   op.getA(), dequantized.getResult(), Value());
    op.getY().replaceAllUsesWith(linear.getResult());
    rc.recordRaise(
        "linears_raised", {op},
        llvm::formatv("sits.linear of sits.dequantize: int{0} levels kept, "
                      "group {1}, f16 scales (largest relative change of a "
                      "scale {2})",
                      bits, block, formatFloat(worst))
            .str(),
        "MatMulNBits with zero point 2^(bits-1) is A . (s * (q - "
        "2^(bits-1)))^T per block: the engine's symmetric levels q - "
        "2^(bits-1) in the same little-endian order, one scale per block of "
        "K (rounded to f16, the engine's scale type)");
    return;
  }
  // W^T [N, K] as the op computes it before its product.
  SmallVector<float> weight = m->dequantize();
  auto weightType = RankedTensorType::get({n, k}, b.getF32Type());
  auto weightOp =
      WeightOp::create(b, op.getLoc(), weightType, b.getStringAttr(name),
                       DenseElementsAttr::get(weightType, ArrayRef(weight)));
  auto linear = LinearOp::create(b, op.getLoc(), op.getY().getType(), op.getA(),
                                 weightOp.getResult(), Value());
  op.getY().replaceAllUsesWith(linear.getResult());
  rc.recordRaise(
      "linears_raised", {op},
      llvm::formatv("sits.linear of the weight dequantized to f32 ({0} bits, "
                    "block {1}, {2})",
                    bits, block, m->describeZeroPoints())
          .str(),
      "MatMulNBits is A . ((q - zero_point) * scale)^T per block of K; the "
      "weight is that product, computed once in f32");
}

/// A quantized embedding table (the GenAI builder's tied int4 one, read
/// from the LM head's MatMulNBits levels through a Reshape) becomes
/// sits.embedding of the table dequantized to f32 at compile time: the
/// engine's embedding reads float rows.
void raiseGatherBlockQuantized(RaiseContext &rc, MsGatherBlockQuantizedOp op) {
  auto dataType = dyn_cast<RankedTensorType>(op.getData().getType());
  auto type = dyn_cast<RankedTensorType>(op.getOutput().getType());
  Value levels = op.getData();
  if (auto reshape = definedBy<ReshapeOp>(levels))
    levels = reshape.getData();
  int64_t bits = op.getBits(), block = op.getBlockSize();
  std::optional<BlockQuantized> m;
  if (dataType && dataType.hasStaticShape() && type &&
      type.getElementType().isF32())
    m = readBlockQuantized(levels, op.getScales(), op.getZeroPoints(),
                           dataType.getDimSize(0),
                           dataType.getDimSize(1) * 8 / bits, bits, block);
  if (!m) {
    rc.noteNotRaised(op, "GatherBlockQuantized whose table, scales or zero "
                         "points are not constants of the documented sizes, "
                         "or not f32");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  SmallVector<float> values = m->dequantize();
  auto tableType = RankedTensorType::get({m->n, m->k}, b.getF32Type());
  auto table = WeightOp::create(
      b, op.getLoc(), tableType,
      b.getStringAttr(weightName(op.getData(), "embedding") + ".dequantized"),
      DenseElementsAttr::get(tableType, ArrayRef(values)));
  auto embedding = EmbeddingOp::create(
      b, op.getLoc(), type, table, op.getIndices(), b.getF32FloatAttr(1.0f));
  op.getOutput().replaceAllUsesWith(embedding.getResult());
  rc.recordRaise(
      "embeddings_raised", {op},
      llvm::formatv("sits.embedding of the table dequantized to f32 ({0} "
                    "bits, block {1}, {2})",
                    bits, block, m->describeZeroPoints())
          .str(),
      "GatherBlockQuantized on axis 0 selects rows of ((q - zero_point) * "
      "scale) per block of the row: an embedding lookup of that table");
}

} // namespace

void sits::onnx::raising::raiseContribOps(RaiseContext &rc) {
  func::FuncOp function = rc.getFunction();
  for (auto op : collectOps<SimplifiedLayerNormalizationOp>(function))
    raiseSimplifiedNorm(rc, op);
  for (auto op : collectOps<MsSkipSimplifiedLayerNormalizationOp>(function))
    raiseSkipNorm(rc, op);
  for (auto op : collectOps<MsMatMulNBitsOp>(function))
    raiseMatMulNBits(rc, op);
  for (auto op : collectOps<MsGatherBlockQuantizedOp>(function))
    raiseGatherBlockQuantized(rc, op);
}
