//===- sitsc.cpp - The sits compiler driver -------------------------------===//
//
// sitsc MODEL.onnx -o MODEL.sits [options]
//
// Imports an ONNX decoder model, raises it into the sits dialect, runs the
// decode passes, and writes the engine; --emit=<stage> stops after a stage and
// prints its IR instead.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/transforms/Passes.h"
#include "compiler/pipeline/AtomicOutput.h"
#include "compiler/pipeline/GenAIConfig.h"
#include "compiler/pipeline/IRDumper.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/registration/Registration.h"
#include "compiler/sitsc/Modes.h"
#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/Audit.h"
#include "sits/AtomicFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
using namespace sits;
namespace cl = llvm::cl;

cl::OptionCategory &sits::sitsc::getCategory() {
  static cl::OptionCategory category("sitsc options");
  return category;
}

int sits::sitsc::fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "sitsc") << message << "\n";
  return 1;
}

namespace {

using sits::sitsc::fail;
cl::OptionCategory &sitscCategory = sits::sitsc::getCategory();

cl::opt<std::string> inputPath(cl::Positional,
                               cl::desc("<model.onnx | program.mlir>"),
                               cl::cat(sitscCategory));
cl::opt<std::string>
    outputPath("o", cl::desc("Output file: the engine, or the IR with --emit"),
               cl::value_desc("file"), cl::cat(sitscCategory));
cl::opt<std::string> emitStage(
    "emit",
    cl::desc("Stop after a stage and print it: imported, sits, optimized "
             "(IR) or cuda (the generated CUDA C++)"),
    cl::value_desc("stage"), cl::cat(sitscCategory));
cl::opt<std::string> dumpIRDir(
    "dump-ir-dir",
    cl::desc("Write the IR after every pass into DIR, one numbered file each"),
    cl::value_desc("dir"), cl::cat(sitscCategory));
cl::opt<std::string> auditPath(
    "audit",
    cl::desc("Write the audit report (JSON) to FILE; '-' prints a summary"),
    cl::value_desc("file"), cl::cat(sitscCategory));
cl::opt<bool> printWeights(
    "print-weights",
    cl::desc("Print weight values in IR output (elided by default)"),
    cl::init(false), cl::cat(sitscCategory));
// --max-seq-len, --weights, --tvc, ...: the pipeline's options, declared
// once in passes/PipelineOptions.td.
PipelineFlags pipelineFlags(sitscCategory);

/// Imports an ONNX model, or parses MLIR (any stage's output) for `.mlir`.
OwningOpRef<ModuleOp> loadInput(llvm::StringRef path, MLIRContext &context,
                                llvm::SourceMgr &sourceMgr) {
  if (!path.ends_with(".mlir"))
    return importOnnxFile(path, context);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(path, &error);
  if (!buffer) {
    emitError(UnknownLoc::get(&context))
        << "cannot read '" << path << "': " << error;
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

OpPrintingFlags getPrintingFlags() {
  OpPrintingFlags flags;
  if (!printWeights)
    flags.elideLargeElementsAttrs(16).elideLargeResourceString(64);
  return flags;
}

/// Writes the audit report: JSON to a file, or a summary for '-'.
int writeAudit(MLIRContext &context) {
  const AuditLog &log = AuditLog::get(&context);
  if (auditPath == "-") {
    log.printSummary(llvm::outs());
    return 0;
  }
  llvm::Error error =
      writeOutputAtomically(auditPath, [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", log.toJSON()) << "\n";
        return llvm::Error::success();
      });
  if (error)
    return fail("cannot write --audit file: " +
                llvm::toString(std::move(error)));
  return 0;
}

std::string humanBytes(double bytes) {
  if (bytes >= double(1ull << 30))
    return llvm::formatv("{0:f2} GiB", bytes / double(1ull << 30)).str();
  if (bytes >= double(1ull << 20))
    return llvm::formatv("{0:f2} MiB", bytes / double(1ull << 20)).str();
  if (bytes >= 1024)
    return llvm::formatv("{0:f1} KiB", bytes / 1024).str();
  return llvm::formatv("{0} B", static_cast<uint64_t>(bytes)).str();
}

} // namespace

void sits::sitsc::printKVCacheSummary(ModuleOp module, llvm::raw_ostream &os) {
  KVCacheType cache;
  for (auto func : module.getOps<func::FuncOp>())
    for (Type input : func.getArgumentTypes())
      if (auto type = dyn_cast<KVCacheType>(input))
        cache = type;
  if (!cache)
    return;
  if (int64_t ranks = getTensorParallelRanks(module); ranks > 1)
    os << "sitsc: kv cache: sizes per rank (" << ranks
       << " ranks, each holding its kv heads)\n";
  KVQuantAttr quant = cache.getQuant();
  // Unquantized, the engine stores the cache in --dtype (fp16 by default):
  // the reference point for what quantization saves.
  uint64_t layers = cache.getLayers();
  uint64_t fp16PerToken = 2ull * cache.getKvHeads() * cache.getHeadDim() * 2;
  uint64_t tokens = uint64_t(cache.getMaxBatch()) * cache.getCapacity();
  if (!quant) {
    os << "sitsc: kv cache: " << humanBytes(double(fp16PerToken * layers))
       << " per token in fp16 (" << layers << " layers), "
       << humanBytes(double(fp16PerToken * layers * tokens)) << " for "
       << cache.getMaxBatch() << " x " << cache.getCapacity() << " tokens\n";
    return;
  }
  double perToken = double(cache.getBytesPerTokenPerLayer()) * layers;
  std::string keys =
      quant.hasPerChannelKeys()
          ? llvm::formatv("keys per channel in blocks of {0} tokens",
                          quant.getChannelBlock())
                .str()
          : llvm::formatv("keys per token in groups of {0}",
                          quant.getGroupSize())
                .str();
  os << "sitsc: kv cache: int" << quant.getBits() << " cold part (" << keys
     << ", values per token in groups of " << quant.getGroupSize() << ", "
     << quant.getScaleType() << " scales) + " << cache.getElementType()
     << " hot window of " << quant.getHotWindow() << " tokens\n"
     << "sitsc: kv cache: " << humanBytes(perToken) << " per token (" << layers
     << " layers; fp16: " << humanBytes(double(fp16PerToken * layers)) << ", "
     << llvm::formatv("{0:f2}", double(fp16PerToken * layers) / perToken)
     << "x more), hot windows " << humanBytes(double(cache.getHotWindowBytes()))
     << ", " << humanBytes(double(cache.getTotalBytes())) << " in all for "
     << cache.getMaxBatch() << " x " << cache.getCapacity()
     << " tokens (fp16: " << humanBytes(double(fp16PerToken * layers * tokens))
     << ")\n";
}

/// A sits.dequantize of constants read only as linear/LM-head weights:
/// codegen's quantized GEMV reads it (backends/cuda/PlanQuant.cpp).
static bool isQuantizedGemvWeight(Operation *op) {
  auto dequantize = dyn_cast<DequantizeOp>(op);
  if (!dequantize || !dequantize.getData().getDefiningOp<WeightOp>() ||
      !dequantize.getScales().getDefiningOp<WeightOp>())
    return false;
  return llvm::all_of(dequantize->getUses(), [](OpOperand &use) {
    if (auto linear = dyn_cast<LinearOp>(use.getOwner()))
      return &use == &linear.getWeightMutable();
    if (auto head = dyn_cast<LMHeadOp>(use.getOwner()))
      return &use == &head.getWeightMutable();
    return false;
  });
}

/// A quantized KV cache's cold copy: sits.dequantize(sits.quantize(a
/// kv_cache.read result)) that only attention's cold operands read (the
/// engine keeps it in the cache, docs/codegen.md).
static bool isKVColdCopy(Operation *op) {
  auto dequantize = dyn_cast<DequantizeOp>(op);
  if (auto quantize = dyn_cast<QuantizeOp>(op)) {
    if (!quantize.getInput().getDefiningOp<KVReadOp>())
      return false;
    return llvm::all_of(quantize->getUsers(), [](Operation *user) {
      return isa<DequantizeOp>(user) && isKVColdCopy(user);
    });
  }
  if (!dequantize)
    return false;
  auto quantize = dequantize.getData().getDefiningOp<QuantizeOp>();
  if (!quantize || !quantize.getInput().getDefiningOp<KVReadOp>())
    return false;
  return llvm::all_of(dequantize->getUsers(), [&](Operation *user) {
    auto attention = dyn_cast<AttentionOp>(user);
    return attention && attention.getKey() != dequantize.getResult() &&
           attention.getValue() != dequantize.getResult() &&
           attention.getQuery() != dequantize.getResult();
  });
}

LogicalResult sits::sitsc::checkOneRank(ModuleOp module) {
  constexpr llvm::StringLiteral why =
      "the CUDA backend does not run tensor-parallel programs yet; "
      "--emit=optimized and --audit show the program";
  WalkResult result = module.walk([&](Operation *op) {
    auto embedding = dyn_cast<EmbeddingOp>(op);
    bool part =
        embedding && (embedding.getVocabShardAttr() ||
                      embedding.getRowOffset() != 0 || embedding.getVocab());
    if (!part && !isa<ShardOp, AllReduceOp, AllGatherOp>(op))
      return WalkResult::advance();
    op->emitError() << "sitsc: '" << op->getName() << "' "
                    << (part ? "of part of the vocabulary " : "")
                    << "has no GPU kernel: " << why;
    return WalkResult::interrupt();
  });
  if (result.wasInterrupted())
    return failure();
  if (getTensorParallelRanks(module) != 1)
    return module.emitError()
           << "sitsc: the program is for " << getTensorParallelRanks(module)
           << " ranks (" << kTensorParallelAttrName << "): " << why;
  return success();
}

LogicalResult sits::sitsc::checkGpuKernelsExist(ModuleOp module) {
  if (failed(checkOneRank(module)))
    return failure();
  // The TVC head has GPU kernels (codegen/TvcPlan.cpp) over unquantized
  // weights only.
  WalkResult tvc = module.walk([&](TVCLMHeadOp op) {
    if (!op.getWeight().getDefiningOp<DequantizeOp>())
      return WalkResult::advance();
    op->emitError() << "sitsc: 'sits.tvc_lm_head' over quantized weights has "
                       "no GPU kernel yet (the GPU TVC head reads fp32, fp16 "
                       "or bf16 weights); compile the engine with --tvc=off "
                       "or without --weights";
    return WalkResult::interrupt();
  });
  if (tvc.wasInterrupted())
    return failure();
  // Quantized values have kernels where codegen reads them: as the weights
  // of linear layers and LM heads, and as a KV cache's cold copies.
  WalkResult result = module.walk([&](Operation *op) {
    if (!isa<QuantizeOp, DequantizeOp>(op) || isQuantizedGemvWeight(op) ||
        isKVColdCopy(op))
      return WalkResult::advance();
    op->emitError() << "sitsc: '" << op->getName()
                    << "' has no GPU kernel here (engines read quantized "
                       "values only as the weights of linear layers and LM "
                       "heads and as a quantized KV cache's cold part; the "
                       "CPU reference executor runs it: --verify, "
                       "--verify-greedy, --reference-perplexity)";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

int main(int argc, char **argv) {
  // NVRTC's own SIGINT/SIGTERM handler can deadlock sitsc (see the
  // function): signals end it from a thread instead.
  sits::terminateOnSignalsFromAThread();
  llvm::InitLLVM initLLVM(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions({&sitscCategory});
  // The MLIR options are hidden by the line above but still parsed; list the
  // ones users ask for in the overview.
  cl::ParseCommandLineOptions(
      argc, argv,
      "sits compiler: ONNX decoder model -> optimized sits program -> "
      "engine\n\n"
      "  sitsc MODEL.onnx -o MODEL.sits [options]\n"
      "  sitsc MODEL.onnx --emit=sits          print the raised IR\n"
      "  sitsc MODEL.onnx --inspect=E.sits     summarize an engine\n\n"
      "Checks on the CPU reference executor (no GPU needed):\n"
      "  sitsc MODEL.onnx --verify=DIR "
      "[--verify-stage=imported,sits,optimized]\n"
      "      run DIR/input_*.pb, compare with DIR/output_*.pb: token ids ->\n"
      "      logits (max abs and relative error, argmax agreement per\n"
      "      position; fails past --verify-tolerance), any other graph\n"
      "      output by output (--verify-rtol, --verify-atol)\n"
      "  sitsc MODEL.onnx --verify-greedy=greedy.json\n"
      "      prefill the prompt, decode token by token through the KV cache,\n"
      "      compare the greedy stream (step, tokens and margin on a "
      "mismatch)\n"
      "  sitsc MODEL.onnx --reference-perplexity=TEXT_OR_IDS [--max-tokens N]\n"
      "      teacher-forced NLL and perplexity (bytes for a 256-token\n"
      "      vocabulary, else a file of token ids)\n"
      "  sitsc MODEL.onnx --tvc=exact --tvc-fallback-rate=TEXT_OR_IDS\n"
      "      how often the TVC head's proof holds over a text's positions\n\n"
      "Quantization (docs/quantization.md): --weights=int8|int4 "
      "[--weight-group=N],\n--kv-cache=int8|int4 [--kv-hot-window=N], "
      "--tvc=exact [--tvc-rank=R]\n[--tvc-candidates=K] [--tvc-top-k=k]; "
      "int8/int4 weights compile into engines, the\nKV cache and TVC are "
      "checked on the CPU for now.\n\n"
      "Tensor parallelism: --tensor-parallel=N splits the optimized program "
      "over N\nranks (--emit=optimized, --audit, the CPU checks); no engine "
      "runs it yet.\n\n"
      "Stages: imported (one op per ONNX node), sits (idioms raised), "
      "optimized\n(RoPE tables hoisted, causal masks folded, prefill/decode "
      "with a KV cache).\n\n"
      "Standard MLIR options also work: --mlir-print-ir-after-all, "
      "--mlir-timing,\n--mlir-pass-pipeline-crash-reproducer=FILE, "
      "--mlir-elide-elementsattrs-if-larger=N.\n");

  if (std::optional<std::string> engine = sitsc::getInspectPath())
    return sitsc::inspectEngine(*engine);
  if (inputPath.empty())
    return fail("no input model given (usage: sitsc MODEL.onnx -o OUT)");

  Stage last = Stage::Engine;
  if (!emitStage.empty()) {
    std::optional<Stage> stage = parseStage(emitStage);
    if (!stage || *stage == Stage::Engine)
      return fail("--emit must be imported, sits, optimized, kernels or "
                  "cuda, got '" +
                  emitStage + "'");
    last = *stage;
  }
  bool verifying = sitsc::isVerifyRequested();
  if (verifying) {
    if (!emitStage.empty())
      return fail("--emit cannot be combined with --verify, --verify-greedy "
                  "or --reference-perplexity");
    if (std::optional<std::string> error = sitsc::validateVerifyOptions(last))
      return fail(*error);
  }
  if (last == Stage::Engine && outputPath.empty())
    return fail("no output given: -o MODEL.sits writes the engine, "
                "--emit=<stage> prints a stage");
  if (std::optional<std::string> error = sitsc::validateEngineOptions())
    return fail(*error);

  PipelineOptions options;
  pipelineFlags.getOptions(options);
  if (std::optional<std::string> error = validatePipelineOptions(options, last))
    return fail(*error);
  // A GenAI builder model's genai_config.json bounds the sequence length and
  // adds the EOS ids.
  std::optional<GenAIConfig> genaiConfig;
  std::string contextNote;
  if (!llvm::StringRef(inputPath).ends_with(".mlir")) {
    llvm::Expected<std::optional<GenAIConfig>> read =
        readGenAIConfig(inputPath);
    if (!read)
      return fail(llvm::toString(read.takeError()));
    genaiConfig = std::move(*read);
  }
  if (genaiConfig) {
    llvm::Expected<std::string> note = applyContextLength(
        *genaiConfig, pipelineFlags.maxSeqLen.getNumOccurrences() > 0, options);
    if (!note)
      return fail(llvm::toString(note.takeError()));
    contextNote = std::move(*note);
  }

  // --mlir-timing reports the import and the engine writing beside the
  // passes: with large weights they take most of the time.
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope rootTimer = timing.getRootScope();

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  // An error is a line for the user, not an IR dump of the op it is about
  // (which for a module is the whole program);
  // --mlir-print-op-on-diagnostic asks for it.
  cl::Option *printOp =
      cl::getRegisteredOptions().lookup("mlir-print-op-on-diagnostic");
  if (!printOp || !printOp->getNumOccurrences())
    context.printOpOnDiagnostic(false);
  // Ops imported from ONNX are located by their node's name alone, which
  // prints as `<unknown>:0:`: report them at the model file, as the
  // importer's own errors are, keeping the node's name in the message.
  Location inputLoc = FileLineColLoc::get(&context, inputPath, 0, 0);
  ScopedDiagnosticHandler atInputFile(&context, [&](Diagnostic &diag) {
    auto emit = [&](Diagnostic &one) {
      Location loc = one.getLocation();
      if (loc->findInstanceOf<FileLineColLoc>())
        return diagnostics.emitDiagnostic(loc, one.str(), one.getSeverity());
      std::string text;
      llvm::raw_string_ostream os(text);
      if (!isa<UnknownLoc>(loc))
        os << loc << ": ";
      os << one.str();
      diagnostics.emitDiagnostic(inputLoc, text, one.getSeverity());
    };
    emit(diag);
    for (Diagnostic &note : diag.getNotes())
      emit(note);
    return success();
  });

  TimingScope importTimer = rootTimer.nest("import");
  OwningOpRef<ModuleOp> module = loadInput(inputPath, context, sourceMgr);
  importTimer.stop();
  if (!module)
    return 1;
  int verifyStatus =
      verifying ? sitsc::verifyEarlierStages(*module, options) : 0;

  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("invalid pass manager options");
  TimingScope pipelineTimer = rootTimer.nest("pipeline");
  pm.enableTiming(pipelineTimer);
  pm.addInstrumentation(std::make_unique<AuditInstrumentation>());
  IRDumper *dumper = nullptr;
  if (!dumpIRDir.empty()) {
    auto created = IRDumper::create(dumpIRDir, getPrintingFlags());
    if (!created)
      return fail(llvm::toString(created.takeError()));
    dumper = created->get();
    if (llvm::Error error = dumper->dumpInitial(*module, "input"))
      return fail(llvm::toString(std::move(error)));
    pm.addInstrumentation(std::move(*created));
  }
  bool toKernels =
      last == Stage::Kernels || last == Stage::Cuda || last == Stage::Engine;
  // Before the kernel passes, which do not know the collectives.
  if (toKernels && !verifying && failed(sitsc::checkOneRank(*module)))
    return 1;
  buildPipeline(pm, toKernels ? Stage::Optimized : last, options);
  if (toKernels && !verifying)
    kernel::buildKernelPipeline(pm, sitsc::getCodegenOptions());
  if (failed(pm.run(*module)))
    return 1;
  pipelineTimer.stop();
  if (dumper)
    if (llvm::Error error = dumper->takeError())
      return fail(llvm::toString(std::move(error)));
  if (!auditPath.empty())
    if (int code = writeAudit(context))
      return code;

  // The KV-cache sizes the options imply, where stdout is not the IR.
  bool irOnStdout = last != Stage::Engine && !verifying &&
                    (outputPath.empty() || outputPath == "-");
  if (!irOnStdout) {
    if (!contextNote.empty())
      llvm::outs() << "sitsc: " << contextNote << "\n";
    sitsc::printKVCacheSummary(*module, llvm::outs());
  }
  if (verifying)
    return verifyStatus | sitsc::runVerifyModes(*module, last);
  if (last == Stage::Engine) {
    if (failed(sitsc::checkGpuKernelsExist(*module)))
      return 1;
    return sitsc::writeEngine(*module, inputPath, outputPath, options,
                              genaiConfig ? genaiConfig->eosTokenIds
                                          : std::vector<int32_t>(),
                              rootTimer);
  }

  if (last == Stage::Cuda && failed(sitsc::checkGpuKernelsExist(*module)))
    return 1;
  int code = 0;
  llvm::Error error = writeOutputAtomically(
      outputPath.empty() ? std::string("-") : outputPath.getValue(),
      [&](llvm::raw_ostream &os) {
        if (last == Stage::Cuda) {
          code = sitsc::emitCuda(*module, os);
        } else {
          module->print(os, getPrintingFlags());
          os << "\n";
        }
        // emitCuda has reported its failure: no file is written.
        return code ? llvm::createStringError("emitting CUDA failed")
                    : llvm::Error::success();
      });
  if (code) {
    llvm::consumeError(std::move(error));
    return code;
  }
  if (error)
    return fail(llvm::toString(std::move(error)));
  return 0;
}
