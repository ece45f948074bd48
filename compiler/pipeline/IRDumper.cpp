//===- IRDumper.cpp - The IR after every pass, one file each --------------===//

#include "compiler/pipeline/IRDumper.h"
#include "compiler/pipeline/AtomicOutput.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace sits;

llvm::Expected<std::unique_ptr<IRDumper>>
IRDumper::create(llvm::StringRef directory, OpPrintingFlags flags) {
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(ec, "cannot create --dump-ir-dir '%s': %s",
                                   directory.str().c_str(),
                                   ec.message().c_str());
  if (!llvm::sys::fs::is_directory(directory))
    return llvm::createStringError(std::errc::not_a_directory,
                                   "--dump-ir-dir '%s' is not a directory",
                                   directory.str().c_str());
  return std::unique_ptr<IRDumper>(new IRDumper(directory.str(), flags));
}

llvm::Error IRDumper::write(Operation *module, llvm::StringRef name) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, name);
  return writeOutputAtomically(path, [&](llvm::raw_ostream &os) {
    module->print(os, flags);
    os << "\n";
    return llvm::Error::success();
  });
}

llvm::Error IRDumper::dumpInitial(Operation *module, llvm::StringRef what) {
  return write(module, llvm::formatv("00-{0}.mlir", what).str());
}

void IRDumper::runAfterPass(Pass *pass, Operation *op) {
  // sitsc anchors every pass on the module; nested passes (run per function
  // by sits-opt pipelines) are covered by --mlir-print-ir-after-all.
  if (!isa<ModuleOp>(op))
    return;
  llvm::StringRef name = pass->getArgument();
  if (name.empty())
    name = pass->getName();
  std::string file = llvm::formatv("{0:02}-{1}.mlir", nextIndex++, name).str();
  llvm::Error error = write(op, file);
  if (error && firstError.empty())
    firstError = llvm::toString(std::move(error));
  else
    llvm::consumeError(std::move(error));
}

llvm::Error IRDumper::takeError() {
  if (firstError.empty())
    return llvm::Error::success();
  return llvm::createStringError(std::errc::io_error, "%s", firstError.c_str());
}
