//===- AuditLog.h - What each pass changed, for reviewers -------*- C++ -*-===//
//
// Every sits pass records what it did: counters (Debian's LLVM has no
// assertions, so LLVM's Statistic<> stays 0 and we keep our own) and each
// change, with the source-model node names it came from, what it replaced,
// what with, and the rule that made it safe.
//
// The log lives in the sits dialect of an MLIRContext, so that passes run by
// sitsc and by sits-opt record into the same place. passes/Audit.h has the
// helpers passes use to write to it.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_AUDITLOG_H
#define SITS_DIALECT_SITS_AUDITLOG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace sits {

/// One rewrite a pass made.
struct AuditChange {
  /// Names of the source-model nodes the rewritten ops came from.
  std::vector<std::string> sources;
  /// What was there before ("mask subgraph: 38 ops (Range, CumSum, ...)").
  std::string replaced;
  /// What is there now ("sits.attention causal = bottom_right").
  std::string with;
  /// Why the rewrite keeps the program's meaning.
  std::string rule;
};

/// What one pass did, over all the ops it ran on.
struct AuditPassRecord {
  std::string name;
  /// In the order the pass declares them, so that reports read the same
  /// every time.
  std::vector<std::pair<std::string, int64_t>> counters;
  int64_t &counter(llvm::StringRef name);
  std::vector<AuditChange> changes;
  /// Op count changes by op name, from the instrumentation.
  std::map<std::string, int64_t> opDelta;
  unsigned runs = 0;
};

class AuditLog {
public:
  /// The log of `context` (kept by its sits dialect, which this loads).
  static AuditLog &get(mlir::MLIRContext *context);

  /// Declares `counter` of `pass` (at 0), so that reports show it even when
  /// the pass changed nothing.
  void declareCounter(llvm::StringRef pass, llvm::StringRef counter);
  void addToCounter(llvm::StringRef pass, llvm::StringRef counter,
                    int64_t amount);
  void addChange(llvm::StringRef pass, AuditChange change);
  void noteRun(llvm::StringRef pass,
               const std::map<std::string, int64_t> &opDelta);

  /// Counter value, 0 when never declared.
  int64_t getCounter(llvm::StringRef pass, llvm::StringRef counter) const;
  std::vector<AuditPassRecord> getRecords() const;
  void clear();

  llvm::json::Value toJSON() const;
  void printSummary(llvm::raw_ostream &os) const;

private:
  AuditPassRecord &record(llvm::StringRef pass);

  mutable std::mutex mutex;
  std::vector<AuditPassRecord> records;
};

} // namespace sits

#endif // SITS_DIALECT_SITS_AUDITLOG_H
