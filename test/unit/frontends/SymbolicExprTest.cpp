//===- SymbolicExprTest.cpp - Canonical symbolic dims ---------------------===//

#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace mlir;
using namespace sits::onnx;

namespace {

class SymbolicExprTest : public ::testing::Test {
protected:
  MLIRContext context;
  SymbolicShapes shapes{&context};
  AffineExpr batch = shapes.getNamedSymbol("batch");
  AffineExpr seq = shapes.getNamedSymbol("seq");
  AffineExpr c(int64_t value) { return getAffineConstantExpr(value, &context); }
};

TEST_F(SymbolicExprTest, ProductsCompareEqualWhateverTheOrder) {
  EXPECT_EQ(mulExprs(batch, seq), mulExprs(seq, batch));
  EXPECT_EQ(mulExprs(mulExprs(batch, c(4)), seq),
            mulExprs(c(4), mulExprs(seq, batch)));
  EXPECT_EQ(addExprs(seq, c(1)), addExprs(c(1), seq));
  EXPECT_EQ(subExprs(addExprs(seq, c(1)), seq), c(1));
}

TEST_F(SymbolicExprTest, ExactDivision) {
  AffineExpr total = mulExprs(mulExprs(batch, seq), c(128));
  EXPECT_EQ(divideExactly(total, c(32)), mulExprs(mulExprs(batch, seq), c(4)));
  EXPECT_EQ(divideExactly(total, mulExprs(batch, c(128))), seq);
  // (seq + 1) * 4 / (seq + 1) = 4: a multiple of a polynomial.
  AffineExpr longer = addExprs(seq, c(1));
  EXPECT_EQ(divideExactly(mulExprs(longer, c(4)), longer), c(4));
  EXPECT_EQ(divideExactly(seq, c(2)), std::nullopt);
  EXPECT_EQ(divideExactly(addExprs(seq, c(1)), seq), std::nullopt);
}

TEST_F(SymbolicExprTest, CeilDivisionOfConstantsAndSymbols) {
  EXPECT_EQ(ceilDivExpr(c(7), 2), c(4));
  EXPECT_EQ(ceilDivExpr(mulExprs(seq, c(4)), 2), mulExprs(seq, c(2)));
  AffineExpr half = ceilDivExpr(seq, 2);
  EXPECT_FALSE(getConstantValue(half).has_value());
  EXPECT_EQ(shapes.print(half), "seq ceildiv 2");
}

TEST_F(SymbolicExprTest, PrintsWithNames) {
  EXPECT_EQ(shapes.print(addExprs(seq, c(1))), "seq + 1");
  EXPECT_EQ(shapes.print(subExprs(seq, c(1))), "seq - 1");
  EXPECT_EQ(shapes.print(mulExprs(batch, c(4))), "batch * 4");
  AffineExpr unknown = shapes.createUnknownSymbol();
  EXPECT_TRUE(shapes.isUnknownSymbol(unknown));
  EXPECT_FALSE(shapes.isUnknownSymbol(seq));
  EXPECT_EQ(shapes.getNamedSymbol("seq"), seq);
}

TEST_F(SymbolicExprTest, OverflowGivesUnknownNotAWrappedValue) {
  AffineExpr huge = mulExprs(seq, c(int64_t(1) << 62));
  ASSERT_TRUE(huge);
  // 2^62 * 8 does not fit int64: the result is unknown (null), never a
  // wrapped-around coefficient (AffineExpr's own * would fold it to 0).
  EXPECT_FALSE(mulExprs(huge, c(8)));
  EXPECT_FALSE(addExprs(c(INT64_MAX), c(1)));
  EXPECT_FALSE(addExprs(AffineExpr(), seq));
  EXPECT_EQ(divideExactly(AffineExpr(), seq), std::nullopt);
}

} // namespace
