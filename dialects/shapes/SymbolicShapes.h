//===- SymbolicShapes.h - Symbolic shapes and values of tensors -*- C++ -*-===//
//
// A reusable analysis that knows, for any tensor Value, its dims as affine
// expressions over named symbols (one per dynamic dim of the graph inputs,
// named by the ONNX dim_param: `batch`, `seq`), and, for small integer
// tensors (shape computations), their element values. So that
// `Reshape(x, Concat(Shape(x)[0], Shape(x)[1], [-1], [32]))` of
// `x: [batch, seq, 128]` is `[batch, seq, 4, 32]` with the same symbols.
//
// It also tracks, where it can, each element's value as an affine function
// of its index (`d0`, `d1`, ...): `Range(0, seq, 1)` unsqueezed to `[1, seq]`
// holds `d1` at index (d0, d1), which proves that positions are
// `arange(seq)` broadcast.
//
// The importer uses it to type every op; raising patterns and passes query
// it on any IR at any time. Ops without a rule fall back to their static
// type, with a fresh unknown symbol per dynamic dim. Facts are cached per
// Value: after rewriting IR, call `clear()` (or `forget`) before querying
// values whose producers changed.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SHAPES_SYMBOLICSHAPES_H
#define SITS_DIALECT_SHAPES_SYMBOLICSHAPES_H

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <unordered_map>

namespace sits::onnx {

/// Function argument attribute naming each dim of a graph input (the ONNX
/// dim_param; "" for static or unnamed dims).
constexpr llvm::StringLiteral kDimNamesAttr = "sits.dim_names";

/// What is known about one tensor.
struct TensorFacts {
  mlir::Type elementType;
  /// False for tensors of unknown rank (only seen on IR typed by hand).
  bool ranked = false;
  /// Canonical size of each dim (see SymbolicExpr.h).
  llvm::SmallVector<mlir::AffineExpr, 4> dims;
  /// Element values, row-major, of small integer tensors (at most
  /// `SymbolicShapes::kMaxTrackedElements`); an entry is null when that
  /// element is unknown. Absent when not tracked.
  std::optional<llvm::SmallVector<mlir::AffineExpr, 4>> values;
  /// Every element's value as a function of its index (dim i of the
  /// expression is the index along axis i); null when unknown.
  mlir::AffineExpr elementExpr;

  int64_t getRank() const { return static_cast<int64_t>(dims.size()); }
  /// Number of elements when every dim is a constant.
  std::optional<int64_t> getStaticNumElements() const;
  /// The dim at `index` (negative counts from the end); null when out of
  /// range or unranked.
  mlir::AffineExpr getDim(int64_t index) const;
  /// The only value of a tensor with one element (rank 0 or all dims 1).
  mlir::AffineExpr getScalar() const;
};

/// Streams a failure message; converts to `failure()`.
class ShapeFailure {
public:
  explicit ShapeFailure(std::string &message) : os(message) {}
  template <typename T> ShapeFailure &operator<<(const T &value) {
    os << value;
    return *this;
  }
  operator mlir::LogicalResult() const { return mlir::failure(); }
  template <typename T> operator mlir::FailureOr<T>() const {
    return mlir::failure();
  }

private:
  llvm::raw_string_ostream os;
};

class SymbolicShapes;

/// What a shape rule sees: the op, its operands' facts, the results to
/// fill, and helpers.
class ShapeRuleContext {
public:
  ShapeRuleContext(mlir::Operation *op, SymbolicShapes &shapes,
                   llvm::SmallVectorImpl<TensorFacts> &results)
      : op(op), shapes(shapes), results(results) {}

  mlir::Operation *getOp() const { return op; }
  SymbolicShapes &getShapes() const { return shapes; }
  mlir::MLIRContext *getContext() const { return op->getContext(); }
  const TensorFacts &operand(unsigned index) const;
  TensorFacts &result(unsigned index = 0) { return results[index]; }
  unsigned getNumResults() const { return results.size(); }

  /// Records why the rule failed; `return ctx.fail() << "...";`.
  ShapeFailure fail() {
    message.clear();
    return ShapeFailure(message);
  }
  const std::string &getMessage() const { return message; }

  mlir::AffineExpr constant(int64_t value) const;
  /// A new symbol for a size the analysis cannot determine.
  mlir::AffineExpr unknown() const;
  /// Describes dims for messages: "[batch, seq, 128]".
  std::string describe(llvm::ArrayRef<mlir::AffineExpr> dims) const;
  std::string describe(mlir::AffineExpr expr) const;

private:
  mlir::Operation *op;
  SymbolicShapes &shapes;
  llvm::SmallVectorImpl<TensorFacts> &results;
  std::string message;
};

/// Computes the facts of `ctx.getOp()`'s results from its operands: what an
/// op's ShapeRuleOpInterface runs (ShapeRuleOpInterface.h).
using ShapeRule = mlir::LogicalResult (*)(ShapeRuleContext &ctx);

class SymbolicShapes {
public:
  /// Small integer tensors up to this many elements have tracked values.
  static constexpr int64_t kMaxTrackedElements = 64;

  explicit SymbolicShapes(mlir::MLIRContext *context);

  /// Facts of `value`, computed on first use from its producers. The
  /// reference stays valid until `forget` or `clear`.
  const TensorFacts &getFacts(mlir::Value value);
  /// Dims of a ranked tensor; nullopt when the rank is unknown.
  std::optional<llvm::ArrayRef<mlir::AffineExpr>> getDims(mlir::Value value);
  /// Size of dim `index` (negative counts from the end); null if unknown.
  mlir::AffineExpr getDim(mlir::Value value, int64_t index);
  /// Element values of a small integer tensor, when all are known.
  std::optional<llvm::SmallVector<mlir::AffineExpr, 4>>
  getValues(mlir::Value value);
  /// Constant element values of a small integer tensor.
  std::optional<llvm::SmallVector<int64_t, 4>>
  getConstantValues(mlir::Value value);
  /// Whether both values provably have the same dims.
  bool haveSameDims(mlir::Value lhs, mlir::Value rhs);

  /// The symbol of the named dynamic dim (created on first use).
  mlir::AffineExpr getNamedSymbol(llvm::StringRef name);
  /// A new symbol for an unknown size.
  mlir::AffineExpr createUnknownSymbol();
  /// Name of a symbol: the dim_param, or "?N" for unknown sizes.
  llvm::StringRef getSymbolName(unsigned position) const;
  /// Whether `expr` is a symbol created for an unknown size.
  bool isUnknownSymbol(mlir::AffineExpr expr) const;

  /// `expr` with symbol names: "seq + 1", "batch * seq".
  std::string print(mlir::AffineExpr expr) const;
  std::string print(llvm::ArrayRef<mlir::AffineExpr> dims) const;

  /// The MLIR type of `facts`: constant dims static, others `?`.
  mlir::TensorType getType(const TensorFacts &facts) const;
  /// Facts read from a type alone (fresh symbols for dynamic dims).
  TensorFacts factsFromType(mlir::Type type);
  /// Facts of a constant: static dims, values of small integer tensors.
  TensorFacts factsFromConstant(mlir::ElementsAttr attr);

  /// Runs the rule of `op` (its ShapeRuleOpInterface) on its operands'
  /// facts; constant-like ops without one read their value. Fails with
  /// `message` set when the op has no rule or its operands are
  /// inconsistent. Does not cache the results.
  mlir::LogicalResult inferResults(mlir::Operation *op,
                                   llvm::SmallVectorImpl<TensorFacts> &results,
                                   std::string &message);
  /// Records facts for a value (the importer does this for graph inputs
  /// and for the ops it creates).
  void setFacts(mlir::Value value, TensorFacts facts);
  /// Drops the cached facts of `value`.
  void forget(mlir::Value value);
  /// Drops every cached fact (symbols and their names are kept).
  void clear();

  mlir::MLIRContext *getContext() const { return context; }

private:
  /// Computes and caches facts for `value`, operands first, without
  /// recursion (graphs can be deep).
  void compute(mlir::Value value);
  TensorFacts computeForBlockArgument(mlir::BlockArgument arg);
  void computeForOp(mlir::Operation *op);

  mlir::MLIRContext *context;
  /// Keyed by the Value's opaque pointer; a node-based map so that
  /// references returned by getFacts stay valid while others are added.
  std::unordered_map<const void *, TensorFacts> cache;
  llvm::SmallVector<std::string> symbolNames;
  llvm::SmallVector<bool> symbolIsUnknown;
  llvm::StringMap<unsigned> namedSymbols;
};

//===----------------------------------------------------------------------===//
// Helpers shared by the rule files
//===----------------------------------------------------------------------===//

/// Values of a 1-D operand of constant length (a shape, starts, repeats),
/// with unknown entries null; fails when the length is not a constant.
mlir::FailureOr<llvm::SmallVector<mlir::AffineExpr, 4>>
getShapeOperand(ShapeRuleContext &ctx, unsigned index, llvm::StringRef name);

/// Numpy broadcasting of dims; fails naming the first incompatible pair.
mlir::FailureOr<llvm::SmallVector<mlir::AffineExpr, 4>>
broadcastDims(ShapeRuleContext &ctx,
              llvm::ArrayRef<llvm::ArrayRef<mlir::AffineExpr>> shapes);

/// Maps `elementExpr` of an operand with `operandDims` into the index space
/// of a broadcast result with `resultDims`: index i of the operand is index
/// i + (result rank - operand rank) of the result, or 0 where the operand
/// dim is 1 and broadcast. Null when the operand expression is null.
mlir::AffineExpr
broadcastElementExpr(mlir::AffineExpr elementExpr,
                     llvm::ArrayRef<mlir::AffineExpr> operandDims,
                     llvm::ArrayRef<mlir::AffineExpr> resultDims);

/// Replaces dim i of `expr` by `replacements[i]` and canonicalizes.
mlir::AffineExpr remapDims(mlir::AffineExpr expr,
                           llvm::ArrayRef<mlir::AffineExpr> replacements);

/// Normalizes an axis in [-rank, rank) to [0, rank); fails otherwise.
mlir::FailureOr<int64_t> normalizeAxis(ShapeRuleContext &ctx,
                                       llvm::StringRef what, int64_t axis,
                                       int64_t rank);

/// Requires operand `index` to be ranked; fails naming it otherwise.
mlir::LogicalResult requireRanked(ShapeRuleContext &ctx, unsigned index,
                                  llvm::StringRef name);

/// Integer values of operand `index` as constants (an axes or perm-like
/// input); fails naming the operand when they are not all constant.
mlir::FailureOr<llvm::SmallVector<int64_t, 4>>
requireConstantInts(ShapeRuleContext &ctx, unsigned index,
                    llvm::StringRef name);

/// Number of elements of `dims` (canonical product).
mlir::AffineExpr productOf(llvm::ArrayRef<mlir::AffineExpr> dims,
                           mlir::MLIRContext *context);

/// The value of the element at `index` of a tensor with `facts` (row-major
/// `values` or `elementExpr`); null when unknown. Indices past a dim of
/// size 1 read index 0 (broadcasting).
mlir::AffineExpr elementAt(const TensorFacts &facts,
                           llvm::ArrayRef<int64_t> index,
                           mlir::MLIRContext *context);

/// Calls `fn` with every multi-index of constant `dims`, row-major.
void forEachIndex(llvm::ArrayRef<int64_t> dims,
                  llvm::function_ref<void(llvm::ArrayRef<int64_t>)> fn);

/// Constant dims of `facts`, when all are constants.
std::optional<llvm::SmallVector<int64_t, 4>>
getConstantDims(const TensorFacts &facts);

/// Sets `facts.values` when the tensor is small enough, and
/// drops them otherwise.
void setTrackedValues(TensorFacts &facts,
                      llvm::SmallVector<mlir::AffineExpr, 4> values);

} // namespace sits::onnx

#endif // SITS_DIALECT_SHAPES_SYMBOLICSHAPES_H
