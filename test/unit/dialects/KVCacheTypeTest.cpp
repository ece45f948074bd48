//===- KVCacheTypeTest.cpp - KV-cache sizes the options imply -------------===//

#include "dialects/sits/SitsDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace sits;

namespace {

TEST(KVCacheType, BytesFollowTheShape) {
  MLIRContext context;
  context.loadDialect<SitsDialect>();
  Builder b(&context);
  auto layout = KVCacheLayoutAttr::get(&context, KVCacheLayout::contiguous);
  // Llama-3-8B shape: 32 layers, 8 kv heads of 128, fp16.
  auto type = KVCacheType::get(&context, 32u, 1u, 8u, 8192u, 128u, Type(b.getF16Type()),
                               layout);
  EXPECT_EQ(type.getBytesPerTokenPerLayer(), 2u * 8 * 128 * 2);
  EXPECT_EQ(type.getTotalBytes(), 2ull * 8 * 128 * 2 * 32 * 8192);
}

TEST(KVCacheType, RejectsZeroCapacity) {
  MLIRContext context;
  context.loadDialect<SitsDialect>();
  Builder b(&context);
  auto layout = KVCacheLayoutAttr::get(&context, KVCacheLayout::contiguous);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto type = KVCacheType::getChecked(
      [&] { return emitError(UnknownLoc::get(&context)); }, &context, 2u, 1u, 2u,
      0u, 32u, Type(b.getF32Type()), layout);
  EXPECT_FALSE(type);
  EXPECT_NE(message.find("capacity"), std::string::npos) << message;
}

} // namespace
