//===- PlanMemory.cpp - A workspace slice for every value -----------------===//
//
// The last decision before CUDA emission: where each value a step writes
// lives. The launches, the values' sizes and their lifetimes are the code
// generator's own (codegen::placeWorkspace plans the step as code
// generation will), so that the plan in the IR is the one the engine runs.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Plan.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

#include "mlir/IR/Diagnostics.h"

namespace sits::kernel {
#define GEN_PASS_DEF_PLANMEMORY
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// Whether the input gives `func` a memory plan already (any part of one).
bool hasMemoryPlan(func::FuncOp func) {
  if (func->hasAttr(KernelDialect::kWorkspaceBytesAttrName))
    return true;
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(KernelDialect::kBuffersAttrName) ||
        op.hasAttr(KernelDialect::kScratchAttrName))
      return true;
  return false;
}

struct PlanMemoryPass
    : public sits::kernel::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"values", "scratch", "shared_bytes"});
    codegen::CodegenOptions options =
        planningOptions(dtype, target, maxPrefillTokens);

    for (StringRef name : {format::kPrefillProgram, format::kDecodeProgram,
                           format::kFewRowPrefillProgram}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal() || !func.getBody().hasOneBlock())
        continue;
      std::string what = "@" + name.str();
      if (hasMemoryPlan(func)) {
        audit.change(func.getLoc(), what, "its memory plan",
                     "given in the input");
        continue;
      }
      // A step the code generator cannot plan stays unplaced: code
      // generation reports its error at the op, with the whole program.
      std::string why;
      FailureOr<codegen::ProgramPlan> program;
      {
        ScopedDiagnosticHandler capture(&getContext(), [&](Diagnostic &diag) {
          if (why.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
            why = diag.str();
          return success();
        });
        program = codegen::placeWorkspace(func, options);
      }
      if (failed(program)) {
        audit.change(func.getLoc(), what, "no memory plan",
                     "code generation cannot plan it: " + why);
        continue;
      }
      uint64_t unshared = 0;
      int64_t scratch = 0;
      for (const codegen::WorkspaceValue &value : program->values) {
        unshared += value.bytes;
        scratch += value.result < 0;
      }
      audit.add("values", static_cast<int64_t>(program->values.size()));
      audit.add("scratch", scratch);
      audit.add("shared_bytes",
                static_cast<int64_t>(unshared - program->peakBytes));
      audit.change(func.getLoc(), what,
                   std::string(KernelDialect::kWorkspaceBytesAttrName) + " = " +
                       std::to_string(program->peakBytes),
                   std::to_string(program->values.size()) + " values (" +
                       std::to_string(scratch) + " scratch) in " +
                       std::to_string(program->peakBytes) + " bytes, " +
                       std::to_string(unshared) +
                       " if none shared: the largest first, each at the "
                       "lowest offset free for its whole lifetime");
    }
  }
};

} // namespace
