//===- ExecutorTest.cpp - Upstream ops, calls, observers, constants -------===//

#include "compiler/reference/Executor.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

using namespace sits::reference;

namespace {

class ExecutorTest : public ::testing::Test {
protected:
  ExecutorTest() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  mlir::MLIRContext context;
};

TEST_F(ExecutorTest, RunsUpstreamOpsAndCalls) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func private @double(%x: tensor<?xf32>) -> tensor<?xf32> {
      %y = sits.add %x, %x : tensor<?xf32>
      return %y : tensor<?xf32>
    }
    func.func @main(%x: tensor<3xf32>) -> (tensor<?xf32>, index, tensor<3xf32>) {
      %c0 = arith.constant 0 : index
      %d = tensor.dim %x, %c0 : tensor<3xf32>
      %dyn = tensor.cast %x : tensor<3xf32> to tensor<?xf32>
      %twice = func.call @double(%dyn) : (tensor<?xf32>) -> tensor<?xf32>
      %static = tensor.cast %twice : tensor<?xf32> to tensor<3xf32>
      return %twice, %d, %static : tensor<?xf32>, index, tensor<3xf32>
    })mlir",
                                                        &context);
  ASSERT_TRUE(module);
  Executor executor(*module);
  std::vector<std::string> seen;
  executor.setObserver([&](mlir::Operation *op, llvm::ArrayRef<RuntimeValue>) {
    seen.push_back(op->getName().getStringRef().str());
  });
  auto results = executor.run(
      "main", {Tensor::fromFloats(ElementType::F32, {3}, {1.5f, -2, 0.25f})});
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[0].getTensor().floats()[1], -4.0f);
  EXPECT_EQ((*results)[1].getTensor().getRank(), 0);
  EXPECT_EQ((*results)[1].getTensor().ints()[0], 3);
  EXPECT_EQ((*results)[2].getTensor().floats()[2], 0.5f);
  // The callee's ops are observed too, in order.
  EXPECT_EQ(seen, (std::vector<std::string>{"arith.constant", "tensor.dim",
                                            "tensor.cast", "sits.add",
                                            "func.call", "tensor.cast"}));
}

TEST_F(ExecutorTest, ConstantsAreReadOnceAndRounded) {
  // f16 constants hold f16 values; two weights with one value share it.
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @main() -> (tensor<2xf16>, tensor<2xf16>, tensor<2xi1>) {
      %a = sits.weight "a" dense<[0.1, 65504.0]> : tensor<2xf16>
      %b = sits.weight "b" dense<[0.1, 65504.0]> : tensor<2xf16>
      %m = arith.constant dense<[true, false]> : tensor<2xi1>
      return %a, %b, %m : tensor<2xf16>, tensor<2xf16>, tensor<2xi1>
    })mlir",
                                                        &context);
  ASSERT_TRUE(module);
  Executor executor(*module);
  auto results = executor.run("main", {});
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  EXPECT_EQ((*results)[0].getTensor().floats()[0], roundToF16(0.1f));
  EXPECT_EQ((*results)[0].getTensor().floats()[1], 65504.0f);
  EXPECT_EQ((*results)[0].getTensorPtr(), (*results)[1].getTensorPtr());
  EXPECT_EQ((*results)[2].getTensor().ints()[0], 1);
  EXPECT_EQ((*results)[2].getTensor().ints()[1], 0);
}

TEST_F(ExecutorTest, EveryOpOfTheSitsAndOnnxDialectsHasAKernel) {
  std::vector<std::string> missing;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    llvm::StringRef dialect = name.getDialectNamespace();
    if ((dialect == "sits" || dialect == "onnx") && !Executor::supports(name))
      missing.push_back(name.getStringRef().str());
  }
  EXPECT_TRUE(missing.empty()) << "the reference executor has no kernel for: "
                               << llvm::join(missing, ", ");
  auto supports = [&](llvm::StringRef name) {
    return Executor::supports(mlir::OperationName(name, &context));
  };
  EXPECT_TRUE(supports("sits.attention"));
  EXPECT_TRUE(supports("onnx.Attention"));
  EXPECT_TRUE(supports("tensor.cast"));
  EXPECT_FALSE(supports("arith.addf"));
  EXPECT_FALSE(supports("test.unregistered"));
}

} // namespace
