//===- sits-exec.cpp - Run a function with the CPU reference executor -----===//
//
//   sits-exec FILE.mlir [--function NAME] --input a.npy ... --output-dir DIR
//   sits-exec MODEL.onnx [--stage=sits] --input ids.npy --output-dir DIR
//   sits-exec MODEL.onnx --perplexity=ids.npy [--window=256] [--max-tokens=N]
//   sits-exec MODEL.onnx --stage=optimized --greedy=greedy.json
//   sits-exec MODEL.onnx --stage=optimized --prompt=TEXT [--tokenizer=DIR]
//             [--max-new-tokens=N]
//
// Runs one function of a module (any stage: imported, sits, optimized) on
// .npy inputs and writes each result as DIR/result_<i>.npy. An argument of
// KV-cache type gets an empty cache (no .npy). A KV-cache result is written
// as result_<i>.keys.npy and result_<i>.values.npy
// ([layers, batch, kv_heads, capacity, head_dim]) and result_<i>.lengths.npy.
// An ONNX model is imported and compiled to --stage first. --perplexity
// prints the teacher-forced NLL of token ids instead; --greedy decodes the
// "prompt" of a greedy.json greedily (through the KV cache when the program
// has one) and compares with its "greedy" tokens. --prompt is the CPU
// reference of `sits-run --prompt`: the text encoded with the model's
// tokenizer (tokenizer.json beside the model, or --tokenizer), decoded
// greedily until an EOS id, the text and the ids printed as sits-run does.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/Npy.h"
#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"
#include "dialects/sits/SitsDialect.h"
#include "frontends/onnx/OnnxImporter.h"
#include "sits/AtomicFile.h"
#include "sits/ModelTokenizer.h"
#include "sits/TextStream.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace sits::reference;

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<file.mlir>"),
                                            llvm::cl::Required);
static llvm::cl::opt<std::string>
    functionName("function",
                 llvm::cl::desc("Function to run (default: the first "
                                "func.func of the module)"),
                 llvm::cl::init(""));
static llvm::cl::list<std::string>
    inputs("input", llvm::cl::desc("A .npy file per tensor argument, in order"),
           llvm::cl::ZeroOrMore);
static llvm::cl::opt<std::string>
    outputDir("output-dir", llvm::cl::desc("Where to write result_<i>.npy"),
              llvm::cl::init(""));
static llvm::cl::opt<unsigned>
    numThreads("threads",
               llvm::cl::desc("Threads for matrix products (0: automatic)"),
               llvm::cl::init(0));
static llvm::cl::opt<bool>
    trace("trace", llvm::cl::desc("Print every op's results to stderr"),
          llvm::cl::init(false));
static llvm::cl::opt<bool>
    printTime("time", llvm::cl::desc("Print the run time to stderr"),
              llvm::cl::init(false));
static llvm::cl::opt<std::string>
    stageName("stage",
              llvm::cl::desc("For an .onnx input: the stage to run "
                             "(imported, sits, optimized)"),
              llvm::cl::init("imported"));
// For an .onnx input: the pipeline's options, as sitsc takes them.
static sits::PipelineFlags pipelineFlags(llvm::cl::getGeneralCategory());
static llvm::cl::opt<std::string> perplexityIds(
    "perplexity",
    llvm::cl::desc("Print the teacher-forced NLL of these token ids (.npy)"),
    llvm::cl::init(""));
static llvm::cl::opt<int64_t>
    window("window", llvm::cl::desc("Tokens per window for --perplexity"),
           llvm::cl::init(256));
static llvm::cl::opt<int64_t>
    maxTokens("max-tokens",
              llvm::cl::desc("Use at most this many ids for --perplexity"),
              llvm::cl::init(0));
static llvm::cl::opt<std::string> greedyFile(
    "greedy",
    llvm::cl::desc("Greedy-decode the prompt of this JSON file ({\"prompt\": "
                   "[ids], \"greedy\": [ids]}) and compare"),
    llvm::cl::init(""));
static llvm::cl::opt<std::string> greedyDump(
    "greedy-dump",
    llvm::cl::desc("With --greedy: also write the decoded tokens and each "
                   "step's logits to this JSON file ({\"tokens\": [..], "
                   "\"logits\": [[..], ..]})"));
static llvm::cl::opt<std::string> promptText(
    "prompt",
    llvm::cl::desc("Greedy-decode this text with the model's tokenizer and "
                   "print the continuation and the ids, as sits-run --prompt "
                   "--print-ids"));
static llvm::cl::opt<std::string> tokenizerFolder(
    "tokenizer",
    llvm::cl::desc("With --prompt: the folder of tokenizer.json (default: "
                   "the model's folder)"));
static llvm::cl::opt<int64_t>
    maxNewTokens("max-new-tokens",
                 llvm::cl::desc("With --prompt: tokens to generate at most"),
                 llvm::cl::init(16));
static llvm::cl::opt<bool> allowUnregistered(
    "allow-unregistered-dialect",
    llvm::cl::desc("Parse ops of unregistered dialects (generic form)"),
    llvm::cl::init(false));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "sits-exec: error: " << message << "\n";
  return 1;
}

/// One line per op: name, location, and each result's shape and range.
static void traceOp(Operation *op, llvm::ArrayRef<RuntimeValue> results) {
  llvm::errs() << op->getName() << " at " << describeLocation(op->getLoc());
  for (const RuntimeValue &value : results) {
    if (value.isKVCache()) {
      llvm::errs() << " -> kv_cache";
      continue;
    }
    const Tensor &tensor = value.getTensor();
    double low = INFINITY, high = -INFINITY;
    for (int64_t i = 0; i < tensor.getNumElements(); ++i) {
      double x = tensor.getAsDouble(i);
      low = std::min(low, x);
      high = std::max(high, x);
    }
    llvm::errs() << " -> " << toString(tensor.getElementType())
                 << formatShape(tensor.getShape()) << " in [" << low << ", "
                 << high << "]";
  }
  llvm::errs() << "\n";
}

static llvm::Error writeResult(llvm::StringRef dir, unsigned index,
                               const RuntimeValue &value) {
  llvm::SmallString<128> path(dir);
  std::string stem = "result_" + std::to_string(index);
  if (value.isTensor()) {
    llvm::sys::path::append(path, stem + ".npy");
    return writeNpyFile(path, value.getTensor());
  }
  const KVCacheState &cache = *value.getKVCache();
  const KVCacheConfig &config = cache.getConfig();
  int64_t batch = std::max<int64_t>(cache.getBatch(), 0);
  Shape shape = {config.layers, batch, config.kvHeads, config.capacity,
                 config.headDim};
  llvm::ArrayRef<float> keys = cache.getKeyBuffer();
  llvm::ArrayRef<float> values = cache.getValueBuffer();
  std::vector<int64_t> lengths(cache.getLengths().begin(),
                               cache.getLengths().end());
  struct Part {
    const char *suffix;
    Tensor tensor;
  } parts[] = {
      {".keys.npy",
       Tensor::fromFloats(ElementType::F32, shape, {keys.begin(), keys.end()})},
      {".values.npy", Tensor::fromFloats(ElementType::F32, shape,
                                         {values.begin(), values.end()})},
      {".lengths.npy",
       Tensor::fromInts(ElementType::I64, {batch}, std::move(lengths))}};
  for (Part &part : parts) {
    llvm::SmallString<128> partPath(dir);
    llvm::sys::path::append(partPath, stem + part.suffix);
    if (llvm::Error error = writeNpyFile(partPath, part.tensor))
      return error;
  }
  return llvm::Error::success();
}

/// --greedy: decodes the file's prompt and compares with its stream.
static int runGreedy(ModuleOp module, const ExecutorOptions &options) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(greedyFile);
  if (!file)
    return fail("cannot read '" + greedyFile + "'");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return fail(greedyFile + ": " + llvm::toString(json.takeError()));
  std::vector<int64_t> prompt, expected;
  const llvm::json::Object *object = json->getAsObject();
  for (auto [key, out] :
       {std::pair{"prompt", &prompt}, {"greedy", &expected}}) {
    const llvm::json::Array *array = object ? object->getArray(key) : nullptr;
    if (!array)
      return fail(greedyFile + " has no \"" + key + "\" array");
    for (const llvm::json::Value &token : *array) {
      std::optional<int64_t> id = token.getAsInteger();
      if (!id)
        return fail(greedyFile + ": \"" + key + "\" holds a non-integer");
      out->push_back(*id);
    }
  }
  llvm::Expected<Program> program = findProgram(module, functionName);
  if (!program)
    return fail(llvm::toString(program.takeError()));
  Executor executor(module, options);
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::vector<GreedyStep>> steps =
      greedyDecode(executor, module, *program, prompt, expected.size());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!steps)
    return fail(llvm::toString(steps.takeError()));
  llvm::outs() << "decoded " << steps->size() << " tokens in "
               << llvm::format("%.2f", seconds) << " s ("
               << (program->hasCache() ? "prefill + decode with the KV cache"
                                       : "full-sequence recomputation")
               << ")\n";
  if (!greedyDump.empty()) {
    llvm::json::Array tokens, logits;
    for (const GreedyStep &step : *steps) {
      tokens.push_back(step.token);
      llvm::json::Array row;
      for (float logit : step.logits)
        row.push_back(static_cast<double>(logit));
      logits.push_back(std::move(row));
    }
    std::string text;
    llvm::raw_string_ostream out(text);
    out << llvm::json::Value(llvm::json::Object{{"tokens", std::move(tokens)},
                                                {"logits", std::move(logits)}});
    out.flush();
    std::string error;
    if (!sits::writeFileAtomic(greedyDump, text, &error))
      return fail("cannot write '" + greedyDump + "': " + error);
  }
  std::optional<GreedyMismatch> mismatch = findGreedyMismatch(*steps, expected);
  if (!mismatch) {
    llvm::outs() << "greedy stream matches all " << expected.size()
                 << " tokens\n";
    return 0;
  }
  llvm::outs() << "greedy stream differs at step " << mismatch->step
               << ": token " << mismatch->actualToken << ", expected "
               << mismatch->expectedToken << ", logit margin "
               << llvm::format("%.6f", mismatch->margin) << "\n";
  return 1;
}

/// --prompt: the reference continuation of a text prompt.
static int runPrompt(ModuleOp module, const ExecutorOptions &options) {
  std::string folder = tokenizerFolder;
  if (folder.empty()) {
    folder = llvm::sys::path::parent_path(inputFile).str();
    if (folder.empty())
      folder = ".";
  }
  if (maxNewTokens < 1)
    return fail("--max-new-tokens must be at least 1");
  std::shared_ptr<const sits::ModelTokenizer> tokenizer;
  std::vector<int32_t> prompt;
  try {
    tokenizer = sits::ModelTokenizer::fromFiles(
        sits::ModelTokenizer::readFolder(folder));
    prompt = tokenizer->encode(promptText);
  } catch (const sits::Error &error) {
    return fail(error.what());
  }
  llvm::Expected<Program> program = findProgram(module, functionName);
  if (!program)
    return fail(llvm::toString(program.takeError()));
  Executor executor(module, options);
  llvm::Expected<std::vector<GreedyStep>> steps = greedyDecode(
      executor, module, *program,
      std::vector<int64_t>(prompt.begin(), prompt.end()), maxNewTokens);
  if (!steps)
    return fail(llvm::toString(steps.takeError()));
  // The runtime's rule: a sequence ends with (and includes) an EOS id.
  const std::vector<int32_t> &eos = tokenizer->eosTokenIds();
  sits::TextStream text(tokenizer->tokenizer());
  std::vector<int32_t> tokens;
  for (const GreedyStep &step : *steps) {
    tokens.push_back(static_cast<int32_t>(step.token));
    llvm::outs() << text.push(tokens.back());
    if (llvm::is_contained(eos, tokens.back()))
      break;
  }
  llvm::outs() << text.finish() << "\n";
  auto join = [](llvm::ArrayRef<int32_t> ids) {
    std::string out;
    for (int32_t id : ids)
      out += (out.empty() ? "" : " ") + std::to_string(id);
    return out;
  };
  llvm::errs() << "prompt ids: " << join(prompt) << "\n"
               << "tokens[0]: " << join(tokens) << "\n";
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "sits-exec: run a function with the CPU reference executor\n");

  DialectRegistry registry;
  sits::registerAllDialects(registry);
  MLIRContext context(registry);
  context.allowUnregisteredDialects(allowUnregistered);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module;
  if (llvm::StringRef(inputFile).ends_with(".onnx")) {
    std::optional<sits::Stage> stage = sits::parseStage(stageName);
    if (!stage || *stage == sits::Stage::Cuda || *stage == sits::Stage::Engine)
      return fail("--stage must be imported, sits or optimized, got '" +
                  stageName + "'");
    module = sits::importOnnxFile(inputFile, context);
    if (!module)
      return fail("cannot import '" + inputFile + "'");
    sits::PipelineOptions options;
    pipelineFlags.getOptions(options);
    if (std::optional<std::string> problem =
            sits::validatePipelineOptions(options, *stage))
      return fail(*problem);
    PassManager pm(&context);
    sits::buildPipeline(pm, *stage, options);
    if (failed(pm.run(*module)))
      return fail("compiling '" + inputFile + "' to stage " + stageName +
                  " failed");
  } else {
    module = parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
    if (!module)
      return fail("cannot parse '" + inputFile + "'");
  }

  ExecutorOptions options;
  options.numThreads = numThreads;
  if (!greedyFile.empty())
    return runGreedy(*module, options);
  if (promptText.getNumOccurrences()) {
    // The tokenizer reports bad text or ids as sits::Error; none escapes.
    try {
      return runPrompt(*module, options);
    } catch (const sits::Error &error) {
      return fail(error.what());
    }
  }
  if (!perplexityIds.empty()) {
    llvm::Expected<Tensor> ids = readNpyFile(perplexityIds);
    if (!ids)
      return fail(llvm::toString(ids.takeError()));
    if (ids->isFloat())
      return fail("--perplexity needs integer token ids");
    llvm::Expected<Program> program = findProgram(*module, functionName);
    if (!program)
      return fail(llvm::toString(program.takeError()));
    Executor executor(*module, options);
    std::vector<int64_t> tokens(ids->ints().begin(), ids->ints().end());
    llvm::Expected<PerplexityResult> result = teacherForcedPerplexity(
        executor, *module, *program, tokens, window, maxTokens);
    if (!result)
      return fail(llvm::toString(result.takeError()));
    llvm::outs() << "predicted tokens: " << result->predictedTokens
                 << "\nmean NLL: " << llvm::format("%.6f", result->meanNll)
                 << " nats\nperplexity: "
                 << llvm::format("%.4f", result->perplexity()) << "\n";
    return 0;
  }

  func::FuncOp function;
  if (functionName.empty()) {
    auto functions = module->getOps<func::FuncOp>();
    if (functions.empty())
      return fail("'" + inputFile + "' has no func.func");
    function = *functions.begin();
  } else {
    function = module->lookupSymbol<func::FuncOp>(functionName);
    if (!function)
      return fail("'" + inputFile + "' has no function '" + functionName + "'");
  }

  std::vector<RuntimeValue> args;
  size_t nextInput = 0;
  for (BlockArgument argument : function.getArguments()) {
    if (auto cacheType = dyn_cast<sits::KVCacheType>(argument.getType())) {
      llvm::Expected<KVCacheConfig> config = KVCacheConfig::fromType(cacheType);
      if (!config)
        return fail(llvm::toString(config.takeError()));
      args.push_back(std::make_shared<KVCacheState>(*config));
      continue;
    }
    if (nextInput >= inputs.size())
      return fail("function '" + function.getSymName() + "' takes " +
                  llvm::Twine(function.getNumArguments()) +
                  " arguments; only " + llvm::Twine(inputs.size()) +
                  " --input files were given");
    llvm::Expected<Tensor> tensor = readNpyFile(inputs[nextInput++]);
    if (!tensor)
      return fail(llvm::toString(tensor.takeError()));
    // NumPy has no bf16: a bf16 argument takes f32 data, rounded.
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (type && type.getElementType().isBF16() &&
        tensor->getElementType() == ElementType::F32)
      tensor->setElementTypeAndRound(ElementType::BF16);
    args.push_back(std::move(*tensor));
  }
  if (nextInput != inputs.size())
    return fail(llvm::Twine(inputs.size()) + " --input files given, but '" +
                function.getSymName() + "' takes " + llvm::Twine(nextInput) +
                " tensor arguments");

  Executor executor(*module, options);
  if (trace)
    executor.setObserver(traceOp);
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::vector<RuntimeValue>> results =
      executor.run(function.getSymName(), std::move(args));
  auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!results)
    return fail(llvm::toString(results.takeError()));
  if (printTime)
    llvm::errs() << "sits-exec: ran '" << function.getSymName() << "' in "
                 << llvm::format("%.3f", seconds * 1e3) << " ms\n";

  if (outputDir.empty())
    return 0;
  if (std::error_code code = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create '" + outputDir + "': " + code.message());
  for (size_t i = 0; i < results->size(); ++i)
    if (llvm::Error error = writeResult(outputDir, i, (*results)[i]))
      return fail(llvm::toString(std::move(error)));
  return 0;
}
