//===- AuditReport.cpp - Print the audit log from a pipeline --------------===//

#include "passes/Audit.h"
#include "passes/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

namespace sits {
#define GEN_PASS_DEF_AUDITREPORT
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {
struct AuditReportPass : public sits::impl::AuditReportBase<AuditReportPass> {
  using AuditReportBase::AuditReportBase;

  void runOnOperation() override {
    if (format != "text" && format != "json") {
      getOperation().emitError()
          << "sits-audit-report: format must be 'text' or 'json', got '"
          << format << "'";
      return signalPassFailure();
    }
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(output, &error);
    if (!file) {
      getOperation().emitError() << "sits-audit-report: " << error;
      return signalPassFailure();
    }
    const AuditLog &log = AuditLog::get(&getContext());

    if (format == "json")
      file->os() << llvm::formatv("{0:2}", log.toJSON()) << "\n";
    else
      log.printSummary(file->os());
    file->keep();
    // The next report covers only what runs after this one (sits-opt reuses
    // one context across --split-input-file chunks).
    AuditLog::get(&getContext()).clear();
    markAllAnalysesPreserved();
  }
};
} // namespace
