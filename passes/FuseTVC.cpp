//===- FuseTVC.cpp - The LM head as a token viability classifier ----------===//
//
// A decode step needs the LM head's argmax (or top-k), not all V logits.
// sits.tvc_lm_head previews every row through a rank-R factorization,
// scores a few candidates exactly, and proves with per-row residual bounds
// that no other row can win; where the proof fails it computes the full
// head. This pass factors the head at compile time and swaps the op.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/QuantMath.h"
#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "passes/LowRank.h"
#include "passes/Passes.h"
#include "passes/WeightData.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <map>
#include <variant>

namespace sits {
#define GEN_PASS_DEF_FUSETVC
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-fuse-tvc";

/// The head's weight values (f32) and the name its factors are named after.
struct HeadWeight {
  const void *key = nullptr;
  std::string name;
  std::vector<float> values;
};

/// Reads the weight of `head`: a sits.weight, or a sits.dequantize of two
/// (the values the head multiplies: dequantized exactly as the op states).
/// Returns a reason instead when it is neither.
std::variant<HeadWeight, std::string> readHeadWeight(Value weight) {
  if (auto constant = weight.getDefiningOp<WeightOp>()) {
    FailureOr<std::vector<float>> values = readFloatValues(constant.getValue());
    if (failed(values))
      return std::string("its weight's values cannot be read");
    return HeadWeight{constant.getValue().getAsOpaquePointer(),
                      constant.getName().str(), std::move(*values)};
  }
  auto dequantize = weight.getDefiningOp<DequantizeOp>();
  auto data =
      dequantize ? dequantize.getData().getDefiningOp<WeightOp>() : WeightOp();
  auto scales = dequantize ? dequantize.getScales().getDefiningOp<WeightOp>()
                           : WeightOp();
  if (!data || !scales)
    return std::string("its weight is not a constant (sits.weight or a "
                       "sits.dequantize of constants)");
  auto type = cast<RankedTensorType>(dequantize.getType());
  auto raw = dyn_cast<DenseIntOrFPElementsAttr>(data.getValue());
  FailureOr<std::vector<float>> scaleValues =
      readFloatValues(scales.getValue());
  if (!raw || !type.hasStaticShape() || failed(scaleValues))
    return std::string("its quantized weight cannot be read");
  quant::GroupLayout layout;
  layout.shape.assign(type.getShape().begin(), type.getShape().end());
  layout.axis = dequantize.getAxis();
  layout.groupSize = dequantize.getGroupSize();
  layout.bits = dequantize.getBits();
  layout.rowBytes = data.getType().getShape().back();
  if (layout.check() ||
      raw.getRawData().size() != static_cast<size_t>(layout.numDataBytes()) ||
      scaleValues->size() != static_cast<size_t>(layout.numScales()))
    return std::string("its quantized weight does not match its layout");
  HeadWeight result;
  result.key = data.getValue().getAsOpaquePointer();
  StringRef name = data.getName();
  name.consume_back(".q4");
  name.consume_back(".q8");
  result.name = name.str();
  result.values.resize(layout.numElements());
  quant::dequantize(reinterpret_cast<const int8_t *>(raw.getRawData().data()),
                    scaleValues->data(), layout, result.values.data());
  return result;
}

struct Factored {
  std::string name;
  DenseElementsAttr left, right, bounds;
};

struct FuseTVCPass : public sits::impl::FuseTVCBase<FuseTVCPass> {
  using FuseTVCBase::FuseTVCBase;

  std::map<const void *, Factored> factored;

  void runOnOperation() override {
    PassAudit audit(&getContext(), kPassName,
                    {"lm_heads_fused", "lm_heads_kept"});
    SmallVector<LMHeadOp> heads;
    getOperation().walk([&](LMHeadOp head) { heads.push_back(head); });
    for (LMHeadOp head : heads)
      if (failed(fuse(head, audit)))
        return signalPassFailure();
  }

  void keep(LMHeadOp head, const Twine &reason, PassAudit &audit) {
    audit.add("lm_heads_kept");
    audit.change(head.getLoc(), "sits.lm_head", "kept",
                 ("not a TVC head: " + reason).str());
  }

  LogicalResult fuse(LMHeadOp head, PassAudit &audit) {
    auto weightType = cast<RankedTensorType>(head.getWeight().getType());
    // A rank's vocabulary rows cannot prove a token over the whole
    // vocabulary.
    if (head.getWeight().getDefiningOp<ShardOp>())
      return head.emitError() << kPassName
                              << ": the LM head of a tensor-parallel program "
                                 "has no TVC head yet (its weight is a "
                                 "sits.shard of the vocabulary)";
    if (head.getBias()) {
      keep(head, "it has a bias", audit);
      return success();
    }
    if (!head.getInput().getType().getElementType().isF32() ||
        !head.getType().getElementType().isF32() ||
        !weightType.getElementType().isF32()) {
      keep(head,
           "its activations or weight are not f32 (the proof bounds f32 "
           "dot products)",
           audit);
      return success();
    }
    if (!weightType.hasStaticShape()) {
      keep(head, "its weight has a dynamic shape", audit);
      return success();
    }
    int64_t vocab = weightType.getDimSize(0), hidden = weightType.getDimSize(1);
    int64_t r = tvcRank ? static_cast<int64_t>(tvcRank) : hidden / 2;
    if (r < 1 || r >= hidden)
      return head.emitError()
             << kPassName
             << ": tvc-rank must be between 1 and the hidden size - 1 ("
             << hidden - 1 << "), got " << r;
    if (tvcCandidates < 1 || tvcCandidates > vocab)
      return head.emitError() << kPassName
                              << ": tvc-candidates must be between 1 and the "
                                 "vocabulary size ("
                              << vocab << "), got " << tvcCandidates.getValue();
    if (tvcTopK < 1 || tvcTopK > tvcCandidates)
      return head.emitError()
             << kPassName
             << ": tvc-top-k must be between 1 and tvc-candidates ("
             << tvcCandidates.getValue() << "), got " << tvcTopK.getValue();

    auto read = readHeadWeight(head.getWeight());
    if (auto *reason = std::get_if<std::string>(&read)) {
      keep(head, *reason, audit);
      return success();
    }
    HeadWeight &weight = std::get<HeadWeight>(read);
    auto it = factored.find(weight.key);
    if (it == factored.end()) {
      auto start = std::chrono::steady_clock::now();
      MLIRContext *context = &getContext();
      // On the context's threads (minutes on one core for a 128K
      // vocabulary).
      auto parallel = [&](size_t count, llvm::function_ref<void(size_t)> body) {
        parallelFor(context, size_t(0), count, body);
      };
      LowRankFactors factors =
          factorLowRank(weight.values, vocab, hidden, r, /*oversampling=*/10,
                        /*powerIterations=*/2, /*seed=*/0x7f4a7c15, parallel);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      Factored f;
      f.name = weight.name;
      f.left = makeFloatAttr(context, {vocab, r}, factors.left, false);
      f.right = makeFloatAttr(context, {r, hidden}, factors.right, false);
      f.bounds = makeFloatAttr(context, {vocab, 4}, factors.bounds, false);
      it = factored.emplace(weight.key, std::move(f)).first;
      audit.change(
          head.getLoc(),
          llvm::formatv("sits.lm_head '{0}' [{1} x {2}]: {1} logits per "
                        "position",
                        weight.name, vocab, hidden),
          llvm::formatv("sits.tvc_lm_head: rank-{0} preview ('{1}.tvc_left' "
                        "[{2} x {0}], '{1}.tvc_right' [{0} x {3}], per-row "
                        "bounds '{1}.tvc_bounds'), {4} candidates scored "
                        "exactly, full head where the proof fails",
                        r, weight.name, vocab, hidden,
                        tvcCandidates.getValue()),
          llvm::formatv(
              "every logit is at most its preview plus |r_v| |h - T^T z| + "
              "|T r_v| |z| + f32 rounding terms (Cauchy-Schwarz on the "
              "stored factors); a row is proved when no non-candidate's bound "
              "reaches the {0}-th best candidate logit, so greedy and top-{0} "
              "are exact; SVD {1:f2} s (randomized range finder, 2 power "
              "iterations), preview keeps {2:f1}% of |W|_F^2, largest "
              "singular value {3:f3}",
              tvcTopK.getValue(), seconds, 100 * factors.capturedEnergy,
              factors.singularValues.empty() ? 0.0
                                             : factors.singularValues[0]));
    }
    const Factored &f = it->second;
    OpBuilder builder(head);
    Location loc = head.getLoc();
    auto left = WeightOp::create(
        builder, loc, builder.getStringAttr(f.name + ".tvc_left"), f.left);
    auto right = WeightOp::create(
        builder, loc, builder.getStringAttr(f.name + ".tvc_right"), f.right);
    auto bounds = WeightOp::create(
        builder, loc, builder.getStringAttr(f.name + ".tvc_bounds"), f.bounds);
    auto tvc = TVCLMHeadOp::create(
        builder, loc, head.getType(), head.getInput(), head.getWeight(), left,
        right, bounds, builder.getI64IntegerAttr(tvcCandidates),
        builder.getI64IntegerAttr(tvcTopK));
    head.replaceAllUsesWith(tvc.getResult());
    head.erase();
    audit.add("lm_heads_fused");
    return success();
  }
};

} // namespace
