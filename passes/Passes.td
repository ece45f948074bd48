//===- Passes.td - The sits optimization passes ------------*- tablegen -*-===//

#ifndef SITS_PASSES_PASSES_TD
#define SITS_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def AuditReport : Pass<"sits-audit-report", "mlir::ModuleOp"> {
  let summary = "Print what the passes so far changed (the audit report)";
  let description = [{
    Prints the audit log of the context: for every pass that ran, its
    counters, the ops it removed and added, and each change with the source
    nodes it came from and the rule that made it safe. Changes nothing.
    `sitsc --audit=FILE` writes the same report after the whole pipeline.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Report format: text or json">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the report to ('-' for stdout)">
  ];
}

#endif // SITS_PASSES_PASSES_TD
