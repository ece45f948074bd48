//===- EngineModes.cpp - sitsc modes that make or read engines ------------===//
//
// `-o MODEL.sits` plans the optimized program (backends/cuda), generates
// and compiles its CUDA kernels with NVRTC and writes the engine;
// `--emit=cuda` prints the generated source; `--inspect ENGINE` summarizes
// an engine file.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/EngineBuilder.h"
#include "backends/cuda/Nvrtc.h"
#include "backends/cuda/Plan.h"
#include "compiler/sitsc/Modes.h"
#include "sits/EngineFormat.h"
#include "sits/Json.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace mlir;
namespace cl = llvm::cl;
namespace codegen = sits::codegen;

namespace {
cl::opt<std::string>
    inspectPath("inspect",
                cl::desc("Print a summary of an engine file and exit"),
                cl::value_desc("engine"), cl::cat(sits::sitsc::getCategory()));
cl::opt<bool> inspectVerbose(
    "inspect-verbose",
    cl::desc("With --inspect: also list every buffer, launch and the metadata"),
    cl::init(false), cl::cat(sits::sitsc::getCategory()));
cl::opt<bool> force("force", cl::desc("Replace the engine file if it exists"),
                    cl::init(false), cl::cat(sits::sitsc::getCategory()));
cl::opt<unsigned> writerThreads(
    "threads",
    cl::desc("Threads that read, convert, hash and write the weights "
             "(default 0: one per CPU sitsc may run on)"),
    cl::init(0), cl::cat(sits::sitsc::getCategory()));
cl::opt<std::string> tokenizerFolder(
    "tokenizer",
    cl::desc(
        "Folder of the model's tokenizer.json (with tokenizer_config.json, "
        "chat_template.jinja, generation_config.json when present) to "
        "store in the engine (default: the model's folder, when it holds "
        "a tokenizer.json)"),
    cl::value_desc("dir"), cl::cat(sits::sitsc::getCategory()));
cl::opt<bool> noTokenizer(
    "no-tokenizer",
    cl::desc("Store no tokenizer: the engine takes and returns token ids"),
    cl::init(false), cl::cat(sits::sitsc::getCategory()));

// The code generator's options: declared in backends/cuda/CodegenOptions.td.
#define SITS_CODEGEN_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)      \
  cl::opt<TYPE> FIELD##Flag(NAME, cl::desc(HELP), cl::init(DEFAULT),           \
                            cl::value_desc(VALUE_DESC),                        \
                            cl::cat(sits::sitsc::getCategory()));
#include "backends/cuda/CodegenOptions.inc"

/// The code generator's options as given on the command line.
codegen::CodegenOptionValues getCodegenOptionValues() {
  codegen::CodegenOptionValues values;
#define SITS_CODEGEN_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)      \
  values.FIELD = FIELD##Flag;
#include "backends/cuda/CodegenOptions.inc"
  return values;
}

/// The code generator's options given on the command line, by name.
std::set<std::string> getGivenCodegenOptions() {
  std::set<std::string> given;
#define SITS_CODEGEN_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)      \
  if (FIELD##Flag.getNumOccurrences())                                         \
    given.insert(NAME);
#include "backends/cuda/CodegenOptions.inc"
  return given;
}

} // namespace

/// The code generation options from the command line (already validated).
codegen::CodegenOptions sits::sitsc::getCodegenOptions() {
  std::string error;
  return *codegen::parseCodegenOptions(getCodegenOptionValues(), &error,
                                       getGivenCodegenOptions());
}

namespace {

std::string humanBytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / double(1ull << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%llu B", (unsigned long long)bytes);
  return text;
}

/// The model's name: its folder for `.../name/model.onnx`, else the stem.
std::string modelNameOf(llvm::StringRef path) {
  llvm::StringRef stem = llvm::sys::path::stem(path);
  llvm::StringRef folder =
      llvm::sys::path::filename(llvm::sys::path::parent_path(path));
  if (stem == "model" && !folder.empty() && folder != "." && folder != "..")
    return folder.str();
  return stem.str();
}

/// The tokenizer to store: --tokenizer's folder, else the model's folder
/// when it holds a tokenizer.json, else none. Validated here (every file, the
/// chat template) and against the model's vocabulary, so that a bad file is
/// a compile-time error naming it.
FailureOr<std::shared_ptr<const sits::ModelTokenizer>>
loadTokenizer(llvm::StringRef modelPath, uint32_t modelVocab) {
  if (noTokenizer)
    return std::shared_ptr<const sits::ModelTokenizer>();
  std::string folder = tokenizerFolder;
  if (folder.empty()) {
    llvm::SmallString<256> beside = llvm::sys::path::parent_path(modelPath);
    if (beside.empty())
      beside = ".";
    llvm::sys::path::append(beside, "tokenizer.json");
    if (!llvm::sys::fs::exists(beside))
      return std::shared_ptr<const sits::ModelTokenizer>();
    folder = llvm::sys::path::parent_path(beside).str();
  }
  try {
    auto tokenizer = sits::ModelTokenizer::fromFiles(
        sits::ModelTokenizer::readFolder(folder));
    if (tokenizer->vocabSize() > modelVocab) {
      sits::sitsc::fail("the tokenizer in '" + folder + "' has " +
                        std::to_string(tokenizer->vocabSize()) +
                        " tokens, more than the model's vocabulary of " +
                        std::to_string(modelVocab) +
                        " (use --tokenizer=DIR for the right one, or "
                        "--no-tokenizer)");
      return failure();
    }
    return tokenizer;
  } catch (const sits::Error &error) {
    sits::sitsc::fail("tokenizer in '" + folder + "': " + error.what());
    return failure();
  }
}

/// Plans `module`, reporting failures through the MLIR diagnostics.
FailureOr<codegen::EnginePlan> plan(ModuleOp module,
                                    const codegen::CodegenOptions &options) {
  return codegen::planEngine(module, options);
}

/// The workspace lines of --inspect, from the metadata (absent in engines
/// written by other tools).
std::string describeWorkspace(const std::string &metadata) {
  sits::json::Value root;
  std::string error;
  if (!sits::json::parse(metadata, &root, &error))
    return "";
  const sits::json::Value *workspace = root.find("workspace");
  if (!workspace || !workspace->isObject())
    return "";
  auto number = [](const sits::json::Value *object, const char *key) {
    const sits::json::Value *value = object ? object->find(key) : nullptr;
    return value && value->isInteger()
               ? static_cast<uint64_t>(value->getInteger())
               : uint64_t(0);
  };
  uint64_t bytes = number(workspace, "bytes");
  uint64_t unshared = number(workspace, "unshared_bytes");
  std::string out = "workspace: " + humanBytes(bytes) + " for all activations";
  if (bytes)
    out += " (" + humanBytes(unshared) + " without reuse, " +
           llvm::formatv("{0:F1}", double(unshared) / double(bytes)).str() +
           "x less)";
  out += "\n";
  for (const char *program :
       {sits::format::kPrefillProgram, sits::format::kDecodeProgram,
        sits::format::kFewRowPrefillProgram}) {
    const sits::json::Value *entry = workspace->find(program);
    if (!entry)
      continue;
    out += std::string("  ") + program + ": " +
           std::to_string(number(entry, "values")) + " values, peak " +
           humanBytes(number(entry, "peak_bytes")) + " at " +
           std::to_string(number(entry, "max_tokens")) + " tokens\n";
  }
  return out;
}

/// The TVC head's line of --inspect (engines compiled with --tvc=exact).
std::string describeTvc(const std::string &metadata) {
  sits::json::Value root;
  std::string error;
  if (!sits::json::parse(metadata, &root, &error))
    return "";
  const sits::json::Value *tvc = root.find("tvc");
  if (!tvc || !tvc->isObject())
    return "";
  auto number = [&](const char *key) {
    const sits::json::Value *value = tvc->find(key);
    return value && value->isInteger()
               ? static_cast<uint64_t>(value->getInteger())
               : uint64_t(0);
  };
  return "tvc lm head: rank " + std::to_string(number("rank")) + ", " +
         std::to_string(number("candidates")) +
         " candidates, exact for greedy and top-k <= " +
         std::to_string(number("exact_top")) + "; preview " +
         humanBytes(number("preview_bytes")) + ", scratch " +
         humanBytes(number("scratch_bytes")) + ", counters in '" +
         (tvc->find("counters") ? tvc->find("counters")->getString() : "") +
         "'\n";
}

} // namespace

std::optional<std::string> sits::sitsc::getInspectPath() {
  if (inspectPath.empty())
    return std::nullopt;
  return inspectPath.getValue();
}

int sits::sitsc::inspectEngine(llvm::StringRef path) {
  std::string error;
  std::unique_ptr<format::EngineFile> file =
      format::EngineFile::open(path.str(), &error);
  if (!file)
    return fail(error);
  format::Header header;
  format::EngineContents contents;
  format::RuntimeConfig config;
  if (!format::readEngine(*file, format::ReadOptions(), &header, &contents,
                          &config, &error))
    return fail(path + ": " + error);
  llvm::outs() << path << ":\n"
               << format::describeEngine(header, contents, config,
                                         inspectVerbose)
               << describeWorkspace(contents.metadataJson)
               << describeTvc(contents.metadataJson);
  if (!contents.tokenizerFiles.empty()) {
    sits::TokenizerFiles files;
    for (const format::TextFile &file : contents.tokenizerFiles)
      files[file.name] = file.content;
    try {
      llvm::outs() << sits::ModelTokenizer::fromFiles(files)->describe();
    } catch (const sits::Error &error) {
      return fail(path + ": tokenizer section: " + error.what());
    }
  }
  return 0;
}

std::optional<std::string> sits::sitsc::validateEngineOptions() {
  std::string error;
  if (!codegen::parseCodegenOptions(getCodegenOptionValues(), &error,
                                    getGivenCodegenOptions()))
    return error;
  if (noTokenizer && !tokenizerFolder.empty())
    return "give at most one of --tokenizer and --no-tokenizer";
  if (!tokenizerFolder.empty() &&
      !llvm::sys::fs::is_directory(tokenizerFolder.getValue()))
    return "--tokenizer: '" + tokenizerFolder + "' is not a directory";
  return std::nullopt;
}

int sits::sitsc::emitCuda(ModuleOp module, llvm::raw_ostream &os) {
  FailureOr<codegen::EnginePlan> planned = plan(module, getCodegenOptions());
  if (failed(planned))
    return 1;
  os << codegen::emitCudaSource(*planned, "the optimized program");
  return 0;
}

/// The summary's line on int8/int4 weights (empty without them): the
/// levels, the scales, and what the same matrices take in fp16.
static std::string describeQuantizedWeights(const codegen::EnginePlan &plan) {
  uint64_t levels = 0, scales = 0, matrices = 0, fp16 = 0;
  const char *kind = "";
  std::set<std::string> scaleNames;
  for (const codegen::WeightPlan &weight : plan.weights)
    if (weight.type == sits::format::DType::I8 ||
        weight.type == sits::format::DType::I4X2) {
      kind = weight.type == sits::format::DType::I8 ? "int8" : "int4";
      levels += weight.bytes;
      ++matrices;
      std::string base = weight.name.substr(0, weight.name.rfind('.'));
      scaleNames.insert(base + ".scales");
      int64_t perRow =
          weight.shape[1] * (weight.type == sits::format::DType::I8 ? 1 : 2);
      fp16 += static_cast<uint64_t>(weight.shape[0]) * perRow * 2;
    }
  if (!matrices)
    return "";
  for (const codegen::WeightPlan &weight : plan.weights)
    if (scaleNames.count(weight.name))
      scales += weight.bytes;
  return "  quantized   " + std::to_string(matrices) + " matrices " + kind +
         ": " + humanBytes(levels) + " of levels + " + humanBytes(scales) +
         " of f16 scales (fp16: about " + humanBytes(fp16) + ")\n";
}

int sits::sitsc::writeEngine(ModuleOp module, llvm::StringRef inputPath,
                             llvm::StringRef outputPath,
                             const PipelineOptions &options,
                             llvm::ArrayRef<int32_t> configEosIds,
                             TimingScope &timing) {
  // Refuse early: compiling the kernels takes seconds.
  if (!force && llvm::sys::fs::exists(outputPath))
    return fail("'" + outputPath +
                "' already exists (use --force to replace it)");
  llvm::StringRef folder = llvm::sys::path::parent_path(outputPath);
  if (!folder.empty() && !llvm::sys::fs::is_directory(folder))
    return fail("cannot write '" + outputPath + "': the folder '" + folder +
                "' does not exist");
  codegen::CodegenOptions codegenOptions = getCodegenOptions();
  TimingScope planTimer = timing.nest("plan");
  FailureOr<codegen::EnginePlan> planned = plan(module, codegenOptions);
  planTimer.stop();
  if (failed(planned))
    return 1;

  codegen::EngineSource source;
  FailureOr<std::shared_ptr<const sits::ModelTokenizer>> tokenizer =
      loadTokenizer(inputPath, static_cast<uint32_t>(planned->model.vocab));
  if (failed(tokenizer))
    return 1;
  source.tokenizer = *tokenizer;
  source.configEosIds.assign(configEosIds.begin(), configEosIds.end());
  source.modelName = modelNameOf(inputPath);
  source.path = llvm::sys::path::filename(inputPath).str();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> input =
      llvm::MemoryBuffer::getFile(inputPath, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!input)
    return fail("cannot read '" + inputPath +
                "' to hash it: " + input.getError().message());
  TimingScope hashTimer = timing.nest("hash the source model");
  source.sha256 =
      format::sha256((*input)->getBufferStart(), (*input)->getBufferSize());
  hashTimer.stop();
  // The options given, each but the first ones only when not the default.
  codegen::CodegenOptionValues given = getCodegenOptionValues();
  const codegen::CodegenOptionValues defaults;
  source.sitscOptions =
      "--target=" + codegenOptions.target.getName() +
      " --dtype=" + codegen::weightTypeName(codegenOptions.weightType) +
      " --max-seq-len=" + std::to_string(options.maxSeqLen) +
      " --max-batch=" + std::to_string(options.maxBatch) +
      " --max-prefill-tokens=" +
      std::to_string(planned->model.maxPrefillTokens) +
      (given.batchBuckets.empty() ? ""
                                  : " --batch-buckets=" + given.batchBuckets) +
      (given.normFusion ? " --norm-fusion" : "") +
      (given.halfOperands ? std::string() : " --half-operands=false") +
      (given.gemvQuantTiles != defaults.gemvQuantTiles
           ? " --gemv-quant-tiles=" + std::to_string(given.gemvQuantTiles)
           : std::string()) +
      (given.gemvTokenGroups != defaults.gemvTokenGroups
           ? " --gemv-token-groups=" + std::to_string(given.gemvTokenGroups)
           : std::string()) +
      (given.gemmKSplits != defaults.gemmKSplits
           ? " --gemm-k-splits=" + std::to_string(given.gemmKSplits)
           : std::string()) +
      (given.decodeSplitKeys != defaults.decodeSplitKeys
           ? " --decode-split-keys=" + std::to_string(given.decodeSplitKeys)
           : std::string()) +
      (planned->persistentDecode
           ? " --decode-kernels=persistent --persistent-blocks=" +
                 std::to_string(planned->persistentDecode->blocks)
           : std::string()) +
      (planned->kvCache.paged()
           ? " --kv-layout=paged --kv-block-tokens=" +
                 std::to_string(planned->kvCache.blockTokens) +
                 " --kv-pool-blocks=" + std::to_string(planned->kvCache.blocks)
           : std::string()) +
      (options.weights == "fp16"
           ? ""
           : " --weights=" + options.weights.getValue() + " --weight-group=" +
                 std::to_string(options.weightGroup.getValue()));

  llvm::Expected<uint32_t> version = codegen::getNvrtcVersion();
  if (!version)
    return fail(llvm::toString(version.takeError()));
  source.cudaVersion = *version;
  TimingScope nvrtcTimer = timing.nest("generate and compile the kernels");
  std::string cuda = codegen::emitCudaSource(*planned, source.modelName);
  llvm::Expected<codegen::CompiledModule> compiled = codegen::compileWithNvrtc(
      cuda, source.modelName + ".cu", codegenOptions.target);
  nvrtcTimer.stop();
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  // The persistent decode kernels: the same source's second translation
  // unit, a module of its own (the runtime loads it once per session).
  std::optional<codegen::CompiledModule> persistent;
  if (planned->persistentDecode) {
    TimingScope persistentTimer = timing.nest("compile the persistent kernels");
    llvm::Expected<codegen::CompiledModule> second = codegen::compileWithNvrtc(
        cuda, source.modelName + ".cu", codegenOptions.target,
        {"-DSITS_PERSISTENT_DECODE"});
    if (!second)
      return fail("--decode-kernels=persistent: " +
                  llvm::toString(second.takeError()));
    persistent = std::move(*second);
  }

  TimingScope buildTimer = timing.nest("build the engine");
  llvm::Expected<format::StreamedEngine> engine = codegen::buildEngine(
      *planned, std::move(*compiled), source, std::move(persistent));
  buildTimer.stop();
  if (!engine)
    return fail(llvm::toString(engine.takeError()));
  format::WriteOptions writeOptions;
  writeOptions.force = force;
  std::string error;
  // The weights are read, converted, hashed and written here, in parallel.
  TimingScope writeTimer = timing.nest("write the engine");
  if (!format::writeStreamedEngine(*engine, outputPath.str(), writeOptions,
                                   writerThreads, &error))
    return fail(error);
  writeTimer.stop();

  const codegen::EnginePlan &p = *planned;
  const codegen::ModelConfig &m = p.model;
  uint64_t fileBytes = 0;
  llvm::sys::fs::file_size(outputPath, fileBytes);
  double perToken =
      2.0 * m.layers * m.kvHeads * m.headDim * format::dtypeBytes(m.cacheType);
  uint64_t cacheBytes = 2 * p.cacheBufferBytes;
  std::string cacheKind = format::dtypeName(m.cacheType);
  if (const format::KVCacheConfig &kv = p.kvCache; kv.coldBits) {
    perToken = kv.bytesPerToken();
    cacheBytes = kv.bufferBytes(true) + kv.bufferBytes(false);
    cacheKind = "int" + std::to_string(kv.coldBits) + " + " +
                format::dtypeName(kv.dtype) + " hot ring of " +
                std::to_string(kv.hotRows) + " rows";
  }
  llvm::outs() << "sitsc: wrote " << outputPath << " (" << humanBytes(fileBytes)
               << ") for " << codegenOptions.target.getName() << ", "
               << codegen::weightTypeName(codegenOptions.weightType)
               << " weights\n"
               << "  kernels     " << p.kernels.size() << " ("
               << codegen::describeLaunches(p) << ")\n"
               << "  weights     " << humanBytes(engine->weightBytes) << " in "
               << p.weights.size() << " tensors\n"
               << describeQuantizedWeights(p) << "  kv cache    "
               << humanBytes(uint64_t(perToken + 0.5)) << " per token, "
               << humanBytes(cacheBytes)
               << (p.kvCache.paged()
                       ? " in " + std::to_string(p.kvCache.blocks) +
                             " blocks of " +
                             std::to_string(p.kvCache.blockTokens) +
                             " tokens for " + std::to_string(m.maxBatch) +
                             " sequences of up to " +
                             std::to_string(m.maxSeqLen) + " tokens (paged, "
                       : " for " + std::to_string(m.maxBatch) + " x " +
                             std::to_string(m.maxSeqLen) + " tokens (")
               << cacheKind << ")\n"
               << "  workspace   " << humanBytes(p.workspaceBytes) << " ("
               << humanBytes(p.unsharedBytes) << " without reuse)\n";
  if (const sits::ModelTokenizer *text = source.tokenizer.get())
    llvm::outs() << "  tokenizer   " << text->kind() << ", "
                 << text->vocabSize() << " tokens, "
                 << (text->hasChatTemplate() ? "with" : "no")
                 << " chat template\n";
  if (p.tvc)
    llvm::outs() << "  tvc head    rank " << p.tvc->rank << ", "
                 << p.tvc->candidates << " candidates, exact top "
                 << p.tvc->exactTop << ", preview "
                 << humanBytes(p.tvc->previewBytes) << " (f32; bounds of the "
                 << codegen::weightTypeName(codegenOptions.weightType)
                 << " head)\n";
  return 0;
}
