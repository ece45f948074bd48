//===- FusionUtils.h - Forming kernel.launch ops ----------------*- C++ -*-===//
//
// What every fusion pass needs: the facts about sits ops that decide
// whether they may share a launch, and the one way a launch is formed.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_TRANSFORMS_FUSIONUTILS_H
#define SITS_BACKENDS_CUDA_TRANSFORMS_FUSIONUTILS_H

#include "backends/cuda/Target.h"
#include "dialects/kernel/KernelOps.h"
#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "sits/EngineFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <utility>

namespace sits::kernel {

/// The program whose steps are single tokens (the GEMVs), by the name the
/// pipeline gives it.
bool isDecodeProgram(mlir::func::FuncOp func);
/// The rows of the largest step of a few-row prefill (@prefill_few's
/// kernel.few_row_tokens), or 0 for any other function.
int64_t getFewRowTokens(mlir::func::FuncOp func);

/// The type of the step function's KV cache argument (null without one).
KVCacheType getKVCacheArgType(mlir::func::FuncOp func);

/// The sits.rms_norm ops of `func` that no launch holds yet, in order.
llvm::SmallVector<RMSNormOp> getUnfusedNorms(mlir::func::FuncOp func);
/// The sits.rms_norm ops of @decode that no launch holds yet, in order.
llvm::SmallVector<RMSNormOp> getUnfusedDecodeNorms(mlir::ModuleOp module);

/// Bits and group size of a weight read through sits.dequantize ({0, 0}:
/// not quantized). Linear layers share a launch only with equal keys.
std::pair<int64_t, int64_t> getQuantKey(mlir::Value weight);

/// A token-major [batch, seq, features] activation.
bool isTokenMajor(mlir::Value value);

/// The sits.linear outside any launch that produces `value` for this one
/// use, with a token-major input; or null.
LinearOp getSingleUseLinear(mlir::Value value);

/// Whether `ops` (of one block) can move into a launch placed just before
/// `anchor` (one of them): every operand they take from outside dominates
/// that point, and every outside use of their results comes after it.
/// Explains why not in `reason`.
bool canFormLaunchAt(llvm::ArrayRef<mlir::Operation *> ops,
                     mlir::Operation *anchor, std::string *reason);

/// Moves `ops` (in this order) into a new kernel.launch of `fusion` placed
/// before `anchor`; the results used outside leave through its yield.
LaunchOp formLaunch(FusionKind fusion, llvm::ArrayRef<mlir::Operation *> ops,
                    mlir::Operation *anchor);

/// The locations of `ops`, for the audit.
llvm::SmallVector<mlir::Location>
getLocations(llvm::ArrayRef<mlir::Operation *> ops);

/// Records a choice in the audit: one more under `counter`, and `what` ->
/// the chosen attribute as printed, with the reason.
void auditChoice(PassAudit &audit, mlir::Location loc, llvm::StringRef what,
                 mlir::Attribute chosen, llvm::StringRef counter,
                 const std::string &reason);

/// --dtype's spelling as a storage type (fp16 when unknown; sitsc checks
/// the option before the passes run).
format::DType parseWeightTypeOption(llvm::StringRef name);
/// --target's compute capability, major * 10 + minor (90 when unknown;
/// sitsc checks the option before the passes run).
unsigned parseTargetSmOption(llvm::StringRef name);

/// The codegen options a pass that plans launches takes from its own
/// --dtype, --target and --max-prefill-tokens (unknown spellings as the
/// two parsers above take them).
codegen::CodegenOptions planningOptions(llvm::StringRef dtype,
                                        llvm::StringRef target,
                                        int64_t maxPrefillTokens);

} // namespace sits::kernel

#endif // SITS_BACKENDS_CUDA_TRANSFORMS_FUSIONUTILS_H
