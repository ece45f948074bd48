//===- OpInterfacesTest.cpp - Shape rules and kernels behind interfaces ---===//
//
// The symbolic shape rules (ShapeRuleOpInterface, attached by each dialect)
// and the reference kernels (ReferenceKernelOpInterface, attached by the
// executor) reach every op that has one, found by walking the registered
// ops; ops without one fall back or fail as documented.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Executor.h"
#include "compiler/reference/Kernels.h"
#include "compiler/registration/Registration.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class OpInterfacesTest : public ::testing::Test {
protected:
  OpInterfacesTest() {
    DialectRegistry registry;
    sits::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// The registered ops of the sits and onnx dialects.
  std::vector<RegisteredOperationName> sitsAndOnnxOps() {
    std::vector<RegisteredOperationName> ops;
    for (RegisteredOperationName name : context.getRegisteredOperations())
      if (name.getDialectNamespace() == "sits" ||
          name.getDialectNamespace() == "onnx")
        ops.push_back(name);
    return ops;
  }

  MLIRContext context;
};

// The sits ops without a shape rule: the weight (constant-like: the analysis
// reads its value), the KV-cache ops and the quantized ops (their types).
const llvm::StringSet<> kSitsOpsWithoutShapeRule = {
    "sits.weight",          "sits.kv_cache.init", "sits.kv_cache.length",
    "sits.kv_cache.append", "sits.kv_cache.read", "sits.kv_cache.advance",
    "sits.quantize",        "sits.dequantize",    "sits.tvc_lm_head"};

TEST_F(OpInterfacesTest, EveryOnnxOpAndTheShapedSitsOpsHaveAShapeRule) {
  std::vector<std::string> missing, unexpected;
  unsigned seenWithout = 0;
  for (RegisteredOperationName name : sitsAndOnnxOps()) {
    bool expected = !kSitsOpsWithoutShapeRule.contains(name.getStringRef());
    seenWithout += !expected;
    bool has = name.hasInterface<sits::onnx::ShapeRuleOpInterface>();
    if (expected && !has)
      missing.push_back(name.getStringRef().str());
    if (!expected && has)
      unexpected.push_back(name.getStringRef().str());
  }
  EXPECT_TRUE(missing.empty())
      << "no shape rule for: " << llvm::join(missing, ", ");
  EXPECT_TRUE(unexpected.empty())
      << "now with a shape rule (update this test): "
      << llvm::join(unexpected, ", ");
  // The list names registered ops only.
  EXPECT_EQ(seenWithout, kSitsOpsWithoutShapeRule.size());
}

TEST_F(OpInterfacesTest, AnOpWithoutARuleFallsBackToItsType) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
    func.func @main(%x: tensor<?x4xf32> {sits.dim_names = ["seq", ""]})
        -> (tensor<?x4xf32>, tensor<?x4xf32>) {
      %a = sits.add %x, %x : tensor<?x4xf32>
      %b = arith.addf %x, %x : tensor<?x4xf32>
      return %a, %b : tensor<?x4xf32>, tensor<?x4xf32>
    })mlir",
                                                             &context);
  ASSERT_TRUE(module);
  auto function = cast<func::FuncOp>(module->getBody()->front());
  Operation *withRule = &function.getBody().front().front();
  Operation *withoutRule = withRule->getNextNode();
  sits::onnx::SymbolicShapes shapes(&context);

  // sits.add's rule keeps the named symbol.
  EXPECT_EQ(shapes.print(*shapes.getDims(withRule->getResult(0))), "[seq, 4]");

  // arith.addf has no rule: inferResults says so, and its facts come from
  // its type, with a fresh unknown symbol for the dynamic dim.
  SmallVector<sits::onnx::TensorFacts> results;
  std::string message;
  EXPECT_TRUE(failed(shapes.inferResults(withoutRule, results, message)));
  EXPECT_EQ(message, "no shape rule for arith.addf");
  AffineExpr dim = shapes.getDim(withoutRule->getResult(0), 0);
  EXPECT_TRUE(shapes.isUnknownSymbol(dim));
  EXPECT_EQ(shapes.getDim(withoutRule->getResult(0), 1),
            getAffineConstantExpr(4, &context));
}

TEST_F(OpInterfacesTest, KernelsAreAttachedByTheExecutorOnly) {
  // The dialects alone carry no kernels: the executor attaches them.
  for (RegisteredOperationName name : sitsAndOnnxOps())
    ASSERT_FALSE(
        name.hasInterface<sits::reference::ReferenceKernelOpInterface>())
        << name.getStringRef().str();

  sits::reference::attachKernels(&context);
  std::vector<std::string> missing;
  for (RegisteredOperationName name : sitsAndOnnxOps())
    // sits.weight is run by the executor itself, as arith.constant is.
    if (!name.hasInterface<sits::reference::ReferenceKernelOpInterface>() &&
        name.getStringRef() != "sits.weight")
      missing.push_back(name.getStringRef().str());
  EXPECT_TRUE(missing.empty())
      << "no reference kernel for: " << llvm::join(missing, ", ");
}

TEST_F(OpInterfacesTest, KernelsRegisteredUpFrontReachDialectsLoadedLater) {
  MLIRContext fresh;
  DialectRegistry registry;
  sits::registerAllDialects(registry);
  sits::reference::registerReferenceKernels(registry);
  fresh.appendDialectRegistry(registry);
  fresh.loadAllAvailableDialects();
  std::optional<RegisteredOperationName> linear =
      RegisteredOperationName::lookup("sits.linear", &fresh);
  std::optional<RegisteredOperationName> matMul =
      RegisteredOperationName::lookup("onnx.MatMul", &fresh);
  ASSERT_TRUE(linear && matMul);
  EXPECT_TRUE(
      linear->hasInterface<sits::reference::ReferenceKernelOpInterface>());
  EXPECT_TRUE(
      matMul->hasInterface<sits::reference::ReferenceKernelOpInterface>());
}

} // namespace
