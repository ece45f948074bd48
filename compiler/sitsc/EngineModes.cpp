//===- EngineModes.cpp - sitsc modes that make or read engines ------------===//

#include "compiler/sitsc/Modes.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {
cl::opt<std::string> inspectPath(
    "inspect", cl::desc("Print a summary of an engine file and exit"),
    cl::value_desc("engine"), cl::cat(sits::sitsc::getCategory()));
} // namespace

std::optional<std::string> sits::sitsc::getInspectPath() {
  if (inspectPath.empty())
    return std::nullopt;
  return inspectPath.getValue();
}

int sits::sitsc::inspectEngine(llvm::StringRef path) {
  return fail("--inspect is not implemented yet");
}

std::optional<std::string> sits::sitsc::validateEngineOptions() {
  return std::nullopt;
}

int sits::sitsc::emitCuda(ModuleOp module, llvm::raw_ostream &os) {
  return fail("--emit=cuda is not implemented yet");
}

int sits::sitsc::writeEngine(ModuleOp module, llvm::StringRef inputPath,
                             llvm::StringRef outputPath,
                             const PipelineOptions &options) {
  return fail("writing engines is not implemented yet: use --emit=<stage>");
}
