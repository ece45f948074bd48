//===- sits-tblgen.cpp - TableGen backends of sits ------------------------===//
//
// -gen-pipeline-options lists the records of class PipelineOption
// (passes/PipelineOptions.td) as X-macro entries, in declaration order:
//
//   SITS_PIPELINE_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)
//
// -gen-codegen-options lists those of class CodegenOption
// (backends/cuda/CodegenOptions.td) the same way, as SITS_CODEGEN_OPTION.
//
// FIELD is the C++ member name, TYPE its type, NAME the flag ("max-seq-len"),
// DEFAULT a C++ expression, VALUE_DESC and HELP string literals. The passes
// read the same records through mlir-tblgen, so PipelineOptions, sitsc's
// flags and the pass options share one declaration (mlir-tblgen has no
// backend that hands option records to hand-written C++).
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Main.h"
#include "llvm/TableGen/Record.h"
#include "llvm/TableGen/TableGenBackend.h"

#include <vector>

using namespace llvm;

namespace {

enum class Action { GenPipelineOptions, GenCodegenOptions };

cl::opt<Action> action(
    cl::desc("Action to perform:"),
    cl::values(clEnumValN(Action::GenPipelineOptions, "gen-pipeline-options",
                          "List the PipelineOption records as X-macro "
                          "entries"),
               clEnumValN(Action::GenCodegenOptions, "gen-codegen-options",
                          "List the CodegenOption records as X-macro "
                          "entries")),
    cl::Required);

void emitStringLiteral(StringRef text, raw_ostream &os) {
  os << '"';
  os.write_escaped(text);
  os << '"';
}

/// Lists the records of class `className` as `macro(...)` entries.
bool emitOptions(raw_ostream &os, const RecordKeeper &records, StringRef title,
                 StringRef className, StringRef macro) {
  emitSourceFileHeader(title, os, records);
  // Declaration order, not the name order records are kept in: the order
  // of the options' members and of `--help`.
  std::vector<const Record *> options(
      records.getAllDerivedDefinitions(className));
  llvm::sort(options, [](const Record *a, const Record *b) {
    return a->getID() < b->getID();
  });
  os << "#ifndef " << macro << "\n"
     << "#error \"define " << macro
     << "(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP) first\"\n"
     << "#endif\n\n";
  for (const Record *option : options) {
    StringRef defaultValue = option->getValueAsString("defaultValue");
    if (defaultValue.empty())
      PrintFatalError(option, "an option needs a default");
    os << macro << "(" << option->getValueAsString("cppName") << ", "
       << option->getValueAsString("type") << ", ";
    emitStringLiteral(option->getValueAsString("argument"), os);
    os << ", " << defaultValue << ", ";
    emitStringLiteral(option->getValueAsString("valueDescription"), os);
    os << ",\n    ";
    emitStringLiteral(option->getValueAsString("description"), os);
    os << ")\n";
  }
  os << "\n#undef " << macro << "\n";
  return false;
}

bool emit(raw_ostream &os, const RecordKeeper &records) {
  switch (action) {
  case Action::GenPipelineOptions:
    return emitOptions(os, records, "The options of the sits pipeline",
                       "PipelineOption", "SITS_PIPELINE_OPTION");
  case Action::GenCodegenOptions:
    return emitOptions(os, records, "The options of the code generator",
                       "CodegenOption", "SITS_CODEGEN_OPTION");
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  cl::ParseCommandLineOptions(argc, argv);
  return TableGenMain(argv[0], TableGenMainFn(&emit));
}
