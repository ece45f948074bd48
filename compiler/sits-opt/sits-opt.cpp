//===- sits-opt.cpp - Run sits passes on MLIR files -----------------------===//
//
// The tool compiler engineers write lit/FileCheck tests against: it parses
// MLIR holding the sits, onnx and upstream dialects and runs any registered
// pass or pipeline on it (MlirOptMain: --split-input-file,
// --verify-diagnostics, --mlir-print-ir-after-all, ...).
//
//===----------------------------------------------------------------------===//

#include "compiler/registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  sits::registerAllDialects(registry);
  sits::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "sits optimizer: runs sits passes on MLIR\n", registry));
}
