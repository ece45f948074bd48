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
// - GroupQueryAttention over its own cache (past inputs, present outputs):
//   the graph at an empty past, as for exports with past key/values
//   (RaisePastKV.cpp): a packed query Split into q, k and v (which the
//   projections phase turns into three linears), split heads, RoPE from its
//   cos/sin caches at the runtime's positions (do_rotary), sits.attention
//   with the bottom-right causal rule (GQA's), its window and softcap, and
//   merged heads. seqlens_k and total_sequence_length, computed from the
//   padding mask, describe the runtime's lengths; the mask input goes.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/sits/QuantMath.h"

#include "llvm/ADT/BitVector.h"
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

void raiseMatMulNBits(RaiseContext &rc, MsMatMulNBitsOp op) {
  int64_t k = op.getK(), n = op.getN(), bits = op.getBits();
  int64_t block = op.getBlockSize();
  int64_t blocks = (k + block - 1) / block, blob = block * bits / 8;
  DenseElementsAttr packed = getDenseConstant(op.getB());
  DenseElementsAttr scales = getDenseConstant(op.getScales());
  DenseElementsAttr zeroPoints =
      op.getZeroPoints() ? getDenseConstant(op.getZeroPoints()) : nullptr;
  auto type = dyn_cast<RankedTensorType>(op.getY().getType());
  if (!packed || !scales || (op.getZeroPoints() && !zeroPoints) ||
      op.getBias() || !type || !type.getElementType().isF32() ||
      packed.getNumElements() != n * blocks * blob ||
      scales.getNumElements() != n * blocks) {
    rc.noteNotRaised(op, "MatMulNBits with weights, scales or zero points "
                         "that are not constants of the documented sizes, a "
                         "bias, or not f32");
    return;
  }
  SmallVector<uint8_t> bytes;
  for (const APInt &v : packed.getValues<APInt>())
    bytes.push_back(static_cast<uint8_t>(v.getZExtValue()));
  SmallVector<float> scaleValues;
  for (const APFloat &v : scales.getValues<APFloat>())
    scaleValues.push_back(v.convertToFloat());
  bool packedZp = zeroPoints && zeroPoints.getElementType().isInteger();
  SmallVector<uint8_t> zpBytes;
  SmallVector<float> zpValues;
  int64_t zpRow = (blocks * bits + 7) / 8;
  if (packedZp) {
    for (const APInt &v : zeroPoints.getValues<APInt>())
      zpBytes.push_back(static_cast<uint8_t>(v.getZExtValue()));
    if (static_cast<int64_t>(zpBytes.size()) != n * zpRow)
      return rc.noteNotRaised(op, "MatMulNBits zero points of a wrong size");
  } else if (zeroPoints) {
    for (const APFloat &v : zeroPoints.getValues<APFloat>())
      zpValues.push_back(v.convertToFloat());
    if (static_cast<int64_t>(zpValues.size()) != n * blocks)
      return rc.noteNotRaised(op, "MatMulNBits zero points of a wrong size");
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  std::string name = "matmul_nbits";
  if (auto source = definedBy<WeightOp>(op.getB()))
    name = source.getName().str();
  // Symmetric: no zero points, or every one 2^(bits-1).
  int64_t middle = int64_t(1) << (bits - 1);
  bool symmetric =
      (bits == 4 || bits == 8) && (!zeroPoints || (packedZp && [&] {
        for (int64_t row = 0; row < n; ++row)
          for (int64_t j = 0; j < blocks; ++j)
            if (unpackBits(zpBytes, row * zpRow, j, bits) != middle)
              return false;
        return true;
      }()));
  if (symmetric) {
    // Levels q - 2^(bits-1), rows of ceil(K * bits / 8) bytes padded with
    // zero levels to a multiple of 16 (what the GEMV streams).
    int64_t packedBytes = (k * bits + 7) / 8;
    int64_t rowBytes = (packedBytes + 15) / 16 * 16;
    SmallVector<int8_t> data(n * rowBytes, 0);
    for (int64_t row = 0; row < n; ++row)
      for (int64_t e = 0; e < k; ++e) {
        int64_t j = e / block, inBlock = e % block;
        int64_t level =
            unpackBits(bytes, (row * blocks + j) * blob, inBlock, bits) -
            middle;
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
    for (float scale : scaleValues) {
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
    auto scalesType = RankedTensorType::get({n, blocks}, b.getF16Type());
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
  SmallVector<float> weight(n * k);
  float defaultZp = static_cast<float>(int64_t(1) << (bits - 1));
  for (int64_t row = 0; row < n; ++row)
    for (int64_t j = 0; j < blocks; ++j) {
      float scale = scaleValues[row * blocks + j];
      float zp =
          packedZp
              ? static_cast<float>(unpackBits(zpBytes, row * zpRow, j, bits))
          : zeroPoints ? zpValues[row * blocks + j]
                       : defaultZp;
      for (int64_t e = 0; e < block && j * block + e < k; ++e) {
        float q = static_cast<float>(
            unpackBits(bytes, (row * blocks + j) * blob, e, bits));
        weight[row * k + j * block + e] = (q - zp) * scale;
      }
    }
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
                    bits, block,
                    packedZp     ? "packed zero points"
                    : zeroPoints ? "float zero points"
                                 : "zero point 2^(bits-1)")
          .str(),
      "MatMulNBits is A . ((q - zero_point) * scale)^T per block of K; the "
      "weight is that product, computed once in f32");
}

/// Token ids: the input that indexes a constant 2-D table.
BlockArgument findIds(func::FuncOp function) {
  for (BlockArgument arg : function.getArguments())
    for (Operation *user : arg.getUsers())
      if (auto gather = dyn_cast<GatherOp>(user))
        if (gather.getIndices() == arg && getConstant(gather.getData()))
          return arg;
  return nullptr;
}

/// Erases `root`'s pure, now unused producers, recursively.
void eraseDeadProducers(ArrayRef<Value> roots) {
  SmallVector<Operation *> work;
  for (Value v : roots)
    if (Operation *op = v.getDefiningOp())
      work.push_back(op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!op->use_empty() || !isa<OnnxDialect>(op->getDialect()))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        work.push_back(producer);
    op->erase();
  }
}

void audit(RaiseContext &rc, StringRef counter, Location loc,
           const std::string &what) {
  rc.recordChange(counter, loc, what,
                  "the engine's KV cache and sequence lengths",
                  "GroupQueryAttention raised at an empty past owns no "
                  "cache of its own: the engine keeps it");
}

struct CacheRecord {
  BlockArgument past;
  unsigned resultIndex;
};

/// GroupQueryAttention over a past input into sits ops on the step's rows.
/// Rows [begin, end) of a constant 2-D weight, as a new weight.
Value sliceWeightRows(OpBuilder &b, WeightOp weight, int64_t begin,
                      int64_t end) {
  DenseElementsAttr dense = getDenseConstant(weight.getResult());
  auto type = dense ? dyn_cast<RankedTensorType>(dense.getType()) : nullptr;
  if (!type || type.getRank() != 2)
    return nullptr;
  int64_t cols = type.getDimSize(1);
  SmallVector<Attribute> values(dense.getValues<Attribute>());
  auto sliceType =
      RankedTensorType::get({end - begin, cols}, type.getElementType());
  auto sliced = DenseElementsAttr::get(
      sliceType, ArrayRef(values).slice(begin * cols, (end - begin) * cols));
  return WeightOp::create(
      b, weight.getLoc(), sliceType,
      b.getStringAttr(
          llvm::formatv("{0}_{1}_{2}_", weight.getName(), begin, end).str()),
      sliced);
}

/// A packed q/k/v projection whose weight is kept quantized, split by rows
/// of its levels and scales (the projections phase splits float ones).
std::optional<std::array<Value, 3>>
splitQuantizedProjection(OpBuilder &b, Value query,
                         std::array<int64_t, 3> widths) {
  auto linear = definedBy<LinearOp>(query);
  auto dequantize =
      linear ? definedBy<DequantizeOp>(linear.getWeight()) : DequantizeOp();
  auto data =
      dequantize ? definedBy<WeightOp>(dequantize.getData()) : WeightOp();
  auto scales =
      dequantize ? definedBy<WeightOp>(dequantize.getScales()) : WeightOp();
  if (!data || !scales || linear.getBias() || !linear->hasOneUse())
    return std::nullopt;
  std::array<Value, 3> parts;
  int64_t begin = 0;
  for (auto [i, width] : llvm::enumerate(widths)) {
    Value partData = sliceWeightRows(b, data, begin, begin + width);
    Value partScales = sliceWeightRows(b, scales, begin, begin + width);
    if (!partData || !partScales)
      return std::nullopt;
    auto fullType = cast<RankedTensorType>(dequantize.getType());
    auto weightType = RankedTensorType::get({width, fullType.getDimSize(1)},
                                            fullType.getElementType());
    auto partWeight = DequantizeOp::create(
        b, dequantize.getLoc(), weightType, partData, partScales,
        dequantize.getBitsAttr(), dequantize.getAxisAttr(),
        dequantize.getGroupSizeAttr());
    parts[i] = LinearOp::create(b, linear.getLoc(),
                                withLastDim(query.getType(), width),
                                linear.getInput(), partWeight, Value());
    begin += width;
  }
  return parts;
}

/// cos/sin rows of the step's positions, one table per pair of caches.
using RopeTables = llvm::DenseMap<std::pair<Value, Value>, RopeGatherOp>;

bool raiseGroupQueryAttention(RaiseContext &rc, MsGroupQueryAttentionOp op,
                              BlockArgument ids, func::ReturnOp ret,
                              SmallVectorImpl<CacheRecord> &records,
                              RopeTables &ropeTables) {
  auto fail = [&](const Twine &why) {
    rc.noteNotRaised(op, "GroupQueryAttention: " + why);
    return false;
  };
  int64_t heads = op.getNumHeads(), kvHeads = op.getKvNumHeads();
  auto queryType = dyn_cast<RankedTensorType>(op.getQuery().getType());
  if (!queryType || queryType.getRank() != 3 || queryType.isDynamicDim(2))
    return fail("the query is not [batch, seq, static hidden]");
  bool packed = !op.getKey();
  int64_t width = queryType.getDimSize(2);
  int64_t headDim = width / (packed ? heads + 2 * kvHeads : heads);
  // The cache: past inputs read only here, presents returned (or unused).
  auto pastKey = dyn_cast_or_null<BlockArgument>(op.getPastKey());
  auto pastValue = dyn_cast_or_null<BlockArgument>(op.getPastValue());
  if (!pastKey || !pastValue || !pastKey.hasOneUse() || !pastValue.hasOneUse())
    return fail("its past_key/past_value are not graph inputs read only by "
                "it (the cache of an exported step)");
  for (Value present : {op.getPresentKey(), op.getPresentValue()})
    for (Operation *user : present.getUsers())
      if (user != ret.getOperation())
        return fail("a present output is read inside the graph");
  if (op.getPositionIds() || op.getAttentionBias() || op.getHeadSink() ||
      op.getSmoothSoftmax() || !op.getExtraOutputs().empty())
    return fail("position_ids, attention_bias, head_sink, smooth_softmax or "
                "output_qk");
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  Type element = queryType.getElementType();
  int64_t batch = queryType.getDimSize(0), seq = queryType.getDimSize(1);
  auto flat = [&](int64_t h) {
    return RankedTensorType::get({batch, seq, h * headDim}, element);
  };
  auto split = [&](int64_t h) {
    return RankedTensorType::get({batch, h, seq, headDim}, element);
  };
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  std::optional<std::array<Value, 3>> quantizedParts;
  if (packed)
    quantizedParts = splitQuantizedProjection(
        b, op.getQuery(),
        {heads * headDim, kvHeads * headDim, kvHeads * headDim});
  if (quantizedParts) {
    q = (*quantizedParts)[0];
    k = (*quantizedParts)[1];
    v = (*quantizedParts)[2];
  } else if (packed) {
    auto sizesType = RankedTensorType::get({3}, b.getI64Type());
    auto sizes = ConstantOp::create(
        b, loc, sizesType,
        DenseElementsAttr::get(sizesType, ArrayRef<int64_t>{heads * headDim,
                                                            kvHeads * headDim,
                                                            kvHeads * headDim}),
        nullptr, nullptr, nullptr, nullptr);
    auto parts = SplitOp::create(
        b, loc, TypeRange{flat(heads), flat(kvHeads), flat(kvHeads)},
        op.getQuery(), sizes.getResult(), b.getI64IntegerAttr(-1),
        IntegerAttr());
    q = parts.getResult(0);
    k = parts.getResult(1);
    v = parts.getResult(2);
  }
  if (k.getType() != flat(kvHeads) || v.getType() != flat(kvHeads) ||
      q.getType() != flat(heads))
    return fail("query, key and value widths are not the heads' sizes");
  Value qh =
      SplitHeadsOp::create(b, loc, split(heads), q, b.getI64IntegerAttr(heads));
  Value kh = SplitHeadsOp::create(b, loc, split(kvHeads), k,
                                  b.getI64IntegerAttr(kvHeads));
  Value vh = SplitHeadsOp::create(b, loc, split(kvHeads), v,
                                  b.getI64IntegerAttr(kvHeads));
  if (op.getDoRotary()) {
    DenseElementsAttr cos = getDenseConstant(op.getCosCache());
    DenseElementsAttr sin = getDenseConstant(op.getSinCache());
    auto cacheType = cos ? dyn_cast<RankedTensorType>(cos.getType()) : nullptr;
    if (!cacheType || !sin || sin.getType() != cos.getType() ||
        cacheType.getRank() != 2 || cacheType.getElementType() != element ||
        2 * cacheType.getDimSize(1) > headDim)
      return fail("do_rotary without constant [max_position, R/2] cos/sin "
                  "caches of the activations' type");
    int64_t rows = cacheType.getDimSize(0), half = cacheType.getDimSize(1);
    RopeGatherOp &gather = ropeTables[{op.getCosCache(), op.getSinCache()}];
    if (!gather) {
      SmallVector<APFloat> cosValues(cos.getValues<APFloat>());
      SmallVector<APFloat> sinValues(sin.getValues<APFloat>());
      SmallVector<APFloat> table;
      for (int64_t row = 0; row < rows; ++row) {
        table.append(cosValues.begin() + row * half,
                     cosValues.begin() + (row + 1) * half);
        table.append(sinValues.begin() + row * half,
                     sinValues.begin() + (row + 1) * half);
      }
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&op->getParentRegion()->front());
      auto tableType = RankedTensorType::get({rows, 2 * half}, element);
      auto tableOp =
          WeightOp::create(b, loc, tableType, b.getStringAttr("rope_table"),
                           DenseElementsAttr::get(tableType, table));
      auto positions =
          PositionIdsOp::create(b, loc, ids.getType(), ids, Value());
      auto idsType = cast<RankedTensorType>(ids.getType());
      auto halfType = RankedTensorType::get(
          {idsType.getDimSize(0), idsType.getDimSize(1), half}, element);
      gather = RopeGatherOp::create(b, loc, halfType, halfType,
                                    tableOp.getResult(), positions);
    }
    auto style = RopeStyleAttr::get(
        b.getContext(), op.getRotaryInterleaved() ? RopeStyle::interleaved
                                                  : RopeStyle::rotate_half);
    qh = RopeOp::create(b, loc, qh.getType(), qh, gather.getCos(),
                        gather.getSin(), style, b.getI64IntegerAttr(2 * half));
    kh = RopeOp::create(b, loc, kh.getType(), kh, gather.getCos(),
                        gather.getSin(), style, b.getI64IntegerAttr(2 * half));
  }
  double scale = op.getScale() ? op.getScale()->convertToDouble()
                               : 1.0 / std::sqrt(static_cast<double>(headDim));
  int64_t window = op.getLocalWindowSize();
  float softcap = op.getSoftcap().convertToFloat();
  // GQA sees the local_window_size keys ending at the query's own,
  // pos - window < j <= pos: sits' window W keeps j > pos - W.
  auto attention = sits::AttentionOp::create(
      b, loc, qh.getType(), qh, kh, vh, /*mask=*/Value(), /*past_len=*/Value(),
      b.getI64IntegerAttr(heads), b.getI64IntegerAttr(kvHeads),
      b.getF32FloatAttr(static_cast<float>(scale)),
      CausalModeAttr::get(b.getContext(), CausalMode::bottom_right),
      window >= 0 ? b.getI64IntegerAttr(window) : IntegerAttr(),
      softcap > 0.0f ? b.getF32FloatAttr(softcap) : FloatAttr());
  auto merged = MergeHeadsOp::create(b, loc, op.getOutput().getType(),
                                     attention.getResult());
  op.getOutput().replaceAllUsesWith(merged.getResult());
  for (auto [present, past] : {std::pair(op.getPresentKey(), pastKey),
                               std::pair(op.getPresentValue(), pastValue)}) {
    std::optional<unsigned> index;
    for (OpOperand &use : present.getUses())
      index = use.getOperandNumber();
    if (index)
      records.push_back({past, *index});
  }
  rc.recordRaise(
      "attentions_raised", {op},
      llvm::formatv("sits.attention num_heads = {0} num_kv_heads = {1} scale "
                    "= {2} causal = bottom_right{3}{4}",
                    heads, kvHeads, formatFloat(scale),
                    op.getDoRotary() ? ", RoPE from its caches" : "",
                    packed ? ", packed QKV split" : "")
          .str(),
      "GroupQueryAttention at an empty past (the engine keeps the cache): q, "
      "k, v split into heads, rotated at positions 0..seq-1 when do_rotary, "
      "query i sees keys j <= i (and j > i - local_window_size), scale and "
      "softcap as given; present_key/value are the step's k and v");
  return true;
}

/// Removes the cache I/O the GQA ops owned and the inputs that only fed
/// their lengths, recording them as RaisePastKV does.
void removeCacheIO(RaiseContext &rc, func::FuncOp function, func::ReturnOp ret,
                   BlockArgument ids, ArrayRef<CacheRecord> records) {
  OpBuilder &b = rc.getBuilder();
  llvm::BitVector erasedArgs(function.getNumArguments());
  llvm::BitVector erasedResults(function.getNumResults());
  SmallVector<Attribute> entries;
  for (const CacheRecord &record : records) {
    auto type = cast<RankedTensorType>(record.past.getType());
    auto name = [&](unsigned index, bool input) {
      auto attr =
          input
              ? function.getArgAttrOfType<StringAttr>(index, "sits.input_name")
              : function.getResultAttrOfType<StringAttr>(index,
                                                         "sits.output_name");
      return attr ? attr.getValue() : StringRef();
    };
    entries.push_back(b.getDictionaryAttr({
        b.getNamedAttr("input",
                       b.getStringAttr(name(record.past.getArgNumber(), true))),
        b.getNamedAttr("output",
                       b.getStringAttr(name(record.resultIndex, false))),
        b.getNamedAttr("element_type", TypeAttr::get(type.getElementType())),
        b.getNamedAttr("layout",
                       b.getStringAttr("[batch, kv_heads, seq, head_dim]")),
        b.getNamedAttr("producer", b.getStringAttr("GroupQueryAttention")),
    }));
    erasedArgs.set(record.past.getArgNumber());
    erasedResults.set(record.resultIndex);
    audit(rc, "kv_cache_io_raised", record.past.getLoc(),
          "input '" + name(record.past.getArgNumber(), true).str() +
              "' -> output '" + name(record.resultIndex, false).str() + "'");
  }
  // The padding mask fed only seqlens_k and total_sequence_length.
  for (BlockArgument arg : function.getArguments())
    if (arg != ids && !erasedArgs.test(arg.getArgNumber()) && arg.use_empty() &&
        isa<IntegerType>(getElementTypeOrSelf(arg.getType()))) {
      erasedArgs.set(arg.getArgNumber());
      audit(rc, "position_inputs_replaced", arg.getLoc(),
            "input read only by GroupQueryAttention's seqlens_k and "
            "total_sequence_length: the runtime's lengths");
    }
  function->setAttr("sits.kv_cache_io", b.getArrayAttr(entries));
  ret->eraseOperands(erasedResults);
  if (failed(function.eraseResults(erasedResults)) ||
      failed(function.eraseArguments(erasedArgs))) {
    function.emitError() << "cannot remove GroupQueryAttention's cache I/O";
    rc.markFailed();
  }
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
  SmallVector<MsGroupQueryAttentionOp> gqas =
      collectOps<MsGroupQueryAttentionOp>(function);
  if (gqas.empty())
    return;
  BlockArgument ids = findIds(function);
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  if (!ids) {
    function.emitError() << "GroupQueryAttention graph: no input indexes the "
                            "embedding table (token ids)";
    rc.markFailed();
    return;
  }
  SmallVector<CacheRecord> records;
  RopeTables ropeTables;
  for (MsGroupQueryAttentionOp op : gqas) {
    if (!raiseGroupQueryAttention(rc, op, ids, ret, records, ropeTables))
      return;
  }
  // Every GQA is raised: its cache outputs go with it.
  llvm::sort(records, [](const CacheRecord &x, const CacheRecord &y) {
    return x.resultIndex < y.resultIndex;
  });
  SmallVector<Value> lengths;
  for (MsGroupQueryAttentionOp op : gqas) {
    lengths.append({op.getSeqlensK(), op.getTotalSequenceLength()});
    // The presents are returned: replace them by the (dead) past so the op
    // can go; the return operands go with removeCacheIO.
    op.getPresentKey().replaceAllUsesWith(op.getPastKey());
    op.getPresentValue().replaceAllUsesWith(op.getPastValue());
  }
  for (MsGroupQueryAttentionOp op : gqas)
    op->erase();
  eraseDeadProducers(lengths);
  removeCacheIO(rc, function, ret, ids, records);
  rc.getShapes().clear();
}
