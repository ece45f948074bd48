//===- VerifyModes.cpp - sitsc modes that check numbers on the CPU --------===//
//
// `--verify=DIR`, `--verify-greedy=FILE.json` and `--reference-perplexity`
// run a stage of the compiled program on the CPU reference executor, so that
// every pass can be shown to keep the model's numbers without a GPU.
// `--verify` checks any graph the importer reads: a language model's token
// ids against its logits, any other graph output by output, as ONNX's
// backend tests do.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/sitsc/Modes.h"
#include "dialects/onnx/OnnxOps.h"
#include "dialects/sits/SitsOps.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxLoader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;
using namespace sits;
namespace cl = llvm::cl;
namespace ref = sits::reference;

namespace {

cl::opt<std::string> verifyDir(
    "verify",
    cl::desc("Run the program on DIR/input_*.pb with the CPU reference "
             "executor and compare with DIR/output_*.pb"),
    cl::value_desc("dir"), cl::cat(sitsc::getCategory()));
cl::opt<std::string> verifyGreedy(
    "verify-greedy",
    cl::desc("Decode the prompt of FILE (greedy.json: prompt, greedy) token "
             "by token on the CPU and compare the greedy stream"),
    cl::value_desc("file.json"), cl::cat(sitsc::getCategory()));
cl::opt<std::string> referencePerplexity(
    "reference-perplexity",
    cl::desc("Teacher-forced perplexity of a text on the CPU (bytes for a "
             "256-token vocabulary, else a file of token ids)"),
    cl::value_desc("file"), cl::cat(sitsc::getCategory()));
cl::opt<std::string> tvcFallbackRate(
    "tvc-fallback-rate",
    cl::desc("Run the TVC program (--tvc=exact) over the positions of a text "
             "(as --reference-perplexity reads it) and report how often the "
             "proof held and how often it fell back to the full LM head"),
    cl::value_desc("file"), cl::cat(sitsc::getCategory()));
cl::list<std::string> verifyStageNames(
    "verify-stage",
    cl::desc("Stages the checks run on: imported, sits, optimized (default); "
             "a comma-separated list checks each"),
    cl::CommaSeparated, cl::value_desc("stages"),
    cl::cat(sitsc::getCategory()));
cl::opt<double> verifyTolerance(
    "verify-tolerance",
    cl::desc("Largest absolute logit error --verify accepts for a language "
             "model (default 1e-3)"),
    cl::init(1e-3), cl::cat(sitsc::getCategory()));
cl::opt<double> verifyRtol(
    "verify-rtol",
    cl::desc("--verify of other graphs: relative tolerance of each element "
             "(default 1e-3, as ONNX's backend tests)"),
    cl::init(1e-3), cl::cat(sitsc::getCategory()));
cl::opt<double> verifyAtol(
    "verify-atol",
    cl::desc("--verify of other graphs: absolute tolerance of each element "
             "(default 1e-7, as ONNX's backend tests)"),
    cl::init(1e-7), cl::cat(sitsc::getCategory()));

/// The stages --verify-stage lists, in pipeline order (set by
/// validateVerifyOptions).
llvm::SmallVector<Stage> verifyStages;
cl::opt<int64_t> maxTokens(
    "max-tokens",
    cl::desc("--reference-perplexity: score at most N tokens (0: all)"),
    cl::init(0), cl::cat(sitsc::getCategory()));
cl::opt<int64_t> perplexityWindow(
    "perplexity-window",
    cl::desc("--reference-perplexity: tokens per teacher-forced window "
             "(default 256)"),
    cl::init(256), cl::cat(sitsc::getCategory()));

/// The program's TVC LM head, if it has one.
Operation *findTvcHead(ModuleOp module) {
  Operation *found = nullptr;
  module.walk([&](sits::TVCLMHeadOp op) {
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

/// "tvc: 57 rows scored, 50 proved, 7 fell back to the full LM head
/// (12.28%)".
void printTvcStatistics(const ref::ExecutorStatistics &statistics,
                        llvm::StringRef what) {
  int64_t fallbacks = statistics.tvcRows - statistics.tvcProved;
  llvm::outs() << llvm::formatv(
      "tvc: {0} {1} scored, {2} proved, {3} fell back to the full LM head "
      "({4:f2}% fallback)\n",
      statistics.tvcRows, what, statistics.tvcProved, fallbacks,
      statistics.tvcRows ? 100.0 * fallbacks / statistics.tvcRows : 0.0);
}

/// The files `DIR/<prefix>_<n>.pb`, in order of n (up to the first gap).
std::vector<std::string> listNumberedTensors(llvm::StringRef dir,
                                             llvm::StringRef prefix) {
  std::vector<std::string> files;
  for (int index = 0;; ++index) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path,
                            (prefix + "_" + llvm::Twine(index) + ".pb").str());
    if (!llvm::sys::fs::exists(path))
      break;
    files.push_back(path.str().str());
  }
  return files;
}

/// One tensor of the data set: its file, its name (may be empty) and value.
struct DataTensor {
  std::string path;
  std::string name;
  ref::Tensor tensor;
};

/// Every `DIR/<prefix>_<n>.pb`, read (a graph may take no input, but
/// returns at least one output).
llvm::Expected<std::vector<DataTensor>>
readDataTensors(llvm::StringRef dir, llvm::StringRef prefix) {
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError("'" + dir + "' is not a folder");
  std::vector<std::string> files = listNumberedTensors(dir, prefix);
  if (files.empty() && prefix == "output")
    return llvm::createStringError("no output_0.pb in '" + dir + "'");
  std::vector<DataTensor> tensors;
  for (const std::string &path : files) {
    llvm::Expected<LoadedTensor> loaded = readTensorProtoFile(path);
    if (!loaded)
      return loaded.takeError();
    llvm::Expected<ref::Tensor> tensor = ref::tensorFromOnnxData(
        loaded->elementType, loaded->dims, loaded->data);
    if (!tensor) {
      llvm::consumeError(tensor.takeError());
      return llvm::createStringError(
          "'" + path + "' holds " +
          sits::onnx::getOnnxElementTypeName(loaded->elementType) +
          " elements, which the reference executor does not run");
    }
    tensors.push_back({path, loaded->name, std::move(*tensor)});
  }
  return tensors;
}

/// A language model's data set: token ids [batch, seq] in, float logits
/// [batch, seq, vocab] out.
bool isLanguageModelData(llvm::ArrayRef<DataTensor> inputs,
                         llvm::ArrayRef<DataTensor> outputs) {
  return inputs.size() == 1 && outputs.size() == 1 &&
         !inputs[0].tensor.isFloat() && inputs[0].tensor.getRank() == 2 &&
         inputs[0].tensor.getElementType() != ref::ElementType::I1 &&
         outputs[0].tensor.isFloat() && outputs[0].tensor.getRank() == 3;
}

/// `type` as MLIR prints it.
std::string printed(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// "f32[2, 3, 8]".
std::string describe(const ref::Tensor &tensor) {
  return ref::toString(tensor.getElementType()).str() +
         ref::formatShape(tensor.getShape());
}

int runVerifyLogits(ModuleOp module, const ref::Program &program,
                    llvm::StringRef stage, const DataTensor &ids,
                    const DataTensor &expected) {
  if (findTvcHead(module))
    return sitsc::fail("--verify compares every logit, but the TVC head "
                       "(--tvc=exact) computes only its candidates' logits "
                       "when its proof holds: check the tokens with "
                       "--verify-greedy, or compare logits with --tvc=off");
  ref::Executor executor(module);
  llvm::StringRef function =
      program.hasCache() ? program.prefill : program.forward;
  llvm::Expected<ref::Tensor> logits =
      ref::runLogits(executor, module, function, ids.tensor);
  if (!logits)
    return sitsc::fail("--verify: " + llvm::toString(logits.takeError()));
  llvm::Expected<ref::Comparison> comparison =
      ref::compareTensors(*logits, expected.tensor);
  if (!comparison)
    return sitsc::fail("--verify: " + llvm::toString(comparison.takeError()));

  llvm::outs() << "verify: stage " << stage << ", function @" << function
               << ", " << ids.path << " (token ids -> logits)\n";
  comparison->print(llvm::outs());
  bool passed = comparison->withinTolerance(verifyTolerance);
  llvm::outs() << "verify: " << (passed ? "PASSED" : "FAILED")
               << " (max abs error " << comparison->maxAbsError
               << ", tolerance " << verifyTolerance.getValue() << ")\n";
  return passed ? 0 : 1;
}

/// The data tensor bound to position `index` named `name` of a signature:
/// by name when the data set names its tensors, else by position.
const DataTensor *findData(llvm::ArrayRef<DataTensor> data, unsigned index,
                           StringAttr name) {
  bool named = llvm::all_of(
      data, [](const DataTensor &tensor) { return !tensor.name.empty(); });
  if (!named)
    return index < data.size() ? &data[index] : nullptr;
  for (const DataTensor &tensor : data)
    if (name && tensor.name == name.getValue())
      return &tensor;
  return nullptr;
}

/// The function's arguments from the data set's inputs, checked against
/// the argument types.
llvm::Expected<std::vector<ref::RuntimeValue>>
bindInputs(func::FuncOp function, llvm::ArrayRef<DataTensor> inputs) {
  std::vector<ref::RuntimeValue> args;
  std::string prefix = "@" + function.getSymName().str() + " ";
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto name = function.getArgAttrOfType<StringAttr>(i, kInputNameAttr);
    std::string label =
        "input " + (name ? "'" + name.str() + "'" : std::to_string(i));
    auto type = dyn_cast<RankedTensorType>(function.getArgumentTypes()[i]);
    if (!type)
      return llvm::createStringError(prefix + "takes " + label + " of type " +
                                     printed(function.getArgumentTypes()[i]) +
                                     ", which a data set cannot give");
    const DataTensor *data = findData(inputs, i, name);
    if (!data)
      return llvm::createStringError(prefix + "takes " + label +
                                     ", which no input_N.pb holds");
    llvm::Expected<ref::ElementType> element =
        ref::elementTypeOf(type.getElementType());
    if (!element)
      return element.takeError();
    bool shapeFits = type.getRank() == data->tensor.getRank();
    for (int64_t d = 0; shapeFits && d < type.getRank(); ++d)
      shapeFits =
          type.isDynamicDim(d) || type.getDimSize(d) == data->tensor.getDim(d);
    if (*element != data->tensor.getElementType() || !shapeFits)
      return llvm::createStringError(
          "'" + data->path + "' holds " + describe(data->tensor) + ", but " +
          prefix + "takes " + label + " as " + printed(type));
    args.push_back(data->tensor);
  }
  for (const DataTensor &data : inputs)
    if (!data.name.empty() &&
        llvm::none_of(llvm::seq(function.getNumArguments()), [&](unsigned i) {
          auto name = function.getArgAttrOfType<StringAttr>(i, kInputNameAttr);
          return name && name.getValue() == data.name;
        }))
      return llvm::createStringError("'" + data.path + "' holds input '" +
                                     data.name + "', which " + prefix +
                                     "does not take");
  return args;
}

/// Runs the program on the data set's inputs and compares every output it
/// names, as ONNX's backend tests do (bf16 outputs at a relative tolerance
/// of at least 2^-6, two bf16 units in the last place, as they do).
int runVerifyOutputs(ModuleOp module, const ref::Program &program,
                     llvm::StringRef stage, llvm::ArrayRef<DataTensor> inputs,
                     llvm::ArrayRef<DataTensor> outputs) {
  auto function = module.lookupSymbol<func::FuncOp>(program.forward);
  if (!function)
    return sitsc::fail("--verify: the module has no function '" +
                       program.forward + "'");
  llvm::Expected<std::vector<ref::RuntimeValue>> args =
      bindInputs(function, inputs);
  if (!args)
    return sitsc::fail("--verify: " + llvm::toString(args.takeError()));
  llvm::outs() << "verify: stage " << stage << ", function @" << program.forward
               << ", " << inputs.size() << " inputs from " << verifyDir
               << ", each output within rtol "
               << llvm::format("%g", verifyRtol.getValue()) << ", atol "
               << llvm::format("%g", verifyAtol.getValue()) << "\n";
  ref::Executor executor(module);
  llvm::Expected<std::vector<ref::RuntimeValue>> results =
      executor.run(program.forward, std::move(*args));
  if (!results)
    return sitsc::fail("--verify: " + llvm::toString(results.takeError()));
  int differing = 0;
  for (auto [index, expected] : llvm::enumerate(outputs)) {
    unsigned position = index;
    if (!expected.name.empty()) {
      position = function.getNumResults();
      for (unsigned i = 0; i < function.getNumResults(); ++i)
        if (auto name =
                function.getResultAttrOfType<StringAttr>(i, kOutputNameAttr))
          if (name.getValue() == expected.name)
            position = i;
    }
    std::string label =
        expected.name.empty() ? std::to_string(index) : expected.name;
    if (position >= results->size() || !(*results)[position].isTensor())
      return sitsc::fail("--verify: '" + expected.path + "' holds output '" +
                         label + "', which @" + program.forward +
                         " does not return");
    const ref::Tensor &actual = (*results)[position].getTensor();
    double rtol = verifyRtol;
    if (expected.tensor.getElementType() == ref::ElementType::BF16)
      rtol = std::max(rtol, 1.0 / 64);
    llvm::Expected<ref::AllCloseComparison> comparison =
        ref::compareAllClose(actual, expected.tensor, rtol, verifyAtol);
    llvm::outs() << "  output '" << label << "' " << describe(expected.tensor)
                 << ": ";
    if (!comparison) {
      llvm::outs() << llvm::toString(comparison.takeError()) << ": MISMATCH\n";
      ++differing;
      continue;
    }
    comparison->print(llvm::outs());
    if (rtol != verifyRtol)
      llvm::outs() << " (bf16: rtol " << llvm::format("%g", rtol) << ")";
    llvm::outs() << (comparison->passed() ? ": ok\n" : ": MISMATCH\n");
    differing += !comparison->passed();
  }
  llvm::outs() << "verify: " << (differing ? "FAILED" : "PASSED") << " (stage "
               << stage << ": " << outputs.size() - differing << " of "
               << outputs.size() << " outputs agree)\n";
  return differing ? 1 : 0;
}

int runVerify(ModuleOp module, const ref::Program &program,
              llvm::StringRef stage) {
  llvm::Expected<std::vector<DataTensor>> inputs =
      readDataTensors(verifyDir, "input");
  if (!inputs)
    return sitsc::fail("--verify: " + llvm::toString(inputs.takeError()));
  llvm::Expected<std::vector<DataTensor>> outputs =
      readDataTensors(verifyDir, "output");
  if (!outputs)
    return sitsc::fail("--verify: " + llvm::toString(outputs.takeError()));
  // A decoder with a KV cache runs its prefill on token ids: only the
  // logits check fits it.
  if (program.hasCache() || isLanguageModelData(*inputs, *outputs)) {
    if (!isLanguageModelData(*inputs, *outputs))
      return sitsc::fail("--verify: stage " + stage +
                         " is a prefill/decode program, which takes token "
                         "ids and returns logits, but '" +
                         verifyDir + "' holds " + llvm::Twine(inputs->size()) +
                         " inputs and " + llvm::Twine(outputs->size()) +
                         " outputs");
    return runVerifyLogits(module, program, stage, inputs->front(),
                           outputs->front());
  }
  return runVerifyOutputs(module, program, stage, *inputs, *outputs);
}

/// `prompt` and `greedy` of a greedy.json file.
llvm::Error readGreedyFile(llvm::StringRef path, std::vector<int64_t> &prompt,
                           std::vector<int64_t> &greedy) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError("--verify-greedy: cannot read '" + path +
                                   "': " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError(
        "--verify-greedy: '" + path +
        "' is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  auto readIds = [&](llvm::StringRef key,
                     std::vector<int64_t> &ids) -> llvm::Error {
    const llvm::json::Array *array = object ? object->getArray(key) : nullptr;
    if (!array || array->empty())
      return llvm::createStringError("--verify-greedy: '" + path +
                                     "' has no non-empty \"" + key +
                                     "\" array of token ids");
    for (const llvm::json::Value &value : *array) {
      std::optional<int64_t> id = value.getAsInteger();
      if (!id)
        return llvm::createStringError("--verify-greedy: \"" + key + "\" in '" +
                                       path +
                                       "' holds a value that is not an "
                                       "integer token id");
      ids.push_back(*id);
    }
    return llvm::Error::success();
  };
  if (llvm::Error error = readIds("prompt", prompt))
    return error;
  return readIds("greedy", greedy);
}

int runVerifyGreedy(ModuleOp module, const ref::Program &program,
                    llvm::StringRef stage) {
  std::vector<int64_t> prompt, expected;
  if (llvm::Error error = readGreedyFile(verifyGreedy, prompt, expected))
    return sitsc::fail(llvm::toString(std::move(error)));
  ref::Executor executor(module);
  llvm::Expected<std::vector<ref::GreedyStep>> steps = ref::greedyDecode(
      executor, module, program, prompt, static_cast<int64_t>(expected.size()));
  if (!steps)
    return sitsc::fail("--verify-greedy: " + llvm::toString(steps.takeError()));
  llvm::outs() << "verify-greedy: stage " << stage << ", "
               << (program.hasCache() ? "prefill + decode with the KV cache"
                                      : "full-sequence recomputation")
               << ", prompt of " << prompt.size() << " tokens, "
               << expected.size() << " greedy tokens\n";
  llvm::outs() << "  tokens:";
  for (const ref::GreedyStep &step : *steps)
    llvm::outs() << " " << step.token;
  llvm::outs() << "\n";
  if (std::optional<ref::GreedyMismatch> mismatch =
          ref::findGreedyMismatch(*steps, expected)) {
    if (findTvcHead(module))
      printTvcStatistics(executor.getStatistics(),
                         "rows (prompt positions and decode steps)");
    llvm::outs() << "verify-greedy: FAILED at step " << mismatch->step
                 << ": got token " << mismatch->actualToken << ", expected "
                 << mismatch->expectedToken << " (logit margin "
                 << mismatch->margin << ")\n";
    return 1;
  }
  if (findTvcHead(module))
    printTvcStatistics(executor.getStatistics(),
                       "rows (prompt positions and decode steps)");
  float smallest = INFINITY;
  for (const ref::GreedyStep &step : *steps)
    smallest = std::min(smallest, step.margin);
  llvm::outs() << "verify-greedy: PASSED (" << steps->size() << "/"
               << expected.size() << " tokens; smallest logit margin "
               << smallest << ")\n";
  return 0;
}

/// Vocabulary size: the last dim of the program's logits.
std::optional<int64_t> getVocabSize(ModuleOp module,
                                    const ref::Program &program) {
  llvm::StringRef name = program.hasCache() ? program.prefill : program.forward;
  auto function = module.lookupSymbol<func::FuncOp>(name);
  if (!function || function.getNumResults() == 0)
    return std::nullopt;
  auto logits = dyn_cast<RankedTensorType>(function.getResultTypes().front());
  if (!logits || logits.isDynamicDim(logits.getRank() - 1))
    return std::nullopt;
  return logits.getDimSize(logits.getRank() - 1);
}

/// The token ids of a perplexity text: its bytes for a byte-level
/// vocabulary, else integers separated by white space or commas.
llvm::Expected<std::vector<int64_t>> readPerplexityTokens(llvm::StringRef path,
                                                          int64_t vocab) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError("--reference-perplexity: cannot read '" +
                                   path + "': " + buffer.getError().message());
  llvm::StringRef text = (*buffer)->getBuffer();
  std::vector<int64_t> ids;
  if (vocab == 256) {
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(text, words, " \t\r\n,");
  for (llvm::StringRef word : words) {
    int64_t id;
    if (word.getAsInteger(10, id) || id < 0 || id >= vocab)
      return llvm::createStringError(
          "--reference-perplexity: '" + path + "' must hold token ids in [0, " +
          llvm::Twine(vocab) + ") for this " + llvm::Twine(vocab) +
          "-token vocabulary (a byte-level text only for 256 tokens); found '" +
          word + "'");
    ids.push_back(id);
  }
  return ids;
}

/// The tokens of `path` for a perplexity-style run, checked.
llvm::Expected<std::vector<int64_t>> readTextTokens(ModuleOp module,
                                                    const ref::Program &program,
                                                    llvm::StringRef option,
                                                    llvm::StringRef path) {
  if (perplexityWindow < 2)
    return llvm::createStringError(
        "--perplexity-window must be at least 2, got " +
        llvm::Twine(perplexityWindow.getValue()));
  if (maxTokens < 0)
    return llvm::createStringError("--max-tokens must be >= 0, got " +
                                   llvm::Twine(maxTokens.getValue()));
  std::optional<int64_t> vocab = getVocabSize(module, program);
  if (!vocab)
    return llvm::createStringError(option +
                                   ": the program's logits have no static "
                                   "vocabulary size");
  llvm::Expected<std::vector<int64_t>> ids = readPerplexityTokens(path, *vocab);
  if (!ids)
    return ids.takeError();
  if (ids->size() < 2)
    return llvm::createStringError(option + ": '" + path +
                                   "' holds fewer than 2 tokens");
  return ids;
}

int runTvcFallbackRate(ModuleOp module, const ref::Program &program) {
  if (!findTvcHead(module))
    return sitsc::fail("--tvc-fallback-rate needs the TVC head: compile "
                       "with --tvc=exact");
  llvm::Expected<std::vector<int64_t>> ids =
      readTextTokens(module, program, "--tvc-fallback-rate", tvcFallbackRate);
  if (!ids)
    return sitsc::fail(llvm::toString(ids.takeError()));
  std::vector<int64_t> tokens = *ids;
  if (maxTokens > 0 && static_cast<int64_t>(tokens.size()) > maxTokens)
    tokens.resize(maxTokens);
  ref::Executor executor(module);
  llvm::StringRef function =
      program.hasCache() ? program.prefill : program.forward;
  for (size_t start = 0; start < tokens.size(); start += perplexityWindow) {
    size_t length = std::min<size_t>(perplexityWindow, tokens.size() - start);
    ref::Tensor window = ref::Tensor::fromInts(
        ref::ElementType::I64, {1, static_cast<int64_t>(length)},
        {tokens.begin() + start, tokens.begin() + start + length});
    llvm::Expected<ref::Tensor> logits =
        ref::runLogits(executor, module, function, window);
    if (!logits)
      return sitsc::fail("--tvc-fallback-rate: " +
                         llvm::toString(logits.takeError()));
  }
  llvm::outs() << "tvc-fallback-rate: " << tokens.size()
               << " positions in windows of " << perplexityWindow.getValue()
               << "\n";
  printTvcStatistics(executor.getStatistics(), "positions");
  return 0;
}

int runPerplexity(ModuleOp module, const ref::Program &program,
                  llvm::StringRef stage) {
  if (findTvcHead(module))
    return sitsc::fail("--reference-perplexity needs every logit, but the "
                       "TVC head (--tvc=exact) computes only its candidates' "
                       "logits when its proof holds: measure perplexity with "
                       "--tvc=off");
  llvm::Expected<std::vector<int64_t>> ids = readTextTokens(
      module, program, "--reference-perplexity", referencePerplexity);
  if (!ids)
    return sitsc::fail(llvm::toString(ids.takeError()));
  ref::Executor executor(module);
  llvm::Expected<ref::PerplexityResult> result = ref::teacherForcedPerplexity(
      executor, module, program, *ids, perplexityWindow, maxTokens);
  if (!result)
    return sitsc::fail("--reference-perplexity: " +
                       llvm::toString(result.takeError()));
  llvm::outs() << llvm::formatv(
      "perplexity: {0} tokens predicted in windows of {1}, mean NLL {2:f6} "
      "nats/token, perplexity {3:f4} (stage {4})\n",
      result->predictedTokens, perplexityWindow.getValue(), result->meanNll,
      result->perplexity(), stage);
  return 0;
}

} // namespace

bool sits::sitsc::isVerifyRequested() {
  return !verifyDir.empty() || !verifyGreedy.empty() ||
         !referencePerplexity.empty() || !tvcFallbackRate.empty();
}

std::optional<std::string> sits::sitsc::validateVerifyOptions(Stage &stage) {
  verifyStages.clear();
  if (verifyStageNames.empty())
    verifyStages.push_back(Stage::Optimized);
  for (const std::string &name : verifyStageNames) {
    std::optional<Stage> parsed = parseStage(name);
    if (!parsed || *parsed > Stage::Optimized)
      return "--verify-stage takes imported, sits and optimized, got '" + name +
             "'";
    verifyStages.push_back(*parsed);
  }
  llvm::sort(verifyStages);
  verifyStages.erase(llvm::unique(verifyStages), verifyStages.end());
  stage = verifyStages.back();
  if (!(verifyTolerance >= 0.0))
    return "--verify-tolerance must be >= 0";
  if (!(verifyRtol >= 0.0) || !(verifyAtol >= 0.0))
    return "--verify-rtol and --verify-atol must be >= 0";
  return std::nullopt;
}

int sits::sitsc::runVerifyModes(ModuleOp module, Stage stage) {
  llvm::Expected<ref::Program> program = ref::findProgram(module);
  if (!program)
    return fail(llvm::toString(program.takeError()));
  llvm::StringRef name = getStageName(stage);
  int status = 0;
  if (!verifyDir.empty())
    status |= runVerify(module, *program, name);
  if (!verifyGreedy.empty())
    status |= runVerifyGreedy(module, *program, name);
  if (!referencePerplexity.empty())
    status |= runPerplexity(module, *program, name);
  if (!tvcFallbackRate.empty())
    status |= runTvcFallbackRate(module, *program);
  return status;
}

int sits::sitsc::verifyEarlierStages(ModuleOp imported,
                                     const PipelineOptions &options) {
  int status = 0;
  for (Stage stage : llvm::ArrayRef(verifyStages).drop_back()) {
    // Each on its own copy of the imported program: the main pipeline
    // carries on from the original to the last stage.
    OwningOpRef<ModuleOp> copy = imported.clone();
    PassManager pm(imported.getContext(), ModuleOp::getOperationName());
    buildPipeline(pm, stage, options);
    if (failed(pm.run(*copy)))
      return 1;
    status |= runVerifyModes(*copy, stage);
  }
  return status;
}
