//===- RaisingSupport.h - Shared state and helpers of raising ---*- C++ -*-===//
//
// What every raising pattern family uses: the builder, the symbolic shape
// analysis, the audit, the reasons ops were not raised, and small matchers
// for constants, scalar factors and products.
//
// Patterns run in phases (norms, linears, ..., attention). Within a phase a
// pattern matches on the current IR and rewrites at once by replacing the
// uses of the root it matched; nothing is erased until the phase ends and
// dead ops are removed, so Values the analysis cached stay valid.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FRONTENDS_ONNX_RAISING_RAISINGSUPPORT_H
#define SITS_FRONTENDS_ONNX_RAISING_RAISINGSUPPORT_H

#include "dialects/onnx/OnnxOps.h"
#include "dialects/shapes/SymbolicShapes.h"
#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace sits::onnx::raising {

/// Counters of the raise pass, in report order.
extern const llvm::StringRef kRaiseCounters[];
extern const size_t kNumRaiseCounters;

class RaiseContext {
public:
  RaiseContext(mlir::func::FuncOp function, PassAudit &audit);

  mlir::func::FuncOp getFunction() const { return function; }
  mlir::OpBuilder &getBuilder() { return builder; }
  SymbolicShapes &getShapes() { return shapes; }
  mlir::MLIRContext *getContext() { return function.getContext(); }

  /// Records a raise: bumps `counter`, and adds an audit change naming the
  /// source nodes of `replaced`, what they were, what replaced them, and the
  /// rule that made it safe.
  void recordRaise(llvm::StringRef counter,
                   llvm::ArrayRef<mlir::Operation *> replaced,
                   llvm::StringRef with, llvm::StringRef rule);

  /// Records a change that replaced no op (graph inputs and outputs).
  void recordChange(llvm::StringRef counter, mlir::Location loc,
                    llvm::StringRef replaced, llvm::StringRef with,
                    llvm::StringRef rule);

  /// A location fusing those of `ops` (in order, without duplicates).
  mlir::Location getFusedLoc(llvm::ArrayRef<mlir::Operation *> ops);

  /// Notes why `anchor` (an op a pattern starts from) was not raised, so
  /// that the report of unraised ops can say it. The first reason wins.
  void noteNotRaised(mlir::Operation *anchor, const llvm::Twine &reason);
  /// The reason noted for `op`, or "" when none.
  llvm::StringRef getReason(mlir::Operation *op) const;

  /// A `[N, K]` weight for `y = x W` with constant `W` of `[K, N]`: the
  /// operand of `W = Transpose(W0)` when it is one, else a transposed copy
  /// of the constant (created once per weight). Fails when `weight` is not
  /// such a constant.
  mlir::FailureOr<mlir::Value>
  getProjectionWeight(mlir::Value weight,
                      llvm::SmallVectorImpl<mlir::Operation *> &used);

  /// A 1-D `[size]` version of a per-channel operand (`[hidden]`, or a
  /// constant `[1, ..., 1, hidden]`); null when it is neither.
  mlir::Value getChannelVector(mlir::Value value, mlir::AffineExpr size);
  /// A constant broadcast (numpy rules; leading 1s beyond `shape`'s rank
  /// dropped) to `shape` and flattened: one 1-D weight of the product of
  /// `shape`, named after `value`; null when `value` is not a float
  /// constant that broadcasts to it.
  mlir::Value getFlattenedWeight(mlir::Value value,
                                 llvm::ArrayRef<int64_t> shape);

  /// A graph input the engine's runtime supplies (positions, padding
  /// mask), now `replacement`; checkPositionInputs checks what reads it.
  void noteReplacedInput(llvm::StringRef name, mlir::Operation *replacement) {
    replacedInputs.push_back({name.str(), replacement});
  }
  llvm::ArrayRef<std::pair<std::string, mlir::Operation *>>
  getReplacedInputs() const {
    return replacedInputs;
  }

  /// An error was emitted: the pass fails once its phases have run.
  void markFailed() { failed = true; }
  bool hasFailed() const { return failed; }

  /// Erases ops that became dead, forgets what the analysis cached, and
  /// gives transposed weights the names of the originals they replaced.
  void finishPhase();

private:
  mlir::func::FuncOp function;
  PassAudit &audit;
  mlir::OpBuilder builder;
  SymbolicShapes shapes;
  llvm::DenseMap<mlir::Operation *, std::string> reasons;
  /// Replaced inputs whose replacement is still alive.
  llvm::SmallVector<std::pair<std::string, mlir::Operation *>> replacedInputs;
  bool failed = false;
  /// Original weight -> its transposed copy.
  llvm::DenseMap<mlir::Value, mlir::Value> transposed;
  /// Weights derived from another (transposed, flattened), with the name of
  /// the original.
  struct DerivedWeight {
    /// Compared by address only once the phase's dead ops are erased.
    WeightOp derived;
    mlir::Value original;
    std::string baseName;
  };
  llvm::SmallVector<DerivedWeight> derivedWeights;
};

//===----------------------------------------------------------------------===//
// Matchers
//===----------------------------------------------------------------------===//

/// The op of type OpTy defining `value`, or null.
template <typename OpTy> OpTy definedBy(mlir::Value value) {
  return value ? value.getDefiningOp<OpTy>() : OpTy();
}

/// The constant value of `value` (sits.weight, onnx.Constant, any
/// ConstantLike op), or null.
mlir::ElementsAttr getConstant(mlir::Value value);

/// The constant value of `value` as a DenseElementsAttr (a copy of a mapped
/// or viewed weight: for small constants), or null.
mlir::DenseElementsAttr getDenseConstant(mlir::Value value);

/// The value of a constant with a single element (any shape of ones), as a
/// double, or nullopt.
std::optional<double> getScalarConstant(mlir::Value value);

/// Whether `value` is a scalar constant equal to `expected` within a
/// relative tolerance (constants are stored in the model's float type).
bool isScalarConstant(mlir::Value value, double expected,
                      double tolerance = 1e-6);

/// Whether `value` is provably all zeros: a constant of zeros, or
/// ConstantOfShape of zero (through Cast, Reshape and Expand).
bool isZeroTensor(mlir::Value value);

/// For a commutative binary op, the operand that is not `operand`, or null
/// when neither is.
mlir::Value otherOperand(mlir::Operation *op, mlir::Value operand);

/// A product of tensors and a constant factor: `scale * f0 * f1 * ...`,
/// flattened from trees of Mul, Div by constants and Neg.
struct Product {
  double scale = 1.0;
  llvm::SmallVector<mlir::Value, 4> factors;
  llvm::SmallVector<mlir::Operation *, 4> ops;
};
Product collectProduct(mlir::Value value);

/// Float element type of a tensor value, or null.
mlir::FloatType getFloatElementType(mlir::Value value);

/// "Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul x2 (7 onnx ops)".
std::string describeOps(llvm::ArrayRef<mlir::Operation *> ops);

/// A float for audit text: shortest form that reads back (%.9g).
std::string formatFloat(double value);

/// `type` with its last dim replaced.
mlir::RankedTensorType withLastDim(mlir::Type type, int64_t size);

/// A static size from a symbolic dim (kDynamic when not constant).
int64_t staticSize(mlir::AffineExpr dim);

/// The only user of `value` when it has exactly one use, else null.
mlir::Operation *getSingleUser(mlir::Value value);

/// Rows [begin, end) of a constant weight [N, ...] (or elements of a bias
/// [N]), as a new weight named `<original>[begin:end]` (a fused q/k/v
/// projection's parts); null when `value` is not such a constant.
mlir::Value sliceWeightRows(RaiseContext &rc, mlir::Value value, int64_t begin,
                            int64_t end);

/// One `[max_position, R]` RoPE table for sits.rope_gather of constant
/// `[max_position, R/2]` cos and sin caches side by side (cos, then sin in
/// each row), a sits.weight named `rope_table`; null when they are not
/// such constants.
mlir::Value createRopeTable(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value cos, mlir::Value sin);

/// The rows of a RoPE table at positions, one sits.rope_gather per (cos
/// cache, sin cache, positions): the rotations that read the same share it.
using RopeGathers =
    llvm::DenseMap<std::tuple<mlir::Value, mlir::Value, mlir::Value>,
                   RopeGatherOp>;

/// The 2-D table an embedding lookup `Gather(table, ids, axis 0)` reads:
/// a constant, or `Transpose(W)` of a constant (the GenAI builder's tied
/// table, read from the LM head's `[hidden, vocab]` weight); null otherwise.
mlir::Value getEmbeddingTable(onnx::GatherOp gather);

/// The graph input holding the token ids: the one an embedding table is
/// looked up with (a Gather of getEmbeddingTable, GatherBlockQuantized of
/// a quantized one, or an already raised sits.embedding). Null when none
/// is.
mlir::BlockArgument findTokenIds(mlir::func::FuncOp function);

/// The ops of type OpTy in the function, in order (a snapshot: patterns
/// add ops while they run).
template <typename OpTy>
llvm::SmallVector<OpTy> collectOps(mlir::func::FuncOp function) {
  llvm::SmallVector<OpTy> ops;
  function.walk([&](OpTy op) { ops.push_back(op); });
  return ops;
}

//===----------------------------------------------------------------------===//
// Pattern families, one file each, in the order the pass runs them
//===----------------------------------------------------------------------===//

/// Past key/value inputs and present outputs (exports with a cache) into
/// the graph at an empty past, recorded as `sits.kv_cache_io`; its position
/// and padding-mask inputs into the runtime's positions.
void raisePastKeyValues(RaiseContext &context);
/// The integer inputs of a graph whose cache the engine keeps, other than
/// the token ids `ids` and the inputs set in `erased`: `[batch, seq]`
/// positions become sits.position_ids, the `[batch, past + seq]` padding
/// mask all ones (PositionInputs.cpp); their bits are set in `erased`.
/// Anything else is an error that starts with `graphKind`.
mlir::LogicalResult replacePositionInputs(RaiseContext &context,
                                          mlir::BlockArgument ids,
                                          llvm::BitVector &erased,
                                          llvm::StringRef graphKind);
/// Positions the graph computes from the padding mask `mask` with Hugging
/// Face's left-padding rule (cumsum(mask, -1) - 1, padding positions set,
/// the last seq columns) become sits.position_ids of `ids`
/// (MaskPositions.cpp); any other CumSum of the mask is an error (failure).
mlir::LogicalResult raiseMaskPositions(RaiseContext &context,
                                       mlir::BlockArgument mask,
                                       mlir::BlockArgument ids,
                                       llvm::StringRef maskName);
/// Leaves the graph's cache to the engine: records `records` as the
/// function's `sits.kv_cache_io`, replaces the position inputs
/// (replacePositionInputs) and erases the arguments and results set in
/// `erasedArgs` and `erasedResults`.
void replaceCacheIO(RaiseContext &context, mlir::BlockArgument ids,
                    llvm::ArrayRef<mlir::Attribute> records,
                    llvm::BitVector &erasedArgs,
                    const llvm::BitVector &erasedResults,
                    llvm::StringRef graphKind);
/// Once every pattern has run: an error for each replaced position input
/// read other than as RoPE positions, or mask read other than by the
/// attention mask's subgraph.
void checkPositionInputs(RaiseContext &context);
/// ONNX Runtime contrib ops (GenAI builder graphs): norms, MatMulNBits,
/// GatherBlockQuantized.
void raiseContribOps(RaiseContext &context);
/// GroupQueryAttention over its cache into the graph at an empty past.
void raiseGroupQueryAttention(RaiseContext &context);
/// Identity, and Dropout at inference, replaced by their input.
void removeIdentities(RaiseContext &context);
/// Casts of float weights (half-precision checkpoints) become the weights,
/// converted at compile time.
void foldWeightCasts(RaiseContext &context);
/// RMSNormalization, LayerNormalization, decomposed RMSNorm.
void raiseNorms(RaiseContext &context);
/// Embedding Gathers; MatMul/Gemm with constant weights (and biases) into
/// sits.linear, the LM head into sits.lm_head.
void raiseProjections(RaiseContext &context);
/// SiLU, GELU (erf, tanh, the op), ReLU, Sigmoid into sits.activation.
void raiseActivations(RaiseContext &context);
/// act(gate) * up into sits.glu.
void raiseGatedUnits(RaiseContext &context);
/// Reshape/Transpose into sits.split_heads and sits.merge_heads.
void raiseHeads(RaiseContext &context);
/// Rotate-half RoPE and RotaryEmbedding-23 into sits.rope, and their
/// cos/sin of positions x inv_freq into sits.rope_cos_sin.
void raiseRope(RaiseContext &context);
/// MatMul/Softmax/MatMul attention and Attention-23 into sits.attention.
void raiseAttention(RaiseContext &context);
/// Same-shape float Adds into sits.add.
void raiseResidualAdds(RaiseContext &context);

} // namespace sits::onnx::raising

#endif // SITS_FRONTENDS_ONNX_RAISING_RAISINGSUPPORT_H
