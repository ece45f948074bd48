//===- RaiseRope.cpp - Rotary position embedding into sits ----------------===//
//
// The cos/sin tables: `angle[b, s, k] = positions[b, s] * inv_freq[k]`,
// however the exporter computes the outer product (MatMul of a [F, 1] column
// by a [1, S] row then Transpose, MatMul of [S, 1] by [1, F], broadcast
// Mul), becomes one `sits.rope_cos_sin` per angle, with positions from
// `sits.position_ids %input_ids` when the analysis proves them to be
// `arange(seq)` broadcast (the element at index (.., s) is s).
//
// The rotation: rotate-half `x * C + cat(-x[h:], x[:h]) * S` where C and S
// are `cos`/`sin` of `cat(angle, angle)` with a head axis inserted, and the
// opset-23 `RotaryEmbedding`, become `sits.rope`. Partial rotary dims (the
// rotated slice concatenated with the rest) are one `sits.rope` with
// `rotary_dim`.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

/// A 1-D float vector from a constant whose other dims are 1 (inv_freq as
/// [1, F, 1]), looking through Expand of such a constant.
DenseElementsAttr getFrequencies(Value value,
                                 SmallVectorImpl<Operation *> &ops) {
  if (auto expand = definedBy<ExpandOp>(value)) {
    ops.push_back(expand);
    value = expand.getInput();
  }
  DenseElementsAttr dense = getDenseConstant(value);
  auto type = dense ? dyn_cast<RankedTensorType>(dense.getType()) : nullptr;
  if (!type || !isa<FloatType>(dense.getElementType()))
    return nullptr;
  int64_t length = 1, nonUnit = 0;
  for (int64_t size : type.getShape())
    if (size != 1)
      length = size, ++nonUnit;
  if (nonUnit > 1)
    return nullptr;
  auto vector = RankedTensorType::get({length}, dense.getElementType());
  DenseElementsAttr reshaped = dense.reshape(vector);
  // sits computes the angle in f32.
  if (!dense.getElementType().isF32()) {
    SmallVector<float> values;
    for (APFloat v : reshaped.getValues<APFloat>())
      values.push_back(v.convertToFloat());
    return DenseElementsAttr::get(
        RankedTensorType::get({length}, Float32Type::get(value.getContext())),
        ArrayRef(values));
  }
  return reshaped;
}

struct AngleMatch {
  /// The float positions operand and the axis of its seq dim.
  Value positions;
  unsigned seqAxis;
  DenseElementsAttr invFreq;
  SmallVector<Operation *> ops;
};

/// `angle [B, S, F] = positions[b, s] * inv_freq[k]` in one of the spellings
/// exporters use.
std::optional<AngleMatch> matchAngle(RaiseContext &rc, Value angle) {
  std::optional<ArrayRef<AffineExpr>> dims = rc.getShapes().getDims(angle);
  if (!dims || dims->size() != 3 || !getFloatElementType(angle))
    return std::nullopt;
  AngleMatch match;
  // Transpose(MatMul(freq [., F, 1], pos [., 1, S]), [0, 2, 1]).
  if (auto transpose = definedBy<TransposeOp>(angle)) {
    auto matmul = definedBy<MatMulOp>(transpose.getData());
    if (!matmul || transpose.getPermutation() != SmallVector<int64_t>{0, 2, 1})
      return std::nullopt;
    match.ops = {matmul, transpose};
    match.invFreq = getFrequencies(matmul.getA(), match.ops);
    match.positions = matmul.getB();
    match.seqAxis = 2;
  } else if (auto matmul = definedBy<MatMulOp>(angle)) {
    // MatMul(pos [., S, 1], freq [., 1, F]).
    match.ops = {matmul};
    match.invFreq = getFrequencies(matmul.getB(), match.ops);
    match.positions = matmul.getA();
    match.seqAxis = 1;
  } else if (auto mul = definedBy<MulOp>(angle)) {
    // pos [., S, 1] * freq [F] broadcast.
    for (Value side : {mul.getA(), mul.getB()}) {
      SmallVector<Operation *> ops{mul};
      if (DenseElementsAttr freq = getFrequencies(side, ops)) {
        match.ops = ops;
        match.invFreq = freq;
        match.positions = otherOperand(mul, side);
        match.seqAxis = 1;
        break;
      }
    }
  }
  if (!match.invFreq || !match.positions)
    return std::nullopt;
  // The contraction is over a dim of size 1: one product per element.
  std::optional<ArrayRef<AffineExpr>> posDims =
      rc.getShapes().getDims(match.positions);
  if (!posDims || posDims->size() != 3)
    return std::nullopt;
  for (unsigned i = 1; i < 3; ++i)
    if (i != match.seqAxis && !getConstantValue((*posDims)[i]).has_value())
      return std::nullopt;
  unsigned otherAxis = match.seqAxis == 1 ? 2 : 1;
  if (getConstantValue((*posDims)[otherAxis]) != std::optional<int64_t>(1))
    return std::nullopt;
  if (getConstantValue(dims->back()) !=
      std::optional<int64_t>(match.invFreq.getNumElements()))
    return std::nullopt;
  return match;
}

/// The cos/sin tables of a function, one sits.rope_cos_sin per angle.
class RopeTables {
public:
  explicit RopeTables(RaiseContext &rc) : rc(rc) {}

  /// The rope_cos_sin of `angle`, created on first use.
  RopeCosSinOp get(Value angle, std::string &reason);

private:
  Value resolvePositions(const AngleMatch &match,
                         SmallVectorImpl<Operation *> &ops, std::string &reason,
                         bool &isArange);
  Value getPositionIds(Value ids, Location loc);

  RaiseContext &rc;
  llvm::DenseMap<Value, RopeCosSinOp> tables;
  llvm::DenseMap<Value, Value> positionIds;
};

Value RopeTables::getPositionIds(Value ids, Location loc) {
  Value &cached = positionIds[ids];
  if (cached)
    return cached;
  OpBuilder &b = rc.getBuilder();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&rc.getFunction().front());
  cached = PositionIdsOp::create(b, loc, ids.getType(), ids, Value());
  return cached;
}

/// The positions behind the float positions operand of an angle: the token
/// ids' positions when the analysis proves them `arange(seq)`, else the
/// integer tensor they are cast from.
Value RopeTables::resolvePositions(const AngleMatch &match,
                                   SmallVectorImpl<Operation *> &ops,
                                   std::string &reason, bool &isArange) {
  SymbolicShapes &shapes = rc.getShapes();
  const TensorFacts &facts = shapes.getFacts(match.positions);
  AffineExpr seq = facts.getDim(match.seqAxis);
  isArange =
      facts.elementExpr &&
      facts.elementExpr == getAffineDimExpr(match.seqAxis, rc.getContext());
  if (isArange) {
    // Token ids of the same length: a 2-D integer argument with that seq.
    for (BlockArgument arg : rc.getFunction().getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() != 2 ||
          !(type.getElementType().isInteger(64) ||
            type.getElementType().isInteger(32)))
        continue;
      if (shapes.getDim(arg, 1) == seq) {
        // Producers of the arange (Range, Unsqueeze, Cast) for the audit.
        Value v = match.positions;
        while (Operation *op = v.getDefiningOp()) {
          if (!isa<CastOp, UnsqueezeOp, ReshapeOp, ExpandOp, RangeOp>(op))
            break;
          ops.push_back(op);
          if (isa<RangeOp>(op))
            break;
          v = op->getOperand(0);
        }
        return getPositionIds(arg, match.positions.getLoc());
      }
    }
    reason = "the positions are arange(seq), but no 2-D integer input has "
             "that sequence length";
    return nullptr;
  }
  // An integer [B, S] tensor cast to float and given a unit dim.
  Value v = match.positions;
  while (Operation *op = v.getDefiningOp()) {
    if (!isa<CastOp, UnsqueezeOp, ReshapeOp>(op))
      break;
    ops.push_back(op);
    v = op->getOperand(0);
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (type && type.getRank() == 2 && type.getElementType().isInteger() &&
        shapes.getDim(v, 1) == seq)
      return v;
  }
  reason = "the positions are neither arange(seq) nor an integer [batch, "
           "seq] tensor";
  return nullptr;
}

RopeCosSinOp RopeTables::get(Value angle, std::string &reason) {
  auto it = tables.find(angle);
  if (it != tables.end())
    return it->second;
  std::optional<AngleMatch> match = matchAngle(rc, angle);
  if (!match) {
    reason = "cos/sin of a tensor that is not positions x inv_freq";
    return nullptr;
  }
  SmallVector<Operation *> ops = match->ops;
  bool isArange = false;
  Value positions = resolvePositions(*match, ops, reason, isArange);
  if (!positions)
    return nullptr;
  OpBuilder &b = rc.getBuilder();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(angle);
  if (positions.getParentBlock() == angle.getParentBlock() &&
      positions.getDefiningOp() &&
      angle.getDefiningOp()->isBeforeInBlock(positions.getDefiningOp()))
    b.setInsertionPointAfterValue(positions);
  auto positionsType = cast<RankedTensorType>(positions.getType());
  auto tableType = RankedTensorType::get({positionsType.getDimSize(0),
                                          positionsType.getDimSize(1),
                                          match->invFreq.getNumElements()},
                                         getFloatElementType(angle));
  auto table =
      RopeCosSinOp::create(b, rc.getFusedLoc(ops), tableType, tableType,
                           positions, match->invFreq, b.getF32FloatAttr(1.0f));
  tables[angle] = table;
  rc.recordRaise(
      "rope_tables_raised", ops,
      llvm::formatv("sits.rope_cos_sin ({0} frequencies){1}",
                    match->invFreq.getNumElements(),
                    isArange ? " of sits.position_ids" : "")
          .str(),
      std::string("angle[b, s, k] = positions[b, s] * inv_freq[k], an outer "
                  "product over a contraction of size 1 (one f32 product "
                  "per element)") +
          (isArange ? "; the positions are arange(seq) broadcast over the "
                      "batch (proven by the shape analysis), which is what "
                      "sits.position_ids computes"
                    : ""));
  return table;
}

/// A table operand of the rotation: `[B|1, 1, S, R]` holding cos (or sin)
/// of `cat(angle, angle)`. Returns the half table `[B, S, R/2]`.
Value matchHalfTable(RaiseContext &rc, RopeTables &tables, Value table,
                     bool sine, SmallVectorImpl<Operation *> &ops,
                     std::string &reason) {
  Value value = table;
  // The head axis: Unsqueeze(axes [1]) or a Reshape that inserts it.
  std::optional<ArrayRef<AffineExpr>> dims = rc.getShapes().getDims(value);
  if (!dims || dims->size() != 4 ||
      getConstantValue((*dims)[1]) != std::optional<int64_t>(1))
    return nullptr;
  if (auto unsqueeze = definedBy<UnsqueezeOp>(value)) {
    ops.push_back(unsqueeze);
    value = unsqueeze.getData();
  } else if (auto reshape = definedBy<ReshapeOp>(value)) {
    ops.push_back(reshape);
    value = reshape.getData();
  } else {
    return nullptr;
  }
  std::optional<ArrayRef<AffineExpr>> inner = rc.getShapes().getDims(value);
  if (!inner || inner->size() != 3 || (*inner)[0] != (*dims)[0] ||
      (*inner)[1] != (*dims)[2])
    return nullptr;
  // An f16/bf16 graph computes the table in f32 and casts it to the
  // activations' type; sits.rope reads the f32 table itself.
  if (auto cast = definedBy<CastOp>(value)) {
    if (!isa<FloatType>(getElementTypeOrSelf(cast.getInput().getType())) ||
        !isa<FloatType>(getElementTypeOrSelf(cast.getOutput().getType())))
      return nullptr;
    ops.push_back(cast);
    value = cast.getInput();
  }
  Operation *trig = value.getDefiningOp();
  if (!(sine ? isa_and_nonnull<SinOp>(trig) : isa_and_nonnull<CosOp>(trig)))
    return nullptr;
  ops.push_back(trig);
  auto concat = definedBy<ConcatOp>(trig->getOperand(0));
  if (!concat || concat.getInputs().size() != 2 ||
      concat.getInputs()[0] != concat.getInputs()[1] ||
      (concat.getAxis() != -1 && concat.getAxis() != 2)) {
    reason = "the cos/sin table is not of cat(angle, angle) on the last dim, "
             "which rotate-half needs";
    return nullptr;
  }
  ops.push_back(concat);
  RopeCosSinOp cosSin = tables.get(concat.getInputs()[0], reason);
  if (!cosSin)
    return nullptr;
  return sine ? cosSin.getSin() : cosSin.getCos();
}

/// Normalized [start, end) of a step-1 Slice of the last axis.
std::optional<std::pair<int64_t, int64_t>> lastAxisSlice(RaiseContext &rc,
                                                         SliceOp slice) {
  SymbolicShapes &shapes = rc.getShapes();
  std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(slice.getData());
  if (!dims)
    return std::nullopt;
  int64_t rank = dims->size();
  std::optional<int64_t> size = getConstantValue(dims->back());
  std::optional<SmallVector<int64_t, 4>> starts =
      shapes.getConstantValues(slice.getStarts());
  std::optional<SmallVector<int64_t, 4>> ends =
      shapes.getConstantValues(slice.getEnds());
  if (!size || !starts || !ends || starts->size() != 1 || ends->size() != 1)
    return std::nullopt;
  if (slice.getAxes()) {
    std::optional<SmallVector<int64_t, 4>> axes =
        shapes.getConstantValues(slice.getAxes());
    if (!axes || axes->size() != 1 ||
        ((*axes)[0] != -1 && (*axes)[0] != rank - 1))
      return std::nullopt;
  } else if (rank != 1) {
    return std::nullopt;
  }
  if (slice.getSteps()) {
    std::optional<SmallVector<int64_t, 4>> steps =
        shapes.getConstantValues(slice.getSteps());
    if (!steps || steps->size() != 1 || (*steps)[0] != 1)
      return std::nullopt;
  }
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += *size;
    return std::clamp<int64_t>(v, 0, *size);
  };
  return std::make_pair(clamp((*starts)[0]), clamp((*ends)[0]));
}

/// `cat(-x[h:], x[:h])` on the last axis; returns x.
Value matchRotateHalf(RaiseContext &rc, Value value,
                      SmallVectorImpl<Operation *> &ops, std::string &reason) {
  auto concat = definedBy<ConcatOp>(value);
  if (!concat || concat.getInputs().size() != 2)
    return nullptr;
  std::optional<ArrayRef<AffineExpr>> dims = rc.getShapes().getDims(value);
  if (!dims || (concat.getAxis() != -1 &&
                concat.getAxis() != static_cast<int64_t>(dims->size()) - 1))
    return nullptr;
  auto first = concat.getInputs()[0], second = concat.getInputs()[1];
  auto neg = definedBy<NegOp>(first);
  auto high = neg ? definedBy<SliceOp>(neg.getInput()) : SliceOp();
  auto low = definedBy<SliceOp>(second);
  if (!high || !low) {
    if (definedBy<NegOp>(second))
      reason = "rotate-half negates the second half instead of the first "
               "(cat(x[:h], -x[h:]))";
    return nullptr;
  }
  Value x = low.getData();
  std::optional<int64_t> width = getConstantValue(rc.getShapes().getDim(x, -1));
  auto highRange = lastAxisSlice(rc, high);
  auto lowRange = lastAxisSlice(rc, low);
  if (high.getData() != x || !width || !highRange || !lowRange)
    return nullptr;
  int64_t half = *width / 2;
  if (*width % 2 != 0 || *lowRange != std::pair<int64_t, int64_t>(0, half) ||
      *highRange != std::pair<int64_t, int64_t>(half, *width)) {
    reason = llvm::formatv("rotate-half splits the last dim ({0}) at {1} and "
                           "{2}, not in two halves",
                           *width, lowRange->second, highRange->first)
                 .str();
    return nullptr;
  }
  ops.append({low, high, neg, concat});
  return x;
}

/// Creates sits.rope replacing `result` (and a partial-rotary Concat).
void createRope(RaiseContext &rc, Value input, Value cos, Value sin,
                RopeStyle style, int64_t rotaryDim, Value result,
                SmallVectorImpl<Operation *> &ops, StringRef rule) {
  // Partial rotary: rope on x[..., :R] concatenated with x[..., R:].
  if (auto slice = definedBy<SliceOp>(input)) {
    auto range = lastAxisSlice(rc, slice);
    auto concat = dyn_cast_or_null<ConcatOp>(getSingleUser(result));
    std::optional<int64_t> full =
        getConstantValue(rc.getShapes().getDim(slice.getData(), -1));
    if (range && range->first == 0 && concat &&
        concat.getInputs().size() == 2 && concat.getInputs()[0] == result &&
        full && range->second < *full) {
      auto rest = definedBy<SliceOp>(concat.getInputs()[1]);
      auto restRange = rest ? lastAxisSlice(rc, rest) : std::nullopt;
      if (rest && rest.getData() == slice.getData() && restRange &&
          *restRange == std::make_pair(range->second, *full) &&
          concat.getConcatResult().getType() == slice.getData().getType()) {
        ops.append({slice, rest, concat});
        input = slice.getData();
        result = concat.getConcatResult();
      }
    }
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(result);
  auto rope =
      RopeOp::create(b, rc.getFusedLoc(ops), result.getType(), input, cos, sin,
                     RopeStyleAttr::get(b.getContext(), style),
                     b.getI64IntegerAttr(rotaryDim));
  result.replaceAllUsesWith(rope.getResult());
  rc.recordRaise("ropes_raised", ops,
                 llvm::formatv("sits.rope {0} rotary_dim = {1}",
                               stringifyRopeStyle(style), rotaryDim)
                     .str(),
                 rule);
}

/// `x * C + rotate_half(x) * S` rooted at `add`.
void raiseRotateHalf(RaiseContext &rc, RopeTables &tables, onnx::AddOp add) {
  for (auto [cosTerm, sinTerm] :
       {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())}) {
    auto sinMul = definedBy<MulOp>(sinTerm);
    auto cosMul = definedBy<MulOp>(cosTerm);
    if (!sinMul || !cosMul)
      continue;
    for (Value rotated : {sinMul.getA(), sinMul.getB()}) {
      SmallVector<Operation *> ops;
      std::string reason;
      Value x = matchRotateHalf(rc, rotated, ops, reason);
      if (!x) {
        if (!reason.empty()) {
          // On the Add and on the rotation: the Add may still become a
          // residual sits.add, the rotation stays.
          rc.noteNotRaised(add, "not a rotary embedding: " + reason);
          if (Operation *rotation = rotated.getDefiningOp())
            rc.noteNotRaised(rotation, "not a rotary embedding: " + reason);
        }
        continue;
      }
      Value sinTable = otherOperand(sinMul, rotated);
      Value cosTable = otherOperand(cosMul, x);
      if (!cosTable)
        continue;
      ops.append({cosMul, sinMul, add});
      Value cos = matchHalfTable(rc, tables, cosTable, false, ops, reason);
      Value sin = cos ? matchHalfTable(rc, tables, sinTable, true, ops, reason)
                      : Value();
      if (!cos || !sin) {
        std::string why = "rotate-half rotary embedding whose cos/sin tables "
                          "are not recognized" +
                          (reason.empty() ? "" : ": " + reason);
        rc.noteNotRaised(add, why);
        if (Operation *rotation = rotated.getDefiningOp())
          rc.noteNotRaised(rotation, why);
        return;
      }
      std::optional<int64_t> width =
          getConstantValue(rc.getShapes().getDim(x, -1));
      if (add.getC().getType() != x.getType() || !width ||
          rc.getShapes().getDims(x)->size() != 4)
        return;
      createRope(rc, x, cos, sin, RopeStyle::rotate_half, *width, add.getC(),
                 ops,
                 "x * cos + cat(-x[h:], x[:h]) * sin over the last dim split "
                 "in two halves, with cos/sin of cat(angle, angle) broadcast "
                 "over the heads: rotate-half RoPE");
      return;
    }
  }
}

/// A rotary embedding op: RotaryEmbedding-23 or ONNX Runtime's, whose
/// semantics are the same but for how the head count defaults.
struct RotaryOp {
  Operation *op;
  Value x, positions, cos, sin, y;
  /// 0 when not given.
  int64_t heads, rotaryDim;
  bool interleaved;
};

void raiseRotaryEmbedding(RaiseContext &rc, RopeTables &tables,
                          RopeGathers &gathers, const RotaryOp &rotary) {
  Operation *op = rotary.op;
  Value y = rotary.y;
  SymbolicShapes &shapes = rc.getShapes();
  std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(rotary.x);
  if (!dims)
    return;
  SmallVector<AffineExpr, 4> xDims(*dims);
  bool threeD = xDims.size() == 3;
  int64_t heads = rotary.heads;
  std::optional<int64_t> headDim = getConstantValue(xDims.back());
  if (threeD)
    headDim = heads > 0 && headDim && *headDim % heads == 0
                  ? std::optional<int64_t>(*headDim / heads)
                  : std::nullopt;
  if (!headDim) {
    rc.noteNotRaised(op, "the head size is not a constant");
    return;
  }
  int64_t rotaryDim = rotary.rotaryDim != 0 ? rotary.rotaryDim : *headDim;
  SmallVector<Operation *> ops{op};
  Value cos = rotary.cos, sin = rotary.sin;
  OpBuilder &b = rc.getBuilder();
  if (Value positions = rotary.positions) {
    // The caches are [max_position, R/2] tables indexed by the positions:
    // one [max_position, R] table of both for sits.rope_gather.
    auto positionsType = dyn_cast<RankedTensorType>(positions.getType());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(op);
    // Read already by an earlier rotation (the layer's q for its k).
    RopeGatherOp &gather = gathers[{cos, sin, positions}];
    Value table;
    if (!gather && (!positionsType || positionsType.getRank() != 2 ||
                    !(table = createRopeTable(b, op->getLoc(), cos, sin)))) {
      gathers.erase({cos, sin, positions});
      rc.noteNotRaised(op, "RotaryEmbedding with position_ids needs constant "
                           "[max_position, R/2] cos and sin caches and "
                           "[batch, seq] positions");
      return;
    }
    if (!gather) {
      auto tableType = cast<RankedTensorType>(table.getType());
      auto halfType = RankedTensorType::get({positionsType.getDimSize(0),
                                             positionsType.getDimSize(1),
                                             tableType.getDimSize(1) / 2},
                                            tableType.getElementType());
      gather = RopeGatherOp::create(b, op->getLoc(), halfType, halfType, table,
                                    positions);
    }
    cos = gather.getCos();
    sin = gather.getSin();
  }
  // The caches are cos/sin of the angle; use the shared table when they are
  // recognized, else the caches themselves (they are the half tables).
  auto cosOp = definedBy<CosOp>(cos);
  auto sinOp = definedBy<SinOp>(sin);
  if (cosOp && sinOp && cosOp.getInput() == sinOp.getInput()) {
    std::string reason;
    if (RopeCosSinOp table = tables.get(cosOp.getInput(), reason)) {
      cos = table.getCos();
      sin = table.getSin();
      ops.append({cosOp, sinOp});
    }
  }
  b.setInsertionPoint(op);
  Value input = rotary.x;
  RopeStyle style =
      rotary.interleaved ? RopeStyle::interleaved : RopeStyle::rotate_half;
  if (threeD) {
    auto type = cast<RankedTensorType>(input.getType());
    auto split = RankedTensorType::get(
        {type.getDimSize(0), heads, type.getDimSize(1), *headDim},
        type.getElementType());
    input = SplitHeadsOp::create(b, op->getLoc(), split, input,
                                 b.getI64IntegerAttr(heads));
  }
  auto rope =
      RopeOp::create(b, rc.getFusedLoc(ops), input.getType(), input, cos, sin,
                     RopeStyleAttr::get(b.getContext(), style),
                     b.getI64IntegerAttr(rotaryDim));
  Value result = rope.getResult();
  if (threeD) {
    // Heads split again (an attention that takes [batch, seq, hidden]) read
    // the rotated heads themselves.
    for (Operation *user : llvm::make_early_inc_range(y.getUsers()))
      if (auto split = dyn_cast<SplitHeadsOp>(user);
          split && split.getType() == rope.getType())
        split.getResult().replaceAllUsesWith(rope.getResult());
    result = MergeHeadsOp::create(b, op->getLoc(), y.getType(), result);
  }
  y.replaceAllUsesWith(result);
  rc.recordRaise("ropes_raised", ops,
                 llvm::formatv("sits.rope {0} rotary_dim = {1}",
                               stringifyRopeStyle(style), rotaryDim)
                     .str(),
                 rotary.positions
                     ? "RotaryEmbedding with position_ids reads rows of its "
                       "[max_position, R/2] caches by position: "
                       "sits.rope_gather of the caches side by side, then "
                       "sits.rope"
                     : "RotaryEmbedding without position_ids takes [batch, "
                       "seq, R/2] cos/sin caches: exactly sits.rope");
}

} // namespace

void sits::onnx::raising::raiseRope(RaiseContext &rc) {
  RopeTables tables(rc);
  RopeGathers gathers;
  for (RotaryEmbeddingOp op : collectOps<RotaryEmbeddingOp>(rc.getFunction()))
    raiseRotaryEmbedding(
        rc, tables, gathers,
        {op, op.getX(), op.getPositionIds(), op.getCosCache(), op.getSinCache(),
         op.getY(),
         op.getNumHeads() ? static_cast<int64_t>(*op.getNumHeads()) : 0,
         static_cast<int64_t>(op.getRotaryEmbeddingDim()),
         op.getInterleaved() != 0});
  for (MsRotaryEmbeddingOp op :
       collectOps<MsRotaryEmbeddingOp>(rc.getFunction())) {
    // ONNX Runtime's heads default to the width over the rotary dim of
    // its caches; its positions are [batch, seq] (or a [1] offset, which
    // the runtime's positions do not stand for).
    auto cacheType = dyn_cast<RankedTensorType>(op.getCosCache().getType());
    auto inputType = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto positionsType =
        dyn_cast<RankedTensorType>(op.getPositionIds().getType());
    if (!cacheType || cacheType.getRank() != 2 || cacheType.isDynamicDim(1) ||
        !inputType || !positionsType || positionsType.getRank() != 2) {
      rc.noteNotRaised(op, "com.microsoft RotaryEmbedding without [batch, "
                           "seq] position_ids or static [max_position, R/2] "
                           "caches");
      continue;
    }
    int64_t heads = static_cast<int64_t>(op.getNumHeads());
    int64_t rotaryDim = 2 * cacheType.getDimSize(1);
    if (heads == 0 && inputType.getRank() == 3 && !inputType.isDynamicDim(2))
      heads = inputType.getDimSize(2) / rotaryDim;
    raiseRotaryEmbedding(rc, tables, gathers,
                         {op, op.getInput(), op.getPositionIds(),
                          op.getCosCache(), op.getSinCache(), op.getOutput(),
                          heads, rotaryDim, op.getInterleaved() != 0});
  }
  for (onnx::AddOp op : collectOps<onnx::AddOp>(rc.getFunction()))
    raiseRotateHalf(rc, tables, op);
}
