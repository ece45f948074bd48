//===- RaisePastKV.cpp - Past key/value I/O into the engine's cache -------===//
//
// Exports "with past" (the Optimum `text-generation-with-past` form) take
// each layer's cached keys and values as graph inputs, concatenate the new
// ones after them along the sequence axis, attend over the concatenation and
// return it as a `present` output. sits keeps the cache itself
// (`--sits-kv-cache`), so the program it compiles is this graph with an
// empty past: each such Concat is its new rows, the past inputs and present
// outputs leave the signature, and what they were (names, dims, element
// type, layout) is recorded on the function as `sits.kv_cache_io`.
//
// A pair is recognized by structure alone: a rank-4 float graph input read
// only as the first operand of a Concat on axis 2 with new rows of the same
// static heads and head dims (and by Shape: the past length), the Concat
// returned as a graph output. Other reads of the past see an empty tensor.
// Names are only recorded. The `attention_mask` and `position_ids` inputs
// then describe the runtime's own positions and become them
// (PositionInputs.cpp).
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

/// One past input concatenated into one present output.
struct PastPair {
  BlockArgument past;
  ConcatOp concat;
  Value fresh;
  unsigned resultIndex = 0;
};

StringRef getInputName(func::FuncOp function, unsigned index) {
  auto name = function.getArgAttrOfType<StringAttr>(index, "sits.input_name");
  return name ? name.getValue() : StringRef();
}

StringRef getOutputName(func::FuncOp function, unsigned index) {
  auto name =
      function.getResultAttrOfType<StringAttr>(index, "sits.output_name");
  return name ? name.getValue() : StringRef();
}

/// The Concat that makes `past` a cache input, with the new rows and the
/// graph output it is returned as; nullopt (with a reason for inputs that
/// look like a cache but are not one) otherwise.
std::optional<PastPair> matchPastInput(BlockArgument past, func::ReturnOp ret,
                                       std::string &reason) {
  auto type = dyn_cast<RankedTensorType>(past.getType());
  if (!type || type.getRank() != 4 || !getFloatElementType(past))
    return std::nullopt;
  // Besides the Concat, only its shape may be read (the past length).
  ConcatOp concat;
  for (Operation *user : past.getUsers()) {
    if (isa<ShapeOp>(user))
      continue;
    if (concat || !isa<ConcatOp>(user)) {
      if (concat || isa<ConcatOp>(user))
        reason = "it has uses other than one Concat and Shape";
      return std::nullopt;
    }
    concat = cast<ConcatOp>(user);
  }
  if (!concat)
    return std::nullopt;
  int64_t axis = concat.getAxis();
  if (concat.getInputs().size() != 2 || concat.getInputs()[0] != past ||
      (axis != 2 && axis != -2)) {
    reason = "it is not the first of two tensors concatenated on the "
             "sequence axis (2)";
    return std::nullopt;
  }
  // The heads and head_dim are static and shared; the batch is whatever the
  // step's is (exporters compute the new rows' dims through shape ops the
  // analysis need not see through).
  Value fresh = concat.getInputs()[1];
  auto freshType = dyn_cast<RankedTensorType>(fresh.getType());
  if (!freshType || freshType.getRank() != 4 || type.isDynamicDim(1) ||
      type.isDynamicDim(3) || freshType.getDimSize(1) != type.getDimSize(1) ||
      freshType.getDimSize(3) != type.getDimSize(3) ||
      freshType.getElementType() != type.getElementType() ||
      fresh.getType() != concat.getResult().getType()) {
    reason = "the new rows do not have its static heads and head dims and "
             "element type";
    return std::nullopt;
  }
  std::optional<unsigned> resultIndex;
  for (OpOperand &use : concat.getResult().getUses())
    if (use.getOwner() == ret.getOperation())
      resultIndex = use.getOperandNumber();
  if (!resultIndex) {
    reason = "the concatenation is not a graph output (no present output)";
    return std::nullopt;
  }
  return PastPair{past, concat, fresh, *resultIndex};
}

std::string dimsText(SymbolicShapes &shapes, Value value) {
  std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(value);
  return dims ? shapes.print(*dims) : "?";
}

/// The loader took a merged decoder's If apart (MergedDecoder.cpp); the
/// audit says so, with the rule, at the If node.
void recordUnmergedDecoder(RaiseContext &rc) {
  auto merged =
      rc.getFunction()->getAttrOfType<DictionaryAttr>("sits.merged_decoder");
  if (!merged)
    return;
  auto text = [&](StringRef key) {
    auto value = merged.getAs<StringAttr>(key);
    return value ? value.getValue() : StringRef("?");
  };
  auto count = [&](StringRef key) {
    auto value = merged.getAs<IntegerAttr>(key);
    return value ? value.getInt() : -1;
  };
  rc.recordChange(
      "merged_decoders_unmerged",
      NameLoc::get(StringAttr::get(rc.getContext(), text("node"))),
      llvm::formatv("If on input '{0}' (then_branch {1} nodes, else_branch "
                    "{2} nodes)",
                    text("condition"), count("kept_nodes"),
                    count("dropped_nodes"))
          .str(),
      llvm::formatv("its then_branch, the decoder with past key/values; "
                    "input '{0}' removed",
                    text("condition"))
          .str(),
      "the engine keeps the cache and runs every step, the first one too, "
      "as the decoder with past at its (possibly empty) past; the "
      "else_branch, the first-step decoder, computes that graph's value at "
      "an empty past");
}

} // namespace

void sits::onnx::raising::raisePastKeyValues(RaiseContext &rc) {
  func::FuncOp function = rc.getFunction();
  if (function.isExternal())
    return;
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  SymbolicShapes &shapes = rc.getShapes();
  recordUnmergedDecoder(rc);

  SmallVector<PastPair> pairs;
  for (BlockArgument arg : function.getArguments()) {
    std::string reason;
    if (std::optional<PastPair> pair = matchPastInput(arg, ret, reason))
      pairs.push_back(*pair);
    else if (!reason.empty())
      emitWarning(arg.getLoc())
          << "input '" << getInputName(function, arg.getArgNumber())
          << "' is concatenated like a past key/value but is not one: "
          << reason;
  }
  if (pairs.empty())
    return;

  BlockArgument ids = findTokenIds(function);
  if (!ids) {
    function.emitError() << "graph with past key/value inputs: no input "
                            "indexes the embedding table (token ids)";
    rc.markFailed();
    return;
  }
  llvm::BitVector erasedArgs(function.getNumArguments());
  for (const PastPair &pair : pairs)
    erasedArgs.set(pair.past.getArgNumber());
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointToStart(&function.getBody().front());
  // The cache I/O, in output order, as the program's record of the graph's
  // cache layout and element type.
  llvm::sort(pairs, [](const PastPair &x, const PastPair &y) {
    return x.resultIndex < y.resultIndex;
  });
  SmallVector<Attribute> records;
  llvm::BitVector erasedResults(function.getNumResults());
  for (PastPair &pair : pairs) {
    auto type = cast<RankedTensorType>(pair.past.getType());
    std::string dims = dimsText(shapes, pair.past);
    records.push_back(b.getDictionaryAttr({
        b.getNamedAttr("input", b.getStringAttr(getInputName(
                                    function, pair.past.getArgNumber()))),
        b.getNamedAttr("output", b.getStringAttr(getOutputName(
                                     function, pair.resultIndex))),
        b.getNamedAttr("dims", b.getStringAttr(dims)),
        b.getNamedAttr("element_type", TypeAttr::get(type.getElementType())),
        b.getNamedAttr("layout",
                       b.getStringAttr("[batch, kv_heads, seq, head_dim]")),
    }));
    pair.concat.getResult().replaceUsesWithIf(pair.fresh, [&](OpOperand &use) {
      return use.getOwner() != ret.getOperation();
    });
    // What else reads the past reads its shape: [batch, heads, 0, head_dim].
    if (!pair.past.use_empty()) {
      auto shapeType = RankedTensorType::get({1}, b.getI64Type());
      auto batch =
          ShapeOp::create(b, pair.past.getLoc(), shapeType, ids,
                          b.getI64IntegerAttr(0), b.getI64IntegerAttr(1));
      auto rest = ConstantOp::create(
          b, pair.past.getLoc(), RankedTensorType::get({3}, b.getI64Type()),
          DenseElementsAttr::get(
              RankedTensorType::get({3}, b.getI64Type()),
              ArrayRef<int64_t>{type.getDimSize(1), 0, type.getDimSize(3)}),
          nullptr, nullptr, nullptr, nullptr);
      auto dims = ConcatOp::create(
          b, pair.past.getLoc(), RankedTensorType::get({4}, b.getI64Type()),
          ValueRange{batch.getShape(), rest.getResult()},
          b.getI64IntegerAttr(0));
      auto empty = ConstantOfShapeOp::create(
          b, pair.past.getLoc(), type, dims.getConcatResult(),
          DenseElementsAttr::get(
              RankedTensorType::get({1}, type.getElementType()),
              b.getFloatAttr(type.getElementType(), 0.0)));
      pair.past.replaceAllUsesWith(empty.getOutput());
    }
    erasedResults.set(pair.resultIndex);
    std::string elementType;
    llvm::raw_string_ostream os(elementType);
    os << type.getElementType();
    rc.recordRaise(
        "kv_cache_io_raised", {pair.concat},
        llvm::formatv("the engine's KV cache (input '{0}' -> output '{1}', "
                      "dims {2}, {3}, layout [batch, kv_heads, seq, "
                      "head_dim])",
                      getInputName(function, pair.past.getArgNumber()),
                      getOutputName(function, pair.resultIndex), dims,
                      elementType)
            .str(),
        "a graph input concatenated before the new rows on the sequence axis "
        "and returned is a cache of past rows; with the engine's cache the "
        "step computes the graph's value at an empty past, where the "
        "concatenation is the new rows");
  }
  replaceCacheIO(rc, ids, records, erasedArgs, erasedResults,
                 "graph with past key/value inputs");
  shapes.clear();
}
