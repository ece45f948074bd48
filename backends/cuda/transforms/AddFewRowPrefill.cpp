//===- AddFewRowPrefill.cpp - A prefill of a few rows on the GEMVs --------===//
//
// A serving step that carries a short prompt chunk beside other sequences'
// decode tokens is a prefill of a few token rows. The prefill GEMM tiles
// its rows by 64 or 128 and its weights by 64 or 128 rows, so at a few rows
// it runs one block per weight tile and reads the weights far below the
// bandwidth the decode GEMVs reach. The prefill is copied as @prefill_few,
// whose linear layers the kernel selection gives the GEMVs (which multiply
// up to 32 rows per pass over the weights); the runtime runs it for steps
// of at most kernel.few_row_tokens rows.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Plan.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_ADDFEWROWPREFILL
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct AddFewRowPrefillPass
    : public sits::kernel::impl::AddFewRowPrefillBase<AddFewRowPrefillPass> {
  using AddFewRowPrefillBase::AddFewRowPrefillBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"programs"});
    ModuleOp module = getOperation();
    if (fewRowPrefillTokens < 0 ||
        fewRowPrefillTokens > codegen::kMaxFewRowPrefillTokens) {
      module.emitError() << "--few-row-prefill-tokens must be from 0 to "
                         << codegen::kMaxFewRowPrefillTokens << ", got "
                         << static_cast<int64_t>(fewRowPrefillTokens);
      return signalPassFailure();
    }
    if (module.lookupSymbol<func::FuncOp>(format::kFewRowPrefillProgram)) {
      audit.change(module.getLoc(),
                   std::string("@") + format::kFewRowPrefillProgram, "kept",
                   "given in the input");
      return;
    }
    auto prefill = module.lookupSymbol<func::FuncOp>(format::kPrefillProgram);
    if (fewRowPrefillTokens == 0 || !prefill || prefill.isExternal())
      return;
    KVCacheType cache = getKVCacheArgType(prefill);
    if (!cache)
      return;
    // Every row a prefill step may take: a larger limit would name rows
    // the prefill itself never runs.
    codegen::CodegenOptions options;
    options.maxPrefillTokens = maxPrefillTokens;
    const int64_t stepRows =
        cache.getMaxBatch() *
        codegen::getMaxPrefillTokens(options, cache.getCapacity());
    const int64_t rows = std::min<int64_t>(fewRowPrefillTokens, stepRows);

    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToEnd(module.getBody());
    auto few = cast<func::FuncOp>(builder.clone(*prefill));
    few.setSymName(format::kFewRowPrefillProgram);
    // The reference executor finds the steps by sits.step: this one is a
    // second prefill it has no use for.
    few->setAttr("sits.step",
                 builder.getStringAttr(format::kFewRowPrefillProgram));
    few->setAttr(KernelDialect::kFewRowTokensAttrName,
                 builder.getI64IntegerAttr(rows));
    audit.add("programs");
    audit.change(prefill.getLoc(), "@prefill",
                 std::string("@prefill and @") + format::kFewRowPrefillProgram +
                     " (" + KernelDialect::kFewRowTokensAttrName.str() + " = " +
                     std::to_string(rows) + ")",
                 "prefill steps of at most " + std::to_string(rows) +
                     " token rows run the decode GEMVs instead of the "
                     "GEMM's tiles of 64 or 128 rows "
                     "(--few-row-prefill-tokens=" +
                     std::to_string(fewRowPrefillTokens) + ")");
  }
};

} // namespace
