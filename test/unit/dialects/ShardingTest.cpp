//===- ShardingTest.cpp - The program of one rank -------------------------===//

#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"
#include "dialects/sits/WeightView.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace sits;

namespace {

constexpr const char *kProgram = R"mlir(
module attributes {sits.tensor_parallel = 2 : i64} {
  func.func @f() -> tensor<2x4xf32> {
    %w = sits.weight "w" dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0],
                                [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x4xf32> -> tensor<2x4xf32>
    return %p : tensor<2x4xf32>
  }
}
)mlir";

TEST(Sharding, SpecializesACopy) {
  MLIRContext context;
  context.loadDialect<SitsDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(kProgram, &context);
  ASSERT_TRUE(module);
  EXPECT_EQ(getTensorParallelRanks(*module), 2);
  FailureOr<OwningOpRef<ModuleOp>> rank1 = specializeForRank(*module, 1);
  ASSERT_TRUE(succeeded(rank1));
  // The original keeps its shard; the copy holds rows 2..3 of the weight.
  int shards = 0;
  module->walk([&](ShardOp) { ++shards; });
  EXPECT_EQ(shards, 1);
  SmallVector<WeightOp> weights;
  (*rank1)->walk([&](Operation *op) {
    EXPECT_FALSE(isa<ShardOp>(op));
    if (auto weight = dyn_cast<WeightOp>(op))
      weights.push_back(weight);
  });
  ASSERT_EQ(weights.size(), 1u);
  EXPECT_EQ(weights[0].getName(), "w");
  DenseElementsAttr values = materializeWeight(weights[0].getValue());
  ASSERT_TRUE(values);
  EXPECT_EQ(SmallVector<float>(values.getValues<float>()),
            (SmallVector<float>{8, 9, 10, 11, 12, 13, 14, 15}));
  // A rank the program does not have.
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  EXPECT_TRUE(failed(specializeForRank(*module, 2)));
}

} // namespace
