//===- AuditLogTest.cpp - The audit log keeps what passes recorded --------===//

#include "dialects/sits/AuditLog.h"
#include "dialects/sits/SitsDialect.h"
#include "passes/Audit.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace sits;

namespace {

TEST(AuditLog, DeclaredCountersStartAtZeroInDeclarationOrder) {
  MLIRContext context;
  PassAudit audit(&context, "sits-fold-causal-mask",
                  {"masks_folded", "mask_ops_removed"});
  std::vector<AuditPassRecord> records = AuditLog::get(&context).getRecords();
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(records[0].counters.size(), 2u);
  EXPECT_EQ(records[0].counters[0].first, "masks_folded");
  EXPECT_EQ(records[0].counters[1].first, "mask_ops_removed");
  EXPECT_EQ(records[0].counters[0].second, 0);
}

TEST(AuditLog, ChangesKeepSourceNamesFromFusedLocations) {
  MLIRContext context;
  PassAudit audit(&context, "p", {"n"});
  Location a = NameLoc::get(StringAttr::get(&context, "node_Where_203"));
  Location b = NameLoc::get(StringAttr::get(&context, "node_Add_205"));
  Location fused = FusedLoc::get(&context, {a, b, a});
  audit.add("n", 3);
  audit.change(fused, "mask subgraph", "causal attention", "rule");

  AuditLog &log = AuditLog::get(&context);
  EXPECT_EQ(log.getCounter("p", "n"), 3);
  std::vector<AuditPassRecord> records = log.getRecords();
  ASSERT_EQ(records[0].changes.size(), 1u);
  EXPECT_EQ(records[0].changes[0].sources,
            (std::vector<std::string>{"node_Where_203", "node_Add_205"}));
}

TEST(AuditLog, JSONListsEveryPass) {
  MLIRContext context;
  PassAudit first(&context, "first", {"a"});
  PassAudit second(&context, "second", {"b"});
  second.add("b", 2);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << AuditLog::get(&context).toJSON();
  EXPECT_NE(text.find("\"name\":\"first\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"b\":2"), std::string::npos) << text;
}

} // namespace
