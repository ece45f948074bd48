//===- ExecutorErrorsTest.cpp - Errors come back as llvm::Error -----------===//
//
// Every runtime failure of a program (an op the executor does not know, a KV
// cache that is full, a token id outside the vocabulary, a position outside
// a RoPE table, shapes that do not fit at run time, bad arguments) is an
// llvm::Error naming the op and its source-model location, never a crash.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Executor.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace sits::reference;

namespace {

class ExecutorErrors : public ::testing::Test {
protected:
  ExecutorErrors() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Runs `function` of `source` and returns the error message ("" when it
  /// succeeds).
  std::string runAndFail(llvm::StringRef source, llvm::StringRef function,
                         std::vector<RuntimeValue> args = {}) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "cannot parse:\n" << source.str();
    if (!module)
      return "parse error";
    Executor executor(*module);
    llvm::Expected<std::vector<RuntimeValue>> results =
        executor.run(function, std::move(args));
    if (results)
      return "";
    return llvm::toString(results.takeError());
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

constexpr const char *kCache =
    "!sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 4, "
    "head_dim = 2, element_type = f32, layout = #sits.kv_layout<contiguous>>";

TEST_F(ExecutorErrors, UnknownOpNamesTheOpAndNode) {
  std::string message = runAndFail(R"mlir(
    func.func @main() -> tensor<2xf32> {
      %a = arith.constant dense<1.0> : tensor<2xf32>
      %b = arith.addf %a, %a : tensor<2xf32> loc("/model/layers.0/Add")
      return %b : tensor<2xf32>
    })mlir",
                                   "main");
  EXPECT_NE(message.find("'arith.addf' at /model/layers.0/Add"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("is not supported by the reference executor"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, UnregisteredOpsDoNotRun) {
  context.allowUnregisteredDialects();
  std::string message = runAndFail(R"mlir(
    func.func @main() -> tensor<2xf32> {
      %a = "mystery.op"() : () -> tensor<2xf32> loc("/model/Mystery")
      return %a : tensor<2xf32>
    })mlir",
                                   "main");
  EXPECT_NE(message.find("'mystery.op' at /model/Mystery: op 'mystery.op' is "
                         "not registered"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, HugeShapesFromDataAreRefused) {
  std::string message = runAndFail(R"mlir(
    func.func @main() -> tensor<?x?xf32> {
      %shape = arith.constant dense<[4000000, 4000000]> : tensor<2xi64>
      %r = onnx.ConstantOfShape %shape : (tensor<2xi64>) -> tensor<?x?xf32> loc("/model/ConstantOfShape")
      return %r : tensor<?x?xf32>
    })mlir",
                                   "main");
  EXPECT_NE(message.find("'onnx.ConstantOfShape' at /model/ConstantOfShape: a "
                         "result of shape [4000000, 4000000] is too large"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, TokenIdOutsideTheVocabulary) {
  std::string message = runAndFail(R"mlir(
    func.func @main() -> tensor<1x2x4xf32> {
      %t = sits.weight "embed" dense<0.5> : tensor<8x4xf32>
      %ids = arith.constant dense<[[3, 8]]> : tensor<1x2xi64>
      %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<1x2xi64> -> tensor<1x2x4xf32> loc("/model/embed_tokens/Gather")
      return %e : tensor<1x2x4xf32>
    })mlir",
                                   "main");
  EXPECT_NE(message.find("'sits.embedding' at /model/embed_tokens/Gather: "
                         "token id 8 (element 1 of ids) is outside the "
                         "vocabulary [0, 8)"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, PositionOutsideTheRopeTable) {
  std::string message = runAndFail(R"mlir(
    func.func @main() -> (tensor<1x2x2xf32>, tensor<1x2x2xf32>) {
      %table = sits.weight "rope" dense<0.5> : tensor<16x4xf32>
      %pos = arith.constant dense<[[15, 16]]> : tensor<1x2xi64>
      %c, %s = sits.rope_gather %table[%pos] : tensor<16x4xf32>, tensor<1x2xi64> -> tensor<1x2x2xf32>, tensor<1x2x2xf32> loc(fused["/rope/Gather", "/rope/Gather_1"])
      return %c, %s : tensor<1x2x2xf32>, tensor<1x2x2xf32>
    })mlir",
                                   "main");
  EXPECT_NE(message.find("'sits.rope_gather' at /rope/Gather, /rope/Gather_1: "
                         "position 16 is outside the RoPE table [0, 16)"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, KVCacheFullOnAppend) {
  std::string source = std::string("!kv = ") + kCache + R"mlir(
    func.func @main() -> !kv {
      %c = sits.kv_cache.init : !kv
      %k = arith.constant dense<1.0> : tensor<1x1x3x2xf32>
      %ids = arith.constant dense<1> : tensor<1x3xi64>
      %p0 = sits.kv_cache.length %c : !kv -> tensor<1xi64>
      %c1 = sits.kv_cache.append %c[0], %k, %k at %p0 : !kv, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1xi64>
      %c2 = sits.kv_cache.advance %c1 by %ids : !kv, tensor<1x3xi64>
      %p1 = sits.kv_cache.length %c2 : !kv -> tensor<?xi64>
      %c3 = sits.kv_cache.append %c2[0], %k, %k at %p1 : !kv, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>, tensor<?xi64> loc("/layers.0/append")
      return %c3 : !kv
    })mlir";
  std::string message = runAndFail(source, "main");
  EXPECT_NE(message.find("'sits.kv_cache.append' at /layers.0/append: KV "
                         "cache full: sequence 0 writes rows 3..5, capacity "
                         "is 4"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, KVCacheFullOnAdvance) {
  std::string source = std::string("!kv = ") + kCache + R"mlir(
    func.func @main(%cache: !kv) -> !kv {
      %ids = arith.constant dense<1> : tensor<2x5xi64>
      %c = sits.kv_cache.advance %cache by %ids : !kv, tensor<2x5xi64> loc("/advance")
      return %c : !kv
    })mlir";
  auto parsed = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(parsed);
  KVCacheConfig config;
  config.layers = 1;
  config.maxBatch = 2;
  config.kvHeads = 1;
  config.capacity = 4;
  config.headDim = 2;
  std::string message =
      runAndFail(source, "main", {std::make_shared<KVCacheState>(config)});
  EXPECT_NE(message.find("'sits.kv_cache.advance' at /advance: KV cache full: "
                         "sequence 0 would hold 5 tokens, capacity is 4"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, BatchBeyondMaxBatch) {
  std::string source = std::string("!kv = ") + kCache + R"mlir(
    func.func @main(%ids: tensor<?x?xi64>) -> tensor<?xi64> {
      %c = sits.kv_cache.init : !kv
      %p = sits.kv_cache.length %c : !kv -> tensor<?xi64>
      return %p : tensor<?xi64>
    })mlir";
  std::string message = runAndFail(
      source, "main", {Tensor::fromInts(ElementType::I64, {3, 1}, {1, 2, 3})});
  EXPECT_NE(message.find("batch 3 is outside [1, 2] (the cache's max_batch)"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, UnknownRuntimeBatch) {
  // Nothing tells the executor how many sequences the cache serves.
  std::string source = std::string("!kv = ") + kCache + R"mlir(
    func.func @main() -> tensor<?xi64> {
      %c = sits.kv_cache.init : !kv
      %p = sits.kv_cache.length %c : !kv -> tensor<?xi64> loc("/length")
      return %p : tensor<?xi64>
    })mlir";
  std::string message = runAndFail(source, "main");
  EXPECT_NE(message.find("'sits.kv_cache.length' at /length: the cache's "
                         "runtime batch is unknown"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, ShapesThatDoNotFitAtRunTime) {
  std::string message = runAndFail(
      R"mlir(
    func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
      %s = sits.add %a, %b : tensor<?xf32> loc("/residual/Add")
      return %s : tensor<?xf32>
    })mlir",
      "main", {Tensor(ElementType::F32, {2}), Tensor(ElementType::F32, {3})});
  EXPECT_NE(message.find("'sits.add' at /residual/Add: lhs shape [2] differs "
                         "from rhs shape [3]"),
            std::string::npos)
      << message;

  // A result that contradicts the op's declared static type.
  message = runAndFail(R"mlir(
    func.func @main(%x: tensor<?x4xf32>) -> tensor<3x4xf32> {
      %w = sits.weight "w" dense<1.0> : tensor<4xf32>
      %y = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<?x4xf32>, tensor<4xf32> -> tensor<3x4xf32> loc("/norm")
      return %y : tensor<3x4xf32>
    })mlir",
                       "main", {Tensor(ElementType::F32, {2, 4})});
  EXPECT_NE(message.find("'sits.rms_norm' at /norm: result 0 has shape [2, 4] "
                         "at run time, but the op declares "
                         "tensor<3x4xf32>"),
            std::string::npos)
      << message;
}

TEST_F(ExecutorErrors, BadArguments) {
  const char *source = R"mlir(
    func.func @main(%ids: tensor<2x?xi64>) -> tensor<2x?xi64> {
      return %ids : tensor<2x?xi64>
    })mlir";
  EXPECT_NE(runAndFail(source, "main").find("takes 1 arguments, got 0"),
            std::string::npos);
  std::string message =
      runAndFail(source, "main", {Tensor(ElementType::I64, {3, 4})});
  EXPECT_NE(message.find("argument 0 is a i64 tensor of shape [3, 4], but the "
                         "function expects tensor<2x?xi64>"),
            std::string::npos)
      << message;
  message = runAndFail(source, "main", {Tensor(ElementType::F32, {2, 4})});
  EXPECT_NE(message.find("is a f32 tensor"), std::string::npos) << message;
  EXPECT_NE(runAndFail(source, "missing").find("has no function 'missing'"),
            std::string::npos);
  EXPECT_EQ(runAndFail(source, "main", {Tensor(ElementType::I64, {2, 7})}), "");
}

TEST_F(ExecutorErrors, RopeTableBatchMismatch) {
  std::string message = runAndFail(R"mlir(
    func.func @main(%x: tensor<?x1x2x4xf32>, %c: tensor<?x2x2xf32>) -> tensor<?x1x2x4xf32> {
      %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x2x4xf32>, tensor<?x2x2xf32>, tensor<?x2x2xf32> -> tensor<?x1x2x4xf32> loc("/rope")
      return %y : tensor<?x1x2x4xf32>
    })mlir",
                                   "main",
                                   {Tensor(ElementType::F32, {3, 1, 2, 4}),
                                    Tensor(ElementType::F32, {2, 2, 2})});
  EXPECT_NE(message.find("'sits.rope' at /rope: cos/sin shape [2, 2, 2] must "
                         "be [1 or 3, 2, 2]"),
            std::string::npos)
      << message;
}

} // namespace
