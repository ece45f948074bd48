//===- IRDumper.h - The IR after every pass, one file each ------*- C++ -*-===//

#ifndef SITS_COMPILER_PIPELINE_IRDUMPER_H
#define SITS_COMPILER_PIPELINE_IRDUMPER_H

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/Support/Error.h"

#include <string>

namespace sits {

/// Writes the module after every module-level pass to
/// `DIR/NN-<pass-argument>.mlir`, numbered in the order the passes ran, and
/// the input as `DIR/00-<stage>.mlir`.
class IRDumper : public mlir::PassInstrumentation {
public:
  /// Creates `directory` if needed; fails when it cannot be created or is not
  /// a directory.
  static llvm::Expected<std::unique_ptr<IRDumper>>
  create(llvm::StringRef directory, mlir::OpPrintingFlags flags);

  /// Writes `module` as file number 0, named after `what`.
  llvm::Error dumpInitial(mlir::Operation *module, llvm::StringRef what);

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;

  /// The first write error, if any (instrumentation hooks cannot fail).
  llvm::Error takeError();

private:
  IRDumper(std::string directory, mlir::OpPrintingFlags flags)
      : directory(std::move(directory)), flags(flags) {}
  llvm::Error write(mlir::Operation *module, llvm::StringRef name);

  std::string directory;
  mlir::OpPrintingFlags flags;
  unsigned nextIndex = 1;
  std::string firstError;
};

} // namespace sits

#endif // SITS_COMPILER_PIPELINE_IRDUMPER_H
