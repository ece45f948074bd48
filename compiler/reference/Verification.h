//===- Verification.h - Accuracy checks with the reference executor -*- C++
//-*-//
//
// What `sitsc --verify`, `--verify-greedy` and `--reference-perplexity` need
// on top of the Executor: reference comparisons of logits, greedy decoding
// through a full-sequence function or through prefill/decode steps with a KV
// cache, and teacher-forced negative log-likelihood.
//
// Which functions: a module after `--sits-kv-cache` has functions marked
// `sits.step = "prefill"` and `"decode"`, each taking (ids, !sits.kv_cache)
// and returning (logits, !sits.kv_cache); otherwise the full-sequence
// function takes the ids alone and returns the logits. findProgram() picks.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_VERIFICATION_H
#define SITS_COMPILER_REFERENCE_VERIFICATION_H

#include "compiler/reference/Executor.h"

#include "llvm/Support/raw_ostream.h"

namespace sits::reference {

/// A tensor from ONNX tensor data (TensorProto.DataType and little-endian
/// raw bytes, bool one byte per element), e.g. a `test_data_set_0/*.pb`
/// tensor read by the frontend's readTensorProtoFile.
llvm::Expected<Tensor> tensorFromOnnxData(int64_t onnxElementType,
                                          llvm::ArrayRef<int64_t> dims,
                                          llvm::ArrayRef<char> bytes);

//===----------------------------------------------------------------------===//
// Comparing with reference outputs
//===----------------------------------------------------------------------===//

/// How computed logits (or any float tensor) differ from reference ones.
/// Positions are all indices but the last (the vocabulary) dimension.
struct Comparison {
  Shape shape;
  /// max |actual - expected|.
  double maxAbsError = 0;
  /// max |actual - expected| / max(|expected|, 1e-3 * max |expected|): the
  /// floor keeps near-zero reference values from dominating.
  double maxRelError = 0;
  /// Index (flattened) of the element with the largest absolute error.
  int64_t worstIndex = 0;
  /// NaN or infinity where the reference is finite (or the other way).
  int64_t nonFiniteMismatches = 0;
  /// Per position: argmax over the last dimension of both.
  std::vector<int64_t> actualArgmax, expectedArgmax;
  int64_t argmaxAgreements() const;
  int64_t positions() const { return actualArgmax.size(); }
  /// True when maxAbsError <= tolerance and nothing non-finite differs.
  bool withinTolerance(double tolerance) const;
  /// A readable report: the errors, and the argmax agreement per position
  /// (as "batch b, position s" for a [batch, seq, vocab] tensor).
  void print(llvm::raw_ostream &os) const;
};

/// Compares two float tensors of one shape (an error when shapes differ).
llvm::Expected<Comparison> compareTensors(const Tensor &actual,
                                          const Tensor &expected);

/// How a tensor compares with a reference one under numpy's
/// `assert_allclose` rule, which ONNX's backend tests use: element i agrees
/// when `|a - e| <= atol + rtol * |e|`, or both are NaN, or both are the
/// same infinity.
struct AllCloseComparison {
  Shape shape;
  /// Over the elements where both are finite; rel is `|a - e| / |e|` (for
  /// e != 0).
  double maxAbsError = 0, maxRelError = 0;
  /// Elements that do not agree, and the first of them (flat index).
  int64_t mismatches = 0;
  int64_t firstMismatch = -1;
  double firstActual = 0, firstExpected = 0;
  bool passed() const { return mismatches == 0; }
  /// "max abs error 1.2e-07, max rel error 3.0e-06", then on a mismatch
  /// "; 3 of 64 elements differ, the first at [0, 1, 2]: 0.5 against 0.25".
  void print(llvm::raw_ostream &os) const;
};

/// Compares two tensors of one shape and element type (an error naming the
/// difference otherwise), elementwise as above.
llvm::Expected<AllCloseComparison> compareAllClose(const Tensor &actual,
                                                   const Tensor &expected,
                                                   double rtol, double atol);

//===----------------------------------------------------------------------===//
// Running language-model programs
//===----------------------------------------------------------------------===//

/// The functions of a program: `prefill`/`decode` when it has a KV cache,
/// else `forward` (the full-sequence function).
struct Program {
  std::string forward;
  std::string prefill;
  std::string decode;
  bool hasCache() const { return !prefill.empty(); }
};

/// Prefers functions marked `sits.step = "prefill"/"decode"`; else uses
/// `forwardName` when given, else the module's only function (an error when
/// there are several).
llvm::Expected<Program> findProgram(mlir::ModuleOp module,
                                    llvm::StringRef forwardName = "");

/// Runs `function` on token ids `[batch, seq]` and returns its first result
/// (the logits). Token ids are converted to the function's integer type; a
/// KV-cache argument gets an empty cache (so a prefill step computes the
/// whole sequence).
llvm::Expected<Tensor> runLogits(Executor &executor, mlir::ModuleOp module,
                                 llvm::StringRef function,
                                 const Tensor &tokenIds);

/// What one prefill or decode step returns.
struct StepResult {
  Tensor logits;
  /// The state after the step (null for a function without a KV cache).
  std::shared_ptr<KVCacheState> cache;
};

/// Runs one step of `function` on token ids `[batch, seq]` with `cache` (an
/// empty cache when null): the ids converted to the function's integer type.
/// The executor updates `cache` in place and returns it.
llvm::Expected<StepResult> runStep(Executor &executor, mlir::ModuleOp module,
                                   llvm::StringRef function,
                                   const Tensor &tokenIds,
                                   std::shared_ptr<KVCacheState> cache);

/// One step of greedy decoding: the chosen token and how sure it was.
struct GreedyStep {
  int64_t token = 0;
  /// Logit of the chosen token minus the runner-up's.
  float margin = 0;
  /// The logits the token was chosen from (the last position's row).
  std::vector<float> logits;
};

/// Greedy decoding of `newTokens` tokens after `prompt` (batch 1): through
/// prefill and decode steps with a KV cache when the program has them,
/// else by running the full-sequence function on the growing sequence.
llvm::Expected<std::vector<GreedyStep>>
greedyDecode(Executor &executor, mlir::ModuleOp module, const Program &program,
             llvm::ArrayRef<int64_t> prompt, int64_t newTokens);

/// The first step where `steps` differs from `expected`, with what a user
/// needs to judge it; none when they agree (over the shorter length).
struct GreedyMismatch {
  int64_t step = 0;
  int64_t actualToken = 0, expectedToken = 0;
  /// Logit of our token minus the logit of the expected one, at that step
  /// (>= 0: small means a near tie).
  float margin = 0;
};
std::optional<GreedyMismatch>
findGreedyMismatch(llvm::ArrayRef<GreedyStep> steps,
                   llvm::ArrayRef<int64_t> expected);

//===----------------------------------------------------------------------===//
// Perplexity
//===----------------------------------------------------------------------===//

struct PerplexityResult {
  /// Tokens predicted (each window predicts all but its first token).
  int64_t predictedTokens = 0;
  /// Mean negative log-likelihood, in nats per predicted token.
  double meanNll = 0;
  double perplexity() const;
};

/// Teacher-forced NLL of `ids` (at most `maxTokens` of them when > 0):
/// consecutive windows of `window` tokens, each run through the program's
/// full-sequence (or prefill) function; log-softmax in double.
llvm::Expected<PerplexityResult>
teacherForcedPerplexity(Executor &executor, mlir::ModuleOp module,
                        const Program &program, llvm::ArrayRef<int64_t> ids,
                        int64_t window, int64_t maxTokens = 0);

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_VERIFICATION_H
