//===- VerifyModes.cpp - sitsc modes that check numbers on the CPU --------===//
//
// `--verify=DIR`, `--verify-greedy=FILE.json` and `--reference-perplexity`
// run a stage of the compiled program on the CPU reference executor, so that
// every pass can be shown to keep the model's numbers without a GPU.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/sitsc/Modes.h"
#include "dialects/sits/SitsOps.h"
#include "frontends/onnx/OnnxLoader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
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
cl::opt<std::string> verifyStage(
    "verify-stage",
    cl::desc("Program the checks run: sits or optimized (default)"),
    cl::init("optimized"), cl::cat(sitsc::getCategory()));
cl::opt<double> verifyTolerance(
    "verify-tolerance",
    cl::desc("Largest absolute logit error --verify accepts (default 1e-3)"),
    cl::init(1e-3), cl::cat(sitsc::getCategory()));
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

/// The files `DIR/<prefix>_<n>.pb`, in order of n; an error when there are
/// none or the numbering has a gap.
llvm::Expected<std::vector<std::string>>
listNumberedTensors(llvm::StringRef dir, llvm::StringRef prefix) {
  std::vector<std::string> files;
  for (int index = 0;; ++index) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, (prefix + "_" + llvm::Twine(index) + ".pb")
                                      .str());
    if (!llvm::sys::fs::exists(path))
      break;
    files.push_back(path.str().str());
  }
  if (files.empty())
    return llvm::createStringError("--verify: no " + prefix + "_0.pb in '" +
                                   dir + "'");
  return files;
}

llvm::Expected<ref::Tensor> readTensor(llvm::StringRef path) {
  llvm::Expected<LoadedTensor> loaded = readTensorProtoFile(path);
  if (!loaded)
    return loaded.takeError();
  llvm::Expected<ref::Tensor> tensor = ref::tensorFromOnnxData(
      loaded->elementType, loaded->dims, loaded->data);
  if (!tensor)
    return llvm::createStringError("'" + path + "': " +
                                   llvm::toString(tensor.takeError()));
  return tensor;
}

int runVerify(ModuleOp module, const ref::Program &program) {
  auto inputs = listNumberedTensors(verifyDir, "input");
  if (!inputs)
    return sitsc::fail(llvm::toString(inputs.takeError()));
  auto outputs = listNumberedTensors(verifyDir, "output");
  if (!outputs)
    return sitsc::fail(llvm::toString(outputs.takeError()));
  if (inputs->size() != 1 || outputs->size() != 1)
    return sitsc::fail("--verify: the model takes token ids and returns "
                       "logits, but '" +
                       verifyDir + "' holds " + llvm::Twine(inputs->size()) +
                       " inputs and " + llvm::Twine(outputs->size()) +
                       " outputs");
  llvm::Expected<ref::Tensor> ids = readTensor(inputs->front());
  if (!ids)
    return sitsc::fail(llvm::toString(ids.takeError()));
  llvm::Expected<ref::Tensor> expected = readTensor(outputs->front());
  if (!expected)
    return sitsc::fail(llvm::toString(expected.takeError()));

  if (findTvcHead(module))
    return sitsc::fail("--verify compares every logit, but the TVC head "
                       "(--tvc=exact) computes only its candidates' logits "
                       "when its proof holds: check the tokens with "
                       "--verify-greedy, or compare logits with --tvc=off");
  ref::Executor executor(module);
  llvm::StringRef function =
      program.hasCache() ? program.prefill : program.forward;
  llvm::Expected<ref::Tensor> logits =
      ref::runLogits(executor, module, function, *ids);
  if (!logits)
    return sitsc::fail("--verify: " + llvm::toString(logits.takeError()));
  llvm::Expected<ref::Comparison> comparison =
      ref::compareTensors(*logits, *expected);
  if (!comparison)
    return sitsc::fail("--verify: " + llvm::toString(comparison.takeError()));

  llvm::outs() << "verify: stage " << verifyStage << ", function @" << function
               << ", " << inputs->front() << "\n";
  comparison->print(llvm::outs());
  bool passed = comparison->withinTolerance(verifyTolerance);
  llvm::outs() << "verify: " << (passed ? "PASSED" : "FAILED")
               << " (max abs error " << comparison->maxAbsError
               << ", tolerance " << verifyTolerance.getValue() << ")\n";
  return passed ? 0 : 1;
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
    return llvm::createStringError("--verify-greedy: '" + path +
                                   "' is not JSON: " +
                                   llvm::toString(json.takeError()));
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
        return llvm::createStringError("--verify-greedy: \"" + key +
                                       "\" in '" + path +
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

int runVerifyGreedy(ModuleOp module, const ref::Program &program) {
  std::vector<int64_t> prompt, expected;
  if (llvm::Error error = readGreedyFile(verifyGreedy, prompt, expected))
    return sitsc::fail(llvm::toString(std::move(error)));
  ref::Executor executor(module);
  llvm::Expected<std::vector<ref::GreedyStep>> steps = ref::greedyDecode(
      executor, module, program, prompt, static_cast<int64_t>(expected.size()));
  if (!steps)
    return sitsc::fail("--verify-greedy: " +
                       llvm::toString(steps.takeError()));
  llvm::outs() << "verify-greedy: stage " << verifyStage << ", "
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
  llvm::StringRef name =
      program.hasCache() ? program.prefill : program.forward;
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
llvm::Expected<std::vector<int64_t>>
readTextTokens(ModuleOp module, const ref::Program &program,
               llvm::StringRef option, llvm::StringRef path) {
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
  llvm::Expected<std::vector<int64_t>> ids = readTextTokens(
      module, program, "--tvc-fallback-rate", tvcFallbackRate);
  if (!ids)
    return sitsc::fail(llvm::toString(ids.takeError()));
  std::vector<int64_t> tokens = *ids;
  if (maxTokens > 0 && static_cast<int64_t>(tokens.size()) > maxTokens)
    tokens.resize(maxTokens);
  ref::Executor executor(module);
  llvm::StringRef function =
      program.hasCache() ? program.prefill : program.forward;
  for (size_t start = 0; start < tokens.size(); start += perplexityWindow) {
    size_t length =
        std::min<size_t>(perplexityWindow, tokens.size() - start);
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

int runPerplexity(ModuleOp module, const ref::Program &program) {
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
      result->perplexity(), verifyStage.getValue());
  return 0;
}

} // namespace

bool sits::sitsc::isVerifyRequested() {
  return !verifyDir.empty() || !verifyGreedy.empty() ||
         !referencePerplexity.empty() || !tvcFallbackRate.empty();
}

std::optional<std::string> sits::sitsc::validateVerifyOptions(Stage &stage) {
  if (verifyStage == "sits")
    stage = Stage::Sits;
  else if (verifyStage == "optimized")
    stage = Stage::Optimized;
  else
    return "--verify-stage must be sits or optimized, got '" +
           verifyStage.getValue() + "'";
  if (!(verifyTolerance >= 0.0))
    return "--verify-tolerance must be >= 0";
  return std::nullopt;
}

int sits::sitsc::runVerifyModes(ModuleOp module) {
  llvm::Expected<ref::Program> program = ref::findProgram(module);
  if (!program)
    return fail(llvm::toString(program.takeError()));
  int status = 0;
  if (!verifyDir.empty())
    status |= runVerify(module, *program);
  if (!verifyGreedy.empty())
    status |= runVerifyGreedy(module, *program);
  if (!referencePerplexity.empty())
    status |= runPerplexity(module, *program);
  if (!tvcFallbackRate.empty())
    status |= runTvcFallbackRate(module, *program);
  return status;
}
