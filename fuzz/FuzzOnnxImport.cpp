//===- FuzzOnnxImport.cpp - Fuzzes import, shape inference and raising ----===//
//
// Input: see OnnxFuzzInput.h. Imports the model into the onnx dialect (the
// symbolic shape analysis types every result) and runs the raising pass and
// the canonicalizer, as `sitsc --emit=sits` does. Diagnostics are dropped:
// an error is an acceptable outcome, a crash or sanitizer report is not.
// The IR is verified after each pass (the pass manager's default).
//
//===----------------------------------------------------------------------===//

#include "OnnxFuzzInput.h"

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static sits::fuzz::OnnxFuzzFolder folder;
  folder.write(data, size);
  mlir::DialectRegistry registry;
  sits::registerOnnxImportDialects(registry);
  // A fresh context each time, so that memory does not grow over a campaign.
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      sits::importOnnxFile(folder.modelPath(), context);
  if (!module)
    return 0;
  mlir::PassManager pm(&context);
  pm.addPass(sits::createRaiseOnnx());
  pm.addPass(mlir::createCanonicalizerPass());
  (void)pm.run(*module);
  return 0;
}
