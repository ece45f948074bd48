//===- ChooseOperandLayout.cpp - Linear inputs written as mma operands ----===//
//
// The tensor-core GEMVs and the prefill GEMM round their input x to the
// engine's 16-bit type in the order of their mma operands (the input order
// over 16-bit weights and in the GEMM, interleaved runs over int8/int4
// levels). When every reader of a value is such a kernel, its producer can
// write exactly that instead of f32: the readers then load half the bytes
// of x and convert nothing, with the same rounding. For a step of more than
// 8 tokens, x is most of the bytes a 16-bit GEMV loads (each item of 16
// rows reads every token's x again); in the GEMM, f32 rows are half its
// shared-memory traffic.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

#include "mlir/IR/Builders.h"

namespace sits::kernel {
#define GEN_PASS_DEF_CHOOSEOPERANDLAYOUT
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct ChooseOperandLayoutPass
    : public sits::kernel::impl::ChooseOperandLayoutBase<
          ChooseOperandLayoutPass> {
  using ChooseOperandLayoutBase::ChooseOperandLayoutBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"norms", "gated"});
    if (!halfOperands)
      return;
    type = parseWeightTypeOption(dtype);
    targetSm = parseTargetSmOption(target);
    // The linear layers of decode and of the few-row prefill (the steps of
    // a few prompt rows beside decoding streams) are GEMVs, those of the
    // other programs (prefill) GEMMs; LM heads are GEMVs everywhere.
    getOperation().walk([&](func::FuncOp func) {
      const bool gemvs = isDecodeProgram(func) || getFewRowTokens(func);
      for (RMSNormOp norm : getUnfusedNorms(func))
        chooseForNorm(norm, gemvs, audit);
      func.walk([&](LaunchOp launch) {
        if (launch.getFusion() == FusionKind::GatedLinear)
          chooseForGated(launch, gemvs, audit);
      });
    });
  }

  /// The weight bits of every reader of `value` (16, or the levels' 8 or
  /// 4) when each is a tensor-core GEMV (`gemvs`, and every LM head) or
  /// GEMM that reads its input as 16-bit operands, all of the same bits;
  /// else 0. The GEMM reads weights dequantized to 16 bits, so its inputs
  /// are always in input order.
  int getOperandBits(Value value, bool gemvs) {
    auto valueType = dyn_cast<RankedTensorType>(value.getType());
    if (targetSm < 80 || type == format::DType::F32 || !valueType ||
        valueType.getRank() != 3 || valueType.isDynamicDim(2))
      return 0;
    const int64_t k = valueType.getDimSize(2);
    constexpr int kInputOrder = KernelDialect::kInputOrderOperandBits;
    int bits = 0;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      Value weight;
      bool gemm = false;
      if (auto linear = dyn_cast<LinearOp>(user);
          linear && &use == &linear.getInputMutable()) {
        weight = linear.getWeight();
        gemm = !gemvs;
      } else if (auto head = dyn_cast<LMHeadOp>(user);
                 head && &use == &head.getInputMutable()) {
        weight = head.getWeight();
      } else {
        return 0;
      }
      auto [userBits, group] = getQuantKey(weight);
      // 16-bit weights: the tensor-core GEMV reads x in input order, and so
      // does gemm_tc, over dequantized levels too (under the same
      // conditions, LinearKernels.cpp).
      if (gemm || userBits == 0) {
        if (!codegen::decodeGemvOnTensorCores(true, type, k) ||
            (bits && bits != kInputOrder))
          return 0;
        bits = kInputOrder;
        continue;
      }
      auto layout =
          weight.getDefiningOp()
              ? weight.getDefiningOp()->getAttrOfType<WeightLayoutAttr>(
                    KernelDialect::kWeightLayoutAttrName)
              : WeightLayoutAttr();
      if (!codegen::quantGemvReadsHalfOperands(userBits, group, k) || !layout ||
          layout.getValue() != WeightLayout::Interleaved ||
          (bits && userBits != bits))
        return 0;
      bits = static_cast<int>(userBits);
    }
    return bits;
  }

  void chooseForNorm(RMSNormOp norm, bool gemvs, PassAudit &audit) {
    auto weight = dyn_cast<ShapedType>(norm.getWeight().getType());
    auto input = dyn_cast<RankedTensorType>(norm.getInput().getType());
    if (!weight || weight.getRank() != 1 || !input || input.getRank() != 3 ||
        input.getDimSize(2) != weight.getDimSize(0))
      return;
    int bits = getOperandBits(norm.getResult(), gemvs);
    if (!bits)
      return;
    LaunchOp launch = formLaunch(FusionKind::Norm, {norm}, norm);
    launch.setOutputOperandBits(static_cast<uint64_t>(bits));
    audit.add("norms");
    audit.change(norm.getLoc(), "sits.rms_norm",
                 "kernel.launch <norm> {output_operand_bits = " +
                     std::to_string(bits) + "}",
                 describeReaders(gemvs, bits));
  }

  static std::string describeReaders(bool gemvs, int bits) {
    return gemvs ? "every reader is a tensor-core GEMV over " +
                       std::to_string(bits) + "-bit weights"
                 : "every reader is a tensor-core GEMM (or LM head GEMV) "
                   "over 16-bit weights";
  }

  void chooseForGated(LaunchOp launch, bool gemvs, PassAudit &audit) {
    SmallVector<LinearOp> linears = launch.getOpsOfType<LinearOp>();
    SmallVector<GLUOp> glus = launch.getOpsOfType<GLUOp>();
    if (linears.empty() || glus.size() != 1)
      return;
    LinearOp gate = linears.front();
    auto input = dyn_cast<RankedTensorType>(gate.getInput().getType());
    auto [bits, group] = getQuantKey(gate.getWeight());
    // On tensor cores itself: a GEMM (dequantized weights) or GEMV.
    if (!input || input.getRank() != 3 || input.isDynamicDim(2) ||
        !codegen::decodeGemvOnTensorCores(targetSm >= 80, type,
                                          input.getDimSize(2)) ||
        (bits && gemvs &&
         !codegen::quantGemvOnTensorCores(bits, group, input.getDimSize(2),
                                          /*gated=*/true)))
      return;
    Value result = launch.getResultFor(glus.front().getResult());
    int outBits = result ? getOperandBits(result, gemvs) : 0;
    // The GEMM writes its output in input order only.
    if (!outBits ||
        (!gemvs && outBits != KernelDialect::kInputOrderOperandBits))
      return;
    launch.setOutputOperandBits(static_cast<uint64_t>(outBits));
    audit.add("gated");
    audit.change(launch.getLoc(), "kernel.launch <gated_linear>",
                 "kernel.launch <gated_linear> {output_operand_bits = " +
                     std::to_string(outBits) + "}",
                 "act(gate) * up: " + describeReaders(gemvs, outBits));
  }

  format::DType type = format::DType::F16;
  unsigned targetSm = 90;
};

} // namespace
