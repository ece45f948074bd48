//===- PositionInputs.cpp - The step's positions and padding mask ---------===//
//
// Exports whose cache the engine keeps (RaisePastKV.cpp, GroupQueryAttention
// in RaiseContribOps.cpp) take, besides the token ids, the positions of the
// step's tokens and a padding mask over the cached and new tokens. The
// engine's runtime supplies both itself: it runs every sequence unpadded
// with its own length, so token i of a step after `past` cached tokens is at
// position past + i and sees every cached token of its sequence. The
// program is compiled at an empty past, where the positions are 0..seq-1
// (sits.position_ids, which the cache pass offsets by each sequence's past
// length) and the mask is all ones.
//
// Which input is which is first read from its dims: an integer
// `[batch, seq]` input (the step's length) for the positions, one
// `[batch, other]` for the mask; anything else is an error. (A merged
// decoder declares its mask `[batch, seq]` too: of several such inputs the
// one computing RoPE angles is the positions.) Positions the graph computes
// from the mask by Hugging Face's rule are the runtime's positions too
// (MaskPositions.cpp). Once every
// pattern has run, checkPositionInputs checks that reading by what reads
// them: the positions only as RoPE positions (sits.rope_cos_sin,
// sits.rope_gather), the mask only through the attention mask's subgraph
// (onnx ops ending in a sits.attention mask, which --sits-fold-causal-mask
// must then prove causal) or its shape. Any other reader (a custom
// attention mask, a learned position table) is an
// error naming the input and the op: the runtime's values stand for a
// padding mask and RoPE positions only.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

StringRef inputName(func::FuncOp function, unsigned index) {
  auto name = function.getArgAttrOfType<StringAttr>(index, "sits.input_name");
  return name ? name.getValue() : StringRef();
}

std::string sourceOf(Operation *op) {
  std::vector<std::string> names = getSourceNames(op->getLoc());
  return "'" + op->getName().getStringRef().str() + "'" +
         (names.empty() ? "" : " (" + names.front() + ")");
}

/// The first op reading `replacement` (a positions op) other than as RoPE
/// positions or for its shape, or null.
Operation *findNonRopeReader(Operation *replacement) {
  for (Operation *user : replacement->getUsers())
    if (!isa<RopeCosSinOp, RopeGatherOp, ShapeOp>(user))
      return user;
  return nullptr;
}

/// The first op the all-ones mask reaches other than through onnx ops into
/// a sits.attention mask (or a shape read), or null.
Operation *findNonMaskReader(Operation *replacement) {
  SmallVector<Value> work(replacement->getResults());
  llvm::SmallPtrSet<Operation *, 32> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto attention = dyn_cast<sits::AttentionOp>(user)) {
        if (attention.getMask() == value)
          continue;
        return user;
      }
      if (!isa<OnnxDialect>(user->getDialect()))
        return user;
      if (isa<ShapeOp>(user) || !seen.insert(user).second)
        continue;
      llvm::append_range(work, user->getResults());
    }
  }
  return nullptr;
}

/// Whether what is computed from the values of `input` reaches a RoPE
/// angle (a Cos or Sin) or indexes a table (a Gather's indices: cos/sin
/// caches): what positions do and a padding mask does not.
bool reachesRotary(Value input) {
  SmallVector<Value> work{input};
  llvm::SmallPtrSet<Operation *, 32> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      auto gather = dyn_cast<GatherOp>(user);
      if (isa<CosOp, SinOp>(user) || (gather && gather.getIndices() == value))
        return true;
      // Sizes are not the input's values (a mask's length builds ranges).
      if (!isa<ShapeOp>(user) && seen.insert(user).second)
        llvm::append_range(work, user->getResults());
    }
  }
  return false;
}

/// The inputs with the positions' dims ([batch, seq] integers of the ids'
/// type) that are the padding mask all the same: a merged decoder declares
/// the inputs both of its decoders read as its first-step decoder does
/// (optimum-onnx 0.1.0's merge_decoders), where the mask is as long as the
/// step. When several inputs look like positions, the one computing RoPE
/// angles is; the others must not (else the inputs are ambiguous: error).
FailureOr<llvm::SmallPtrSet<Value, 2>>
findMasksWithStepDims(RaiseContext &rc, BlockArgument ids,
                      const llvm::BitVector &erased, StringRef graphKind) {
  func::FuncOp function = rc.getFunction();
  SymbolicShapes &shapes = rc.getShapes();
  std::optional<ArrayRef<AffineExpr>> idsDims = shapes.getDims(ids);
  SmallVector<BlockArgument> candidates;
  for (BlockArgument arg : function.getArguments()) {
    std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(arg);
    if (arg != ids && !erased.test(arg.getArgNumber()) && dims && idsDims &&
        *dims == *idsDims &&
        getElementTypeOrSelf(arg.getType()) ==
            getElementTypeOrSelf(ids.getType()))
      candidates.push_back(arg);
  }
  llvm::SmallPtrSet<Value, 2> masks;
  if (candidates.size() < 2)
    return masks;
  int rotary = 0;
  for (BlockArgument arg : candidates) {
    if (reachesRotary(arg))
      ++rotary;
    else
      masks.insert(arg);
  }
  if (rotary != 1) {
    InFlightDiagnostic diag = function.emitError();
    diag << graphKind << ": inputs";
    for (BlockArgument arg : candidates)
      diag << " '" << inputName(function, arg.getArgNumber()) << "'";
    diag << " all have the positions' dims [batch, seq], and " << rotary
         << " of them compute RoPE angles: which is the padding mask "
            "cannot be told";
    rc.markFailed();
    return failure();
  }
  return masks;
}

} // namespace

LogicalResult
sits::onnx::raising::replacePositionInputs(RaiseContext &rc, BlockArgument ids,
                                           llvm::BitVector &erased,
                                           StringRef graphKind) {
  func::FuncOp function = rc.getFunction();
  SymbolicShapes &shapes = rc.getShapes();
  std::optional<ArrayRef<AffineExpr>> idsDims = shapes.getDims(ids);
  FailureOr<llvm::SmallPtrSet<Value, 2>> stepMasks =
      findMasksWithStepDims(rc, ids, erased, graphKind);
  if (failed(stepMasks))
    return failure();
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointToStart(&function.getBody().front());
  for (BlockArgument arg : function.getArguments()) {
    if (arg == ids || erased.test(arg.getArgNumber()))
      continue;
    StringRef name = inputName(function, arg.getArgNumber());
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(arg);
    if (!type || type.getRank() != 2 || !dims || !idsDims ||
        (*dims)[0] != (*idsDims)[0] ||
        !isa<IntegerType>(type.getElementType())) {
      std::string dimsText = dims ? shapes.print(*dims) : "?";
      function.emitError()
          << graphKind << ": input '" << name << "' (dims " << dimsText
          << ") is neither the token ids, a past key/value, the positions "
             "[batch, seq] nor the attention mask [batch, past + seq]";
      rc.markFailed();
      return failure();
    }
    Operation *replacement;
    if ((*dims)[1] == (*idsDims)[1] && !stepMasks->contains(arg) &&
        type.getElementType() ==
            cast<ShapedType>(ids.getType()).getElementType()) {
      // Positions: after an empty past, token i is at position i.
      replacement = PositionIdsOp::create(b, arg.getLoc(), type, ids, Value());
    } else {
      // Positions the graph computes from the mask are the runtime's too.
      if (failed(raiseMaskPositions(rc, arg, ids, name)))
        return failure();
      // The padding mask: every token of the step and of the cache is a
      // real token of its sequence.
      auto shape = ShapeOp::create(b, arg.getLoc(),
                                   RankedTensorType::get({2}, b.getI64Type()),
                                   ids, b.getI64IntegerAttr(0), IntegerAttr());
      replacement = ConstantOfShapeOp::create(
          b, arg.getLoc(), type, shape.getShape(),
          DenseElementsAttr::get(
              RankedTensorType::get({1}, type.getElementType()),
              b.getIntegerAttr(type.getElementType(), 1)));
    }
    arg.replaceAllUsesWith(replacement->getResult(0));
    rc.noteReplacedInput(name, replacement);
    erased.set(arg.getArgNumber());
    bool positions = isa<PositionIdsOp>(replacement);
    rc.recordRaise("position_inputs_replaced", {replacement},
                   "input '" + name.str() + "' replaced by the " +
                       (positions ? "runtime's positions" : "all-ones mask"),
                   "at an empty past the positions of a step are 0..seq-1 "
                   "and every key is a real token of its sequence (the "
                   "runtime keeps one length per sequence: no padding)");
  }
  return success();
}

void sits::onnx::raising::replaceCacheIO(RaiseContext &rc, BlockArgument ids,
                                         ArrayRef<Attribute> records,
                                         llvm::BitVector &erasedArgs,
                                         const llvm::BitVector &erasedResults,
                                         StringRef graphKind) {
  func::FuncOp function = rc.getFunction();
  function->setAttr("sits.kv_cache_io", rc.getBuilder().getArrayAttr(records));
  // Every other input must be the token ids or one of the two position
  // inputs the runtime replaces; anything else would be silently dropped.
  if (failed(replacePositionInputs(rc, ids, erasedArgs, graphKind)))
    return;
  function.getBody().front().getTerminator()->eraseOperands(erasedResults);
  if (failed(function.eraseResults(erasedResults)) ||
      failed(function.eraseArguments(erasedArgs))) {
    function.emitError() << graphKind
                         << ": cannot remove the cache's inputs "
                            "and outputs";
    rc.markFailed();
  }
}

void sits::onnx::raising::checkPositionInputs(RaiseContext &rc) {
  for (const auto &[name, replacement] : rc.getReplacedInputs()) {
    bool positions = isa<PositionIdsOp>(replacement);
    Operation *reader = positions ? findNonRopeReader(replacement)
                                  : findNonMaskReader(replacement);
    if (!reader)
      continue;
    InFlightDiagnostic diag = emitError(reader->getLoc());
    if (positions)
      diag << "input '" << name
           << "' was taken for the positions of the step's tokens, but "
           << sourceOf(reader)
           << " reads it other than as RoPE positions: the runtime supplies "
              "each unpadded sequence's positions 0..len-1 for RoPE only";
    else
      diag << "input '" << name
           << "' was taken for the padding mask, but a value computed from "
              "it reaches "
           << sourceOf(reader)
           << ", not an attention's mask: the runtime runs every sequence "
              "unpadded, which stands for a padding mask of the attention "
              "only";
    rc.markFailed();
  }
}
