//===- ChooseWeightLayout.cpp - How quantized weights are stored ----------===//
//
// The tensor-core GEMV over int8/int4 levels loads each 64-byte chunk of a
// row in lane order; stored in that order (interleaved), the loads need no
// shuffles. Every sits.dequantize of a weight gets the layout its levels
// are stored in; the GEMVs and prefill's dequantization read it.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_CHOOSEWEIGHTLAYOUT
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct ChooseWeightLayoutPass
    : public sits::kernel::impl::ChooseWeightLayoutBase<
          ChooseWeightLayoutPass> {
  using ChooseWeightLayoutBase::ChooseWeightLayoutBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"interleaved", "input_order"});
    const format::DType type = parseWeightTypeOption(dtype);
    const bool tensorCores = parseTargetSmOption(target) >= 80;
    getOperation().walk([&](DequantizeOp dequantize) {
      // Weights only: a quantized KV cache's copies are the cache's own.
      auto result = dyn_cast<RankedTensorType>(dequantize.getType());
      if (!dequantize.getData().getDefiningOp<WeightOp>() || !result ||
          result.getRank() != 2 || result.isDynamicDim(1))
        return;
      auto given = dequantize->getAttrOfType<WeightLayoutAttr>(
          KernelDialect::kWeightLayoutAttrName);
      const int64_t bits = static_cast<int64_t>(dequantize.getBits());
      const int64_t group = static_cast<int64_t>(dequantize.getGroupSize());
      const int64_t k = result.getDimSize(1);
      std::string reason = "given in the input";
      if (!given) {
        const bool interleaved =
            codegen::interleaveQuantRows(tensorCores, type, bits, group, k);
        given = WeightLayoutAttr::get(&getContext(),
                                      interleaved ? WeightLayout::Interleaved
                                                  : WeightLayout::InputOrder);
        dequantize->setAttr(KernelDialect::kWeightLayoutAttrName, given);
        std::string why = codegen::checkInterleavedRows(bits, group, k);
        reason = interleaved    ? "rows and groups of whole chunks, read by "
                                  "the tensor-core GEMV"
                 : !tensorCores ? "no tensor-core GEMV before sm_80"
                 : type == format::DType::F32 ? "no tensor-core GEMV in an "
                                                "fp32 engine"
                                              : why;
      }
      auditChoice(audit, dequantize.getLoc(), "sits.dequantize", given,
                  stringifyWeightLayout(given.getValue()), reason);
    });
  }
};

} // namespace
