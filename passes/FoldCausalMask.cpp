//===- FoldCausalMask.cpp - Masks proven causal become the causal rule ----===//
//
// Exported attention takes a `[batch, 1, seq, seq]` mask computed from the
// input's shape. A decode engine cannot use it: with a KV cache the key
// length is the cache's, and a materialized mask is memory traffic for
// nothing. This pass proves (MaskProver) that the mask equals a causal rule
// and replaces it by that rule.
//
//===----------------------------------------------------------------------===//

#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"
#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "passes/MaskProver.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

namespace sits {
#define GEN_PASS_DEF_FOLDCAUSALMASK
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;
namespace ox = sits::onnx;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-fold-causal-mask";

/// A causal rule the attention op can express, as a formula over the index
/// (d0, d1, d2, d3) = (b, h, i, j).
struct Rule {
  CausalMode causal;
  std::optional<int64_t> window;
  Formula formula;
  std::string text;
};

/// Candidate rules for queries of length `seqQ` and keys of length `seqK`,
/// most common first.
std::vector<Rule> candidateRules(MaskProver &prover, AffineExpr seqQ,
                                 AffineExpr seqK,
                                 ArrayRef<int64_t> windowCandidates) {
  MLIRContext *context = seqQ.getContext();
  AffineExpr i = getAffineDimExpr(2, context);
  AffineExpr j = getAffineDimExpr(3, context);
  AffineExpr offset = ox::subExprs(seqK, seqQ);
  AffineExpr shifted = ox::addExprs(i, offset);
  std::vector<Rule> rules;
  rules.push_back({CausalMode::bottom_right, std::nullopt,
                   Formula::get(MaskProver::greaterOrEqual(shifted, j)),
                   "bottom-right causal: j <= i + (seq_k - seq_q)"});
  // Top-left differs from bottom-right only when the lengths may differ.
  if (ox::getConstantValue(offset) != 0)
    rules.push_back({CausalMode::top_left, std::nullopt,
                     Formula::get(MaskProver::greaterOrEqual(i, j)),
                     "top-left causal: j <= i"});
  std::set<int64_t> windows;
  for (int64_t c : windowCandidates)
    for (int64_t w : {c - 1, c, c + 1})
      if (w > 0)
        windows.insert(w);
  for (int64_t w : windows) {
    // j > i + offset - W, i.e. j - (i + offset) + W - 1 >= 0.
    AffineExpr lowest =
        ox::subExprs(shifted, getAffineConstantExpr(w - 1, context));
    rules.push_back(
        {CausalMode::bottom_right, w,
         prover.conjoin(Formula::get(MaskProver::greaterOrEqual(shifted, j)),
                        Formula::get(MaskProver::greaterOrEqual(j, lowest))),
         llvm::formatv("bottom-right causal with a sliding window of {0}: "
                       "i + (seq_k - seq_q) - {0} < j <= i + (seq_k - seq_q)",
                       w)});
  }
  return rules;
}

/// Erases the ops of `roots`' subgraphs that nothing uses any more, and
/// returns them (before erasure) for the audit: their count by name and
/// their locations.
struct Removed {
  std::map<std::string, int64_t> countByName;
  SmallVector<Location> locations;
  int64_t total = 0;
};

Removed eraseDeadSubgraphs(ArrayRef<Value> roots) {
  Removed removed;
  SmallVector<Operation *> worklist;
  for (Value root : roots)
    if (Operation *op = root.getDefiningOp())
      worklist.push_back(op);
  std::set<Operation *> erased;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (erased.count(op) || !op->use_empty() || !isMemoryEffectFree(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
    ++removed.countByName[op->getName().getStringRef().str()];
    removed.locations.push_back(op->getLoc());
    ++removed.total;
    erased.insert(op);
    op->dropAllReferences();
    op->erase();
  }
  return removed;
}

std::string describe(const Removed &removed) {
  std::string text = llvm::formatv("mask subgraph: {0} ops (", removed.total);
  bool first = true;
  for (const auto &[name, count] : removed.countByName) {
    text += (first ? "" : ", ") + name + " x" + std::to_string(count);
    first = false;
  }
  return text + ")";
}

struct FoldCausalMaskPass
    : public sits::impl::FoldCausalMaskBase<FoldCausalMaskPass> {
  void runOnOperation() override {
    PassAudit audit(&getContext(), kPassName,
                    {"masks_folded", "mask_ops_removed", "masks_kept"});
    for (auto func : getOperation().getOps<func::FuncOp>())
      foldInFunction(func, audit);
  }

  void foldInFunction(func::FuncOp func, PassAudit &audit) {
    ox::SymbolicShapes shapes(&getContext());
    MaskProver prover(shapes);
    SmallVector<Value> oldMasks;
    // Layers usually share one mask: prove each (mask, sizes) once.
    std::map<std::tuple<const void *, const void *, const void *>,
             std::pair<std::optional<Rule>, std::string>>
        proven;

    func.walk([&](AttentionOp attention) {
      Value mask = attention.getMask();
      if (!mask)
        return;
      auto keep = [&](const std::string &why) {
        audit.add("masks_kept");
        audit.change(attention.getLoc(), "sits.attention with a mask operand",
                     "unchanged", "mask kept: " + why);
      };
      if (attention.getPastLen()) {
        keep("the attention reads a KV cache already");
        return;
      }
      if (attention.getCausal() != CausalMode::none || attention.getWindow()) {
        keep("the attention has a causal rule besides its mask");
        return;
      }
      AffineExpr batch = shapes.getDim(attention.getQuery(), 0);
      AffineExpr seqQ = shapes.getDim(attention.getQuery(), 2);
      AffineExpr seqK = shapes.getDim(attention.getKey(), 2);
      if (!batch || !seqQ || !seqK) {
        keep("the attention's sizes are unknown");
        return;
      }
      auto key =
          std::make_tuple(mask.getAsOpaquePointer(), seqQ.getAsOpaquePointer(),
                          seqK.getAsOpaquePointer());
      auto it = proven.find(key);
      if (it == proven.end()) {
        std::optional<Rule> rule =
            prove(prover, mask, batch, attention.getNumHeads(), seqQ, seqK);
        std::string reason = prover.getReason().empty()
                                 ? "no causal rule matches"
                                 : prover.getReason();
        it = proven.insert({key, {std::move(rule), reason}}).first;
      }
      if (!it->second.first) {
        keep(it->second.second);
        return;
      }
      const Rule &rule = *it->second.first;
      attention.setCausal(rule.causal);
      if (rule.window)
        attention.setWindowAttr(IntegerAttr::get(
            IntegerType::get(&getContext(), 64), *rule.window));
      attention.getMaskMutable().clear();
      if (!llvm::is_contained(oldMasks, mask))
        oldMasks.push_back(mask);
      audit.add("masks_folded");
      audit.change(
          {attention.getLoc(), mask.getLoc()},
          "sits.attention with a [batch, heads, seq_q, seq_k] mask tensor",
          llvm::formatv(
              "sits.attention causal = {0}{1} (no mask tensor)",
              stringifyCausalMode(rule.causal),
              rule.window ? llvm::formatv(", window = {0}", *rule.window).str()
                          : std::string()),
          "proved with Presburger arithmetic that the mask equals the " +
              rule.text +
              " at every (b, h, i, j) for every batch and sequence size; " +
              "offset = past_len (here seq_k - seq_q), bound = seqlen_k");
    });

    if (oldMasks.empty())
      return;
    Removed removed = eraseDeadSubgraphs(oldMasks);
    audit.add("mask_ops_removed", removed.total);
    if (removed.total > 0)
      audit.change(removed.locations, describe(removed), "nothing",
                   "no attention reads the mask any more; the ops have no "
                   "side effects");
  }

  /// The rule `mask` provably equals, or nullopt (the prover's reason says
  /// why).
  std::optional<Rule> prove(MaskProver &prover, Value mask, AffineExpr batch,
                            int64_t heads, AffineExpr seqQ, AffineExpr seqK) {
    IndexSpace space{
        {batch, getAffineConstantExpr(heads, &getContext()), seqQ, seqK}};
    // The first evaluation also collects the mask's constants, from which
    // window candidates come.
    std::vector<Rule> rules = candidateRules(prover, seqQ, seqK, {});
    FailureOr<bool> first = prover.matches(mask, space, rules.front().formula);
    if (failed(first))
      return std::nullopt;
    if (*first)
      return rules.front();
    std::string firstReason = prover.getReason();
    rules = candidateRules(prover, seqQ, seqK, prover.getConstants());
    for (const Rule &rule : llvm::drop_begin(rules)) {
      FailureOr<bool> match = prover.matches(mask, space, rule.formula);
      if (failed(match))
        return std::nullopt;
      if (*match)
        return rule;
    }
    // Keep the most telling reason: how the mask differs from plain causal.
    (void)prover.matches(mask, space, rules.front().formula);
    return std::nullopt;
  }
};

} // namespace
