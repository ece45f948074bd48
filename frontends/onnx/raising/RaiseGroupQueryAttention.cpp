//===- RaiseGroupQueryAttention.cpp - GQA over its cache into sits --------===//
//
// ONNX Runtime's GroupQueryAttention (the GenAI builder's attention) owns
// its layer's cache: past inputs, present outputs. Raised as for exports
// with past key/values (RaisePastKV.cpp): the graph at an empty past. A
// packed query is Split into q, k and v (which the projections phase turns
// into three linears; kept-quantized ones are split by rows here), heads
// split, RoPE from its cos/sin caches at the step's positions (do_rotary:
// the runtime's, or its position_ids input), sits.attention with the
// bottom-right causal rule (GQA's), its window and softcap, and merged
// heads; an attention_bias must be all zeros. seqlens_k and
// total_sequence_length, computed from the padding mask, describe the
// runtime's lengths; the mask input goes. head_sink, smooth_softmax and a
// read output_qk have no counterpart in the engine: errors naming them.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

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

/// A packed q/k/v projection whose weight is kept quantized, split by rows
/// of its levels, scales and bias (the projections phase splits float
/// ones).
std::optional<std::array<Value, 3>>
splitQuantizedProjection(RaiseContext &rc, Value query,
                         std::array<int64_t, 3> widths) {
  OpBuilder &b = rc.getBuilder();
  // A bias is added after the product (Qwen2's q, k and v biases).
  Value bias;
  Value product = query;
  if (auto add = definedBy<onnx::AddOp>(query)) {
    for (Value operand : {add.getA(), add.getB()})
      if (definedBy<LinearOp>(operand))
        product = operand;
    Value other = otherOperand(add, product);
    auto width = cast<RankedTensorType>(query.getType()).getDimSize(2);
    bias = other ? rc.getChannelVector(
                       other, getAffineConstantExpr(width, b.getContext()))
                 : Value();
    if (!bias || product == query || !product.hasOneUse())
      return std::nullopt;
  }
  auto linear = definedBy<LinearOp>(product);
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
    Value partData = sliceWeightRows(rc, data, begin, begin + width);
    Value partScales = sliceWeightRows(rc, scales, begin, begin + width);
    Value partBias =
        bias ? sliceWeightRows(rc, bias, begin, begin + width) : Value();
    if (!partData || !partScales || (bias && !partBias))
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
                                linear.getInput(), partWeight, partBias);
    begin += width;
  }
  return parts;
}

/// One GroupQueryAttention over a past input into sits ops on the step's
/// rows; false after an error.
bool raiseOne(RaiseContext &rc, MsGroupQueryAttentionOp op, BlockArgument ids,
              func::ReturnOp ret, SmallVectorImpl<CacheRecord> &records,
              RopeGathers &gathers) {
  // What is not raised leaves the graph's cache I/O with an onnx op: an
  // error naming the cause, not a warning.
  auto fail = [&](const Twine &why) {
    op.emitError() << "GroupQueryAttention is not supported: " << why;
    rc.markFailed();
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
  // The engine's softmax has no sink term.
  if (op.getHeadSink())
    return fail("head_sink (a per-head sink logit in the softmax's "
                "denominator) has no counterpart in the engine's attention");
  if (op.getSmoothSoftmax())
    return fail("smooth_softmax = 1 (a softmax with 1 added to its "
                "denominator) has no counterpart in the engine's attention");
  if (llvm::any_of(op.getExtraOutputs(),
                   [](Value v) { return !v.use_empty(); }))
    return fail("output_qk (the attention scores as an output) is read");
  // position_ids rotate q and k at a step after a past (ONNX Runtime reads
  // past + i at a first prompt): as an input they are the step's positions,
  // which the runtime supplies; computed ones are not known to be.
  Value positions = op.getDoRotary() ? op.getPositionIds() : Value();
  if (positions && !isa<BlockArgument>(positions))
    return fail("position_ids are computed in the graph, not a graph input: "
                "the runtime's positions (past + i) may not be theirs");
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
        rc, op.getQuery(),
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
    int64_t half = cacheType.getDimSize(1);
    RopeGatherOp &gather =
        gathers[{op.getCosCache(), op.getSinCache(), positions}];
    if (!gather) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&op->getParentRegion()->front());
      Value table = createRopeTable(b, loc, op.getCosCache(), op.getSinCache());
      if (!positions)
        positions = PositionIdsOp::create(b, loc, ids.getType(), ids, Value());
      auto idsType = cast<RankedTensorType>(ids.getType());
      auto halfType = RankedTensorType::get(
          {idsType.getDimSize(0), idsType.getDimSize(1), half}, element);
      gather =
          RopeGatherOp::create(b, loc, halfType, halfType, table, positions);
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
  // The engine's attention adds no score bias: an all-zero one is nothing.
  bool zeroBias = op.getAttentionBias() && isZeroTensor(op.getAttentionBias());
  if (op.getAttentionBias() && !zeroBias)
    return fail("attention_bias is not all zeros: the engine's attention adds "
                "no bias to its scores");
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
                    "= {2} causal = bottom_right{3}{4}{5}",
                    heads, kvHeads, formatFloat(scale),
                    op.getDoRotary() ? ", RoPE from its caches" : "",
                    packed ? ", packed QKV split" : "",
                    zeroBias ? ", its all-zero attention_bias dropped" : "")
          .str(),
      "GroupQueryAttention at an empty past (the engine keeps the cache): q, "
      "k, v split into heads, rotated at positions 0..seq-1 (or its "
      "position_ids input) when do_rotary, query i sees keys j <= i (and j > "
      "i - local_window_size), scale and softcap as given, an attention_bias "
      "of zeros adds nothing; "
      "present_key/value are the step's k and v");
  return true;
}

/// Removes the cache I/O the GQA ops owned and the inputs that only fed
/// their lengths, recording them as RaisePastKV does.
void removeCacheIO(RaiseContext &rc, func::FuncOp function, BlockArgument ids,
                   ArrayRef<CacheRecord> records) {
  OpBuilder &b = rc.getBuilder();
  llvm::BitVector erasedArgs(function.getNumArguments());
  llvm::BitVector erasedResults(function.getNumResults());
  SmallVector<Attribute> entries;
  auto name = [&](unsigned index, bool input) {
    auto attr =
        input ? function.getArgAttrOfType<StringAttr>(index, "sits.input_name")
              : function.getResultAttrOfType<StringAttr>(index,
                                                         "sits.output_name");
    return attr ? attr.getValue() : StringRef();
  };
  for (const CacheRecord &record : records) {
    auto type = cast<RankedTensorType>(record.past.getType());
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
            "input '" + name(arg.getArgNumber(), true).str() +
                "' read only by GroupQueryAttention's seqlens_k and "
                "total_sequence_length: the runtime's lengths");
    }
  // Other inputs: the positions (of a RotaryEmbedding or of GQA), or a mask
  // read elsewhere.
  replaceCacheIO(rc, ids, entries, erasedArgs, erasedResults,
                 "GroupQueryAttention graph");
}

} // namespace

void sits::onnx::raising::raiseGroupQueryAttention(RaiseContext &rc) {
  func::FuncOp function = rc.getFunction();
  SmallVector<MsGroupQueryAttentionOp> gqas =
      collectOps<MsGroupQueryAttentionOp>(function);
  if (gqas.empty())
    return;
  BlockArgument ids = findTokenIds(function);
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  if (!ids) {
    function.emitError() << "GroupQueryAttention graph: no input indexes the "
                            "embedding table (token ids)";
    rc.markFailed();
    return;
  }
  SmallVector<CacheRecord> records;
  RopeGathers gathers;
  for (MsGroupQueryAttentionOp op : gqas) {
    if (!raiseOne(rc, op, ids, ret, records, gathers))
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
  removeCacheIO(rc, function, ids, records);
  rc.getShapes().clear();
}
