//===- ShardLayout.cpp - How values are spread over the ranks -------------===//

#include "passes/ShardLayout.h"

#include "dialects/sits/SitsOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sits;

namespace {

struct Layout {
  enum Kind { Replicated, Split, Partial } kind = Replicated;
  /// Split: the dimension cut, into `parts` parts held by `replicas`
  /// consecutive ranks each (sits.shard's meaning).
  int64_t dim = -1, parts = 1, replicas = 1;

  static Layout split(int64_t dim, int64_t parts, int64_t replicas) {
    return {Split, dim, parts, replicas};
  }
  static Layout partial() { return {Partial}; }
  bool isReplicated() const { return kind == Replicated; }
  bool isSplit(int64_t d) const { return kind == Split && dim == d; }
  /// The same split along another dimension.
  Layout along(int64_t d) const { return split(d, parts, replicas); }
  bool operator==(const Layout &other) const {
    return kind == other.kind && dim == other.dim && parts == other.parts &&
           replicas == other.replicas;
  }
};

std::string describe(const Layout &layout) {
  switch (layout.kind) {
  case Layout::Replicated:
    return "replicated (the same on every rank)";
  case Layout::Split: {
    std::string text = "split along dimension " + std::to_string(layout.dim) +
                       " into " + std::to_string(layout.parts) + " parts";
    if (layout.replicas != 1)
      text += " of " + std::to_string(layout.replicas) + " ranks each";
    return text;
  }
  case Layout::Partial:
    return "a partial sum (each rank holds a term)";
  }
  return "";
}

int64_t lastDim(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank() - 1;
}

class LayoutChecker {
public:
  LayoutChecker(int64_t ranks, StringRef prefix)
      : ranks(ranks), prefix(prefix) {}

  LogicalResult run(func::FuncOp func) {
    WalkResult result = func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op == func.getOperation())
        return WalkResult::advance();
      FailureOr<Layout> layout = visit(op);
      if (failed(layout))
        return WalkResult::interrupt();
      for (Value value : op->getResults())
        layouts[value] = *layout;
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

private:
  Layout of(Value value) const { return layouts.lookup(value); }

  /// An error at `op` about operand `index` and why its layout is wrong.
  InFlightDiagnostic refuse(Operation *op, unsigned index,
                            const Twine &why = "") {
    InFlightDiagnostic diag = op->emitError();
    diag << prefix << ": '" << op->getName() << "' cannot read operand #"
         << index << ", which is " << describe(of(op->getOperand(index)));
    if (!why.isTriviallyEmpty())
      diag << ": " << why;
    return diag;
  }

  /// The first operand of `op` that is not replicated, or -1.
  static int findNotReplicated(Operation *op, const LayoutChecker &self) {
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (!self.of(operand).isReplicated())
        return static_cast<int>(index);
    return -1;
  }

  FailureOr<Layout> allReplicated(Operation *op) {
    int index = findNotReplicated(op, *this);
    if (index < 0)
      return Layout();
    refuse(op, index,
           "it is not known to compute on parts of a value; only replicated "
           "values reach it");
    return failure();
  }

  LogicalResult checkRanks(Operation *op, int64_t described) {
    if (described == ranks)
      return success();
    return op->emitError() << prefix << ": '" << op->getName() << "' is for "
                           << described << " ranks, but the program has "
                           << ranks;
  }

  FailureOr<Layout> visit(Operation *op) {
    return llvm::TypeSwitch<Operation *, FailureOr<Layout>>(op)
        .Case([&](ShardOp shard) -> FailureOr<Layout> {
          ShardAttr attr = shard.getShard();
          if (failed(checkRanks(op, attr.getParts() * attr.getReplicas())) ||
              failed(allReplicated(op)))
            return failure();
          return Layout::split(attr.getDim(), attr.getParts(),
                               attr.getReplicas());
        })
        .Case<LinearOp, LMHeadOp>(
            [&](auto projection) { return visitProjection(projection); })
        .Case([&](EmbeddingOp embedding) { return visitEmbedding(embedding); })
        .Case([&](AllReduceOp reduce) -> FailureOr<Layout> {
          if (failed(checkRanks(op, reduce.getRanks())))
            return failure();
          if (of(reduce.getInput()).kind != Layout::Partial) {
            refuse(op, 0, "only a partial sum is summed over the ranks");
            return failure();
          }
          if (Value bias = reduce.getBias(); bias && !of(bias).isReplicated()) {
            refuse(op, 1, "the bias is added once, as a whole");
            return failure();
          }
          return Layout();
        })
        .Case([&](AllGatherOp gather) -> FailureOr<Layout> {
          if (failed(checkRanks(op, gather.getRanks())))
            return failure();
          Layout input = of(gather.getInput());
          if (!input.isSplit(lastDim(gather.getInput())) ||
              input.parts != ranks) {
            refuse(op, 0,
                   "the ranks' parts of the last dimension, one per rank, "
                   "are gathered");
            return failure();
          }
          return Layout();
        })
        .Case([&](SplitHeadsOp split) {
          return moveSplit(op, split.getInput(), 2, 1);
        })
        .Case([&](MergeHeadsOp merge) {
          return moveSplit(op, merge.getInput(), 1, 2);
        })
        .Case<RMSNormOp, LayerNormOp>([&](auto norm) { return visitNorm(op); })
        .Case([&](RopeOp rope) -> FailureOr<Layout> {
          for (unsigned i : {1u, 2u})
            if (!of(op->getOperand(i)).isReplicated()) {
              refuse(op, i, "every head rotates by the same angles");
              return failure();
            }
          Layout input = of(rope.getInput());
          if (input.isReplicated() || input.isSplit(1))
            return input;
          refuse(op, 0, "heads are rotated apart, never parts of a head");
          return failure();
        })
        .Case([&](AttentionOp attention) { return visitAttention(attention); })
        .Case<AddOp, ActivationOp, GLUOp>(
            [&](Operation *) { return visitElementwise(op); })
        .Case([&](func::ReturnOp) -> FailureOr<Layout> {
          int index = findNotReplicated(op, *this);
          if (index < 0)
            return Layout();
          refuse(op, index,
                 "a function returns whole values, every rank the same");
          return failure();
        })
        .Default([&](Operation *) { return allReplicated(op); });
  }

  /// `input [..., K] x weight [N, K]`: whole weights give a whole result,
  /// a weight split by rows a result split by columns (column-parallel), a
  /// split input times a weight split by columns a partial sum
  /// (row-parallel).
  template <typename Op> FailureOr<Layout> visitProjection(Op op) {
    Layout input = of(op.getInput()), weight = of(op.getWeight());
    Layout bias = op.getBias() ? of(op.getBias()) : Layout();
    if (input.isReplicated() && weight.isReplicated()) {
      if (!bias.isReplicated()) {
        refuse(op, 2, "a whole weight needs a whole bias");
        return failure();
      }
      return Layout();
    }
    if (input.isReplicated() && weight.isSplit(0)) {
      if (op.getBias() && !(bias == weight)) {
        refuse(op, 2, "the bias must be split as the weight's rows are");
        return failure();
      }
      return weight.along(lastDim(op.getResult()));
    }
    if (input.isSplit(lastDim(op.getInput())) && weight.isSplit(1) &&
        input.parts == weight.parts && input.replicas == weight.replicas) {
      if (op.getBias()) {
        refuse(op, 2,
               "a row-parallel product's bias belongs to its "
               "sits.all_reduce, which adds it once");
        return failure();
      }
      return Layout::partial();
    }
    if (!input.isReplicated() &&
        !(input.isSplit(lastDim(op.getInput())) && weight.isSplit(1))) {
      refuse(op, 0,
             "a split input needs a weight split the same way along its "
             "columns (dimension 1)");
      return failure();
    }
    refuse(op, 1,
           "the input is " +
               std::string(input.isReplicated()
                               ? "replicated, so the weight must be whole or "
                                 "split along its rows (dimension 0)"
                               : "split, so the weight must be split the same "
                                 "way along its columns (dimension 1)"));
    return failure();
  }

  FailureOr<Layout> visitEmbedding(EmbeddingOp op) {
    if (!of(op.getIds()).isReplicated()) {
      refuse(op, 1, "every rank looks up every id");
      return failure();
    }
    Layout table = of(op.getTable());
    ShardAttr shard = op.getVocabShardAttr();
    if (!shard) {
      if (table.isReplicated())
        return Layout();
      refuse(op, 0,
             "an embedding of part of the vocabulary says which part "
             "(vocab_shard)");
      return failure();
    }
    if (!(table == Layout::split(0, shard.getParts(), shard.getReplicas()))) {
      refuse(op, 0, "vocab_shard says the table is split along its rows");
      return failure();
    }
    return Layout::partial();
  }

  /// Ops that read a split along `from` and give it along `to`.
  FailureOr<Layout> moveSplit(Operation *op, Value input, int64_t from,
                              int64_t to) {
    Layout layout = of(input);
    if (layout.isReplicated())
      return layout;
    if (layout.isSplit(from))
      return layout.along(to);
    refuse(op, 0, "heads are split and merged whole");
    return failure();
  }

  /// A norm over the last dimension: any other dimension may be split.
  FailureOr<Layout> visitNorm(Operation *op) {
    for (unsigned i = 1; i < op->getNumOperands(); ++i)
      if (!of(op->getOperand(i)).isReplicated()) {
        refuse(op, i, "every rank scales by the whole weight");
        return failure();
      }
    Layout input = of(op->getOperand(0));
    if (input.kind == Layout::Split && input.dim != lastDim(op->getOperand(0)))
      return input;
    if (input.isReplicated())
      return input;
    refuse(op, 0, "the norm reads the whole of its last dimension");
    return failure();
  }

  /// Whole heads: every rank attends with its query heads over the key and
  /// value heads they read.
  FailureOr<Layout> visitAttention(AttentionOp op) {
    for (unsigned i = 3; i < op->getNumOperands(); ++i)
      if (!of(op->getOperand(i)).isReplicated()) {
        refuse(op, i, "masks and lengths are the same for every head");
        return failure();
      }
    Layout query = of(op.getQuery()), key = of(op.getKey()),
           value = of(op.getValue());
    if (query.isReplicated() && key.isReplicated() && value.isReplicated())
      return query;
    if (!(query == Layout::split(1, ranks, 1))) {
      refuse(op, 0, "each rank holds its own query heads");
      return failure();
    }
    // Each rank's key and value heads are those its query heads read: the
    // ranks' own (split), or the one group a rank's query heads all fall in
    // (one head per part, shared by `replicas` ranks).
    int64_t localKVHeads = op.getNumKvHeads();
    bool groups = key.isSplit(1) && key.parts * key.replicas == ranks &&
                  (key.replicas == 1 || localKVHeads == 1);
    if (!groups) {
      refuse(op, 1,
             "the key and value heads must be split over the ranks as the "
             "query heads that read them are");
      return failure();
    }
    if (!(value == key)) {
      refuse(op, 2, "keys and values are split alike");
      return failure();
    }
    return query;
  }

  /// Operands of one layout give it to the result; partial sums are added
  /// only by sits.all_reduce (an elementwise op of one would apply to a
  /// term instead of the sum).
  FailureOr<Layout> visitElementwise(Operation *op) {
    Layout first = of(op->getOperand(0));
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      if (of(operand).kind == Layout::Partial) {
        refuse(op, index,
               "it applies to the sum, not to each rank's term; a "
               "sits.all_reduce must come first");
        return failure();
      }
      if (!(of(operand) == first)) {
        refuse(op, index,
               "elementwise operands must be spread over the ranks alike");
        return failure();
      }
    }
    return first;
  }

  int64_t ranks;
  StringRef prefix;
  llvm::DenseMap<Value, Layout> layouts;
};

} // namespace

LogicalResult sits::checkShardLayouts(func::FuncOp func, int64_t ranks,
                                      StringRef prefix) {
  return LayoutChecker(ranks, prefix).run(func);
}
