//===- sits-tblgen.cpp - TableGen backends of sits ------------------------===//
//
// -gen-pipeline-options lists the records of class PipelineOption
// (passes/PipelineOptions.td) as X-macro entries, in declaration order:
//
//   SITS_PIPELINE_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)
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

enum class Action { GenPipelineOptions };

cl::opt<Action> action(
    cl::desc("Action to perform:"),
    cl::values(clEnumValN(Action::GenPipelineOptions, "gen-pipeline-options",
                          "List the PipelineOption records as X-macro "
                          "entries")),
    cl::Required);

void emitStringLiteral(StringRef text, raw_ostream &os) {
  os << '"';
  os.write_escaped(text);
  os << '"';
}

bool emitPipelineOptions(raw_ostream &os, const RecordKeeper &records) {
  emitSourceFileHeader("The options of the sits pipeline", os, records);
  // Declaration order, not the name order records are kept in: the order
  // of PipelineOptions' members and of `--help` for the pipeline.
  std::vector<const Record *> options(
      records.getAllDerivedDefinitions("PipelineOption"));
  llvm::sort(options, [](const Record *a, const Record *b) {
    return a->getID() < b->getID();
  });
  os << "#ifndef SITS_PIPELINE_OPTION\n"
     << "#error \"define SITS_PIPELINE_OPTION(FIELD, TYPE, NAME, DEFAULT, "
        "VALUE_DESC, HELP) first\"\n"
     << "#endif\n\n";
  for (const Record *option : options) {
    StringRef defaultValue = option->getValueAsString("defaultValue");
    if (defaultValue.empty())
      PrintFatalError(option, "a pipeline option needs a default");
    os << "SITS_PIPELINE_OPTION(" << option->getValueAsString("cppName") << ", "
       << option->getValueAsString("type") << ", ";
    emitStringLiteral(option->getValueAsString("argument"), os);
    os << ", " << defaultValue << ", ";
    emitStringLiteral(option->getValueAsString("valueDescription"), os);
    os << ",\n    ";
    emitStringLiteral(option->getValueAsString("description"), os);
    os << ")\n";
  }
  os << "\n#undef SITS_PIPELINE_OPTION\n";
  return false;
}

bool emit(raw_ostream &os, const RecordKeeper &records) {
  switch (action) {
  case Action::GenPipelineOptions:
    return emitPipelineOptions(os, records);
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  cl::ParseCommandLineOptions(argc, argv);
  return TableGenMain(argv[0], TableGenMainFn(&emit));
}
