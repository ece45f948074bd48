//===- Audit.h - What each pass changed, for reviewers ----------*- C++ -*-===//
//
// Helpers with which passes write to the AuditLog of their context, and an
// instrumentation that adds a line for every other pass (canonicalize, CSE)
// with the ops it removed or added. `--sits-audit-report` prints the log from
// a pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_AUDIT_H
#define SITS_PASSES_AUDIT_H

#include "dialects/sits/AuditLog.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <mutex>

namespace sits {

/// Names of the source-model nodes behind `loc` (NameLocs, also inside fused
/// and call-site locations), in order, without duplicates.
std::vector<std::string> getSourceNames(mlir::Location loc);

/// Convenience for a pass: declares its counters once and records changes.
class PassAudit {
public:
  PassAudit(mlir::MLIRContext *context, llvm::StringRef pass,
            llvm::ArrayRef<llvm::StringRef> counters);
  void add(llvm::StringRef counter, int64_t amount = 1);
  void change(mlir::Location from, std::string replaced, std::string with,
              std::string rule);
  void change(llvm::ArrayRef<mlir::Location> from, std::string replaced,
              std::string with, std::string rule);

private:
  AuditLog &log;
  std::string pass;
};

/// Records every pass that runs, with the ops it removed and added.
class AuditInstrumentation : public mlir::PassInstrumentation {
public:
  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override;
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;

private:
  std::mutex mutex;
  std::map<std::pair<mlir::Pass *, mlir::Operation *>,
           std::map<std::string, int64_t>>
      before;
};

} // namespace sits

#endif // SITS_PASSES_AUDIT_H
