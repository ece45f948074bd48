//===- sits-run.cpp - Run, check or inspect a sits engine -----------------===//
//
//   sits-run ENGINE (--prompt TEXT | --chat MESSAGE [--system TEXT])
//            [--stop TEXT]... [--stats] [--print-ids] [--show-special]
//            [sampling and session options]
//   sits-run ENGINE (--prompt-ids 1,2,3 | --prompt-bytes TEXT)
//            [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
//            [--seed S] [--batch B] [--no-cuda-graph]
//            [--no-programmatic-launch] [--no-persistent-decode]
//            [--ignore-eos] [--device D]
//            [--calibration-log FILE.json]
//   sits-run --check ENGINE [--target-sm SM]
//   sits-run --inspect ENGINE [--verbose]
//
// Text mode (--prompt, --chat) encodes with the engine's tokenizer (its
// chat template for --chat) and streams the generated text to stdout as it
// arrives; --stats writes the prompt tokens, time to first token, ms/token
// and tokens/s to stderr. Id mode prints the tokens and a report to stdout.
// --check validates an engine without a GPU (with one, it also checks the
// target SM against it). Exit codes: 0 success, 1 bad engine or request,
// 2 bad command line, 3 a sticky CUDA error (from the runtime's handler),
// 4 no GPU or the engine is for another GPU, 5 KV cache full, 6 other CUDA
// errors.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "sits/EngineFormat.h"
#include "sits/Json.h"
#include "sits/KVCalibration.h"
#include "sits/ModelTokenizer.h"
#if SITS_RUNTIME_HAS_CUDA
#include "sits/Runtime.h"
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kExitBadInput = 1;
#if SITS_RUNTIME_HAS_CUDA
constexpr int kExitGpu = 4;
constexpr int kExitCacheFull = 5;
constexpr int kExitCuda = 6;
#endif

/// The TVC LM head's line of --inspect (engines from sitsc --tvc=exact).
void printTvcHead(const std::string &metadata) {
  sits::json::Value root;
  std::string error;
  if (!sits::json::parse(metadata, &root, &error))
    return;
  const sits::json::Value *tvc = root.find("tvc");
  if (!tvc || !tvc->isObject())
    return;
  auto number = [&](const char *key) {
    const sits::json::Value *value = tvc->find(key);
    return value && value->isInteger() ? value->getInteger() : int64_t(0);
  };
  std::printf("tvc lm head: rank %lld, %lld candidates, exact for greedy and "
              "top-k <= %lld (other sampling is refused)\n",
              static_cast<long long>(number("rank")),
              static_cast<long long>(number("candidates")),
              static_cast<long long>(number("exact_top")));
}

const char *kUsage =
    "usage: sits-run ENGINE (--prompt TEXT | --chat MESSAGE [--system TEXT])\n"
    "                [--stop TEXT]... [--stats] [--print-ids] "
    "[--show-special]\n"
    "                [options]\n"
    "       sits-run ENGINE (--prompt-ids 1,2,3 | --prompt-bytes TEXT) "
    "[options]\n"
    "       sits-run --check ENGINE [--target-sm SM]\n"
    "       sits-run --inspect ENGINE [--verbose]\n"
    "options: [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "         [--seed S] [--batch B] [--no-cuda-graph] "
    "[--no-programmatic-launch]\n"
    "         [--no-persistent-decode] [--ignore-eos] [--device D] "
    "[--calibration-log FILE.json]\n"
    "  --prompt TEXT    text, encoded with the engine's tokenizer; the\n"
    "                   continuation streams to stdout\n"
    "  --chat MESSAGE   a user message, through the model's chat template\n"
    "  --system TEXT    a system message before --chat's\n"
    "  --stop TEXT      end a sequence at this text (repeatable)\n"
    "  --stats          prompt tokens, time to first token, ms/token and\n"
    "                   tokens/s to stderr\n"
    "  --print-ids      the prompt's and the generated ids to stderr\n"
    "  --show-special   keep special tokens (EOS, chat markers) in the text\n";

struct Options {
  enum class Mode { Run, Check, Inspect } mode = Mode::Run;
  std::string engine;
  bool haveIds = false, haveBytes = false, haveText = false, haveChat = false;
  std::vector<int64_t> promptIds;
  std::string promptBytes;
  std::string promptText, chatMessage, systemMessage;
  bool haveSystem = false;
  std::vector<std::string> stops;
  bool stats = false, printIds = false, showSpecial = false;
  uint64_t maxNewTokens = 16;
  double temperature = 0.0;
  uint64_t topK = 0;
  double topP = 1.0;
  uint64_t seed = 0;
  uint64_t batch = 1;
  uint64_t device = 0;
  uint64_t targetSm = 0;
  bool noCudaGraph = false;
  bool noProgrammaticLaunch = false;
  bool noPersistentDecode = false;
  bool ignoreEos = false;
  bool verbose = false;
  std::string calibrationLog;
};

Options parseArgs(int argc, char **argv) {
  Options o;
  sits::tools::CommandLine cl("sits-run", kUsage, argc, argv);
  auto value = [&](int &i) { return cl.value(i); };
  auto usageError = [&](const std::string &message) { cl.usageError(message); };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      cl.printUsage();
    } else if (a == "--check") {
      o.mode = Options::Mode::Check;
    } else if (a == "--inspect") {
      o.mode = Options::Mode::Inspect;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--prompt-ids") {
      o.promptIds = cl.parseIntegers(a, value(i));
      o.haveIds = true;
    } else if (a == "--prompt-bytes") {
      o.promptBytes = value(i);
      o.haveBytes = true;
    } else if (a == "--prompt") {
      o.promptText = value(i);
      o.haveText = true;
    } else if (a == "--chat") {
      o.chatMessage = value(i);
      o.haveChat = true;
    } else if (a == "--system") {
      o.systemMessage = value(i);
      o.haveSystem = true;
    } else if (a == "--stop") {
      o.stops.push_back(value(i));
      if (o.stops.back().empty())
        usageError("--stop needs a non-empty text");
    } else if (a == "--stats") {
      o.stats = true;
    } else if (a == "--print-ids") {
      o.printIds = true;
    } else if (a == "--show-special") {
      o.showSpecial = true;
    } else if (a == "--max-new-tokens") {
      o.maxNewTokens = cl.parseUnsigned(a, value(i), 1u << 30);
    } else if (a == "--temperature") {
      o.temperature = cl.parseNumber(a, value(i));
    } else if (a == "--top-k") {
      o.topK = cl.parseUnsigned(a, value(i), 0xffffffffu);
    } else if (a == "--top-p") {
      o.topP = cl.parseNumber(a, value(i));
    } else if (a == "--seed") {
      o.seed = cl.parseUnsigned(a, value(i), UINT64_MAX);
    } else if (a == "--batch") {
      o.batch = cl.parseUnsigned(a, value(i), 4096);
    } else if (a == "--device") {
      o.device = cl.parseUnsigned(a, value(i), 1024);
    } else if (a == "--target-sm") {
      o.targetSm = cl.parseUnsigned(a, value(i), 1000);
    } else if (a == "--calibration-log") {
      o.calibrationLog = value(i);
      std::string error;
      if (!sits::format::checkWritablePath(o.calibrationLog, &error))
        usageError("--calibration-log: " + error);
    } else if (a == "--no-cuda-graph") {
      o.noCudaGraph = true;
    } else if (a == "--no-programmatic-launch") {
      o.noProgrammaticLaunch = true;
    } else if (a == "--no-persistent-decode") {
      o.noPersistentDecode = true;
    } else if (a == "--ignore-eos") {
      o.ignoreEos = true;
    } else if (a.size() > 1 && a[0] == '-') {
      usageError("unknown option '" + a + "'");
    } else if (o.engine.empty()) {
      o.engine = a;
    } else {
      usageError("more than one engine given ('" + o.engine + "', '" + a +
                 "')");
    }
  }
  if (o.engine.empty())
    usageError("no engine file given");
  if (o.mode == Options::Mode::Run) {
    if (int(o.haveIds) + int(o.haveBytes) + int(o.haveText) + int(o.haveChat) !=
        1)
      usageError("give exactly one of --prompt, --chat, --prompt-ids and "
                 "--prompt-bytes");
    if (o.haveSystem && !o.haveChat)
      usageError("--system goes with --chat");
    bool textMode = o.haveText || o.haveChat;
    if (!textMode &&
        (!o.stops.empty() || o.stats || o.printIds || o.showSpecial))
      usageError("--stop, --stats, --print-ids and --show-special go with "
                 "--prompt or --chat");
    if (o.maxNewTokens < 1)
      usageError("--max-new-tokens must be at least 1");
    if (o.temperature < 0)
      usageError("--temperature must be >= 0");
    if (!(o.topP > 0 && o.topP <= 1))
      usageError("--top-p must be in (0, 1]");
    if (o.batch < 1)
      usageError("--batch must be at least 1");
  }
  return o;
}

[[noreturn]] void fail(int code, const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "sits-run: error: %s\n", message.c_str());
  std::exit(code);
}

int checkOrInspect(const Options &o) {
  std::string error;
  auto file = sits::format::EngineFile::open(o.engine, &error);
  if (!file)
    fail(kExitBadInput, error);
  sits::format::Header header;
  sits::format::EngineContents contents;
  sits::format::RuntimeConfig config;
  if (!sits::format::readEngine(*file, {}, &header, &contents, &config, &error))
    fail(kExitBadInput, o.engine + ": " + error);
  bool allPtx = !contents.modules.empty();
  for (const auto &m : contents.modules)
    allPtx &= !m.ptx.empty();
  std::string targetNote;
  uint32_t against = static_cast<uint32_t>(o.targetSm);
#if SITS_RUNTIME_HAS_CUDA
  if (!against && sits::countGpus() > 0) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) ==
            cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) ==
            cudaSuccess)
      against = static_cast<uint32_t>(major * 10 + minor);
  }
#endif
  if (against) {
    bool usePtx = false;
    if (!sits::format::checkTargetSm(header.targetSm, against, allPtx, &usePtx,
                                     &error))
      fail(kExitBadInput, o.engine + ": " + error);
    targetNote = ", runs on sm_" + std::to_string(against) +
                 (usePtx ? " through PTX JIT" : "");
  } else {
    targetNote = ", target not checked (no GPU; use --target-sm)";
  }
  // The stored tokenizer is part of the engine: --check validates it too.
  std::shared_ptr<const sits::ModelTokenizer> tokenizer;
  try {
    tokenizer = sits::ModelTokenizer::fromEngine(contents, config);
  } catch (const sits::Error &error) {
    fail(kExitBadInput, o.engine + ": " + error.what());
  }
  if (o.mode == Options::Mode::Inspect) {
    std::fputs(sits::format::describeEngine(header, contents, config, o.verbose)
                   .c_str(),
               stdout);
    printTvcHead(contents.metadataJson);
    if (tokenizer)
      std::fputs(tokenizer->describe().c_str(), stdout);
    else
      std::puts("tokenizer: none (the engine takes and returns token ids)");
    return 0;
  }
  std::printf("%s: OK: format %u.%u, sm_%u%s, %" PRIu64 " bytes, model %s\n",
              o.engine.c_str(), header.formatMajor, header.formatMinor,
              header.targetSm, targetNote.c_str(), header.fileBytes,
              config.modelName.empty() ? "(unnamed)"
                                       : config.modelName.c_str());
  return 0;
}

#if SITS_RUNTIME_HAS_CUDA

/// Text on one line: newlines, backslashes and control characters escaped;
/// bytes from 0x80 kept (UTF-8 text) or escaped (a byte vocabulary's raw
/// bytes, which need not be UTF-8).
std::string escapeLine(const std::string &bytes, bool keepHighBytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !keepHighBytes)) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string escapeBytes(const std::vector<int32_t> &tokens) {
  std::string bytes;
  for (int32_t t : tokens)
    bytes += static_cast<char>(t & 0xff);
  return escapeLine(bytes, /*keepHighBytes=*/false);
}

double mib(uint64_t bytes) { return bytes / (1024.0 * 1024.0); }

std::string idList(const std::vector<int32_t> &ids) {
  std::string out;
  for (int32_t id : ids)
    out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

/// --prompt / --chat: the prompt through the engine's tokenizer, the text
/// streamed to stdout as it arrives (sequence 0's; with --batch, the other
/// sequences' texts follow at the end).
int runText(const Options &o, const std::shared_ptr<sits::Engine> &engine,
            sits::Session &session, const sits::GenerateParams &params) {
  const std::shared_ptr<const sits::ModelTokenizer> &tokenizer =
      engine->tokenizer();
  if (!tokenizer)
    fail(kExitBadInput, "this engine holds no tokenizer: compile it with "
                        "the model's tokenizer.json (sitsc --tokenizer=DIR) "
                        "or give --prompt-ids");
  std::vector<int32_t> prompt;
  if (o.haveChat) {
    std::vector<sits::ChatMessage> messages;
    if (o.haveSystem)
      messages.push_back({"system", o.systemMessage});
    messages.push_back({"user", o.chatMessage});
    prompt = tokenizer->encodeChat(messages);
  } else {
    prompt = tokenizer->encode(o.promptText);
  }
  if (o.printIds)
    std::fprintf(stderr, "prompt ids: %s\n", idList(prompt).c_str());

  sits::TextGenerateParams textParams;
  textParams.generate = params;
  textParams.stop = o.stops;
  textParams.skipSpecialTokens = !o.showSpecial;
  std::vector<std::vector<int32_t>> prompts(o.batch, prompt);
  sits::TextResult result;
  try {
    result = session.generateText(
        prompts, textParams, [](uint32_t sequence, const std::string &text) {
          if (sequence == 0) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
          }
          return true;
        });
  } catch (const sits::Error &) {
    std::fputc('\n', stdout);
    throw;
  }
  std::fputc('\n', stdout);
  for (size_t b = 1; b < result.text.size(); ++b)
    std::printf("--- sequence %zu ---\n%s\n", b, result.text[b].c_str());
  if (o.printIds)
    for (size_t b = 0; b < result.tokens.size(); ++b)
      std::fprintf(stderr, "tokens[%zu]: %s\nfinish[%zu]: %s\n", b,
                   idList(result.tokens[b]).c_str(), b,
                   sits::finishReasonName(result.finishReasons[b]));
  if (o.stats) {
    const sits::GenerateStats &st = result.stats;
    std::fprintf(stderr,
                 "prompt: %zu tokens; time to first token %.2f ms\n"
                 "generated: %u tokens; %.3f ms/token, %.1f tokens/s "
                 "(batch %u)\n",
                 prompt.size(), st.prefillMs, st.generatedTokens,
                 st.decodeMsPerStep, st.tokensPerSecond, st.batch);
  }
  return 0;
}

int runEngine(const Options &o) {
  sits::LoadOptions load;
  load.device = static_cast<int>(o.device);
  std::shared_ptr<sits::Engine> engine;
  std::vector<std::vector<int32_t>> tokens;
  try {
    engine = sits::Engine::load(o.engine, load);
    const sits::format::RuntimeConfig &config = engine->config();
    std::vector<int32_t> prompt;
    if (o.haveText || o.haveChat) {
      // Checked below with the other options, encoded in runText.
    } else if (o.haveBytes) {
      if (config.tokenizer != sits::format::TokenizerKind::Bytes)
        fail(kExitBadInput, "this engine has no byte vocabulary; use "
                            "--prompt-ids");
      for (unsigned char c : o.promptBytes)
        prompt.push_back(c);
    } else {
      for (size_t i = 0; i < o.promptIds.size(); ++i) {
        int64_t id = o.promptIds[i];
        if (id < 0 || id >= config.vocabSize)
          fail(kExitBadInput, "token id " + std::to_string(id) +
                                  " at position " + std::to_string(i) +
                                  " is outside the vocabulary (0.." +
                                  std::to_string(config.vocabSize - 1) + ")");
        prompt.push_back(static_cast<int32_t>(id));
      }
    }
    if (!o.calibrationLog.empty() && !config.kvCache.coldBits)
      fail(kExitBadInput, "--calibration-log needs an engine with a quantized "
                          "KV cache (sitsc --kv-cache=int8|int4)");
    if (o.batch > config.maxBatch)
      fail(kExitBadInput, "--batch " + std::to_string(o.batch) +
                              " exceeds this engine's max batch of " +
                              std::to_string(config.maxBatch));
    sits::SessionOptions sessionOptions;
    sessionOptions.useCudaGraphs = !o.noCudaGraph;
    sessionOptions.useProgrammaticLaunch = !o.noProgrammaticLaunch;
    sessionOptions.usePersistentDecode = !o.noPersistentDecode;
    sits::Session session(engine, sessionOptions);
    sits::GenerateParams params;
    params.maxNewTokens =
        static_cast<uint32_t>(std::min<uint64_t>(o.maxNewTokens, UINT32_MAX));
    params.sampling.temperature = static_cast<float>(o.temperature);
    params.sampling.topK = static_cast<uint32_t>(o.topK);
    params.sampling.topP = static_cast<float>(o.topP);
    params.sampling.seed = o.seed;
    params.stopAtEos = !o.ignoreEos;
    if (o.haveText || o.haveChat)
      return runText(o, engine, session, params);
    std::vector<std::vector<int32_t>> prompts(o.batch, prompt);
    tokens.assign(o.batch, {});
    auto printTokens = [&]() {
      for (size_t b = 0; b < tokens.size(); ++b) {
        std::printf("tokens[%zu]:", b);
        for (int32_t t : tokens[b])
          std::printf(" %d", t);
        std::printf("\n");
        if (config.tokenizer == sits::format::TokenizerKind::Bytes)
          std::printf("text[%zu]: %s\n", b, escapeBytes(tokens[b]).c_str());
        else if (engine->tokenizer())
          std::printf("text[%zu]: %s\n", b,
                      escapeLine(engine->tokenizer()->decode(tokens[b]),
                                 /*keepHighBytes=*/true)
                          .c_str());
      }
    };
    sits::GenerateResult result;
    try {
      result = session.generate(prompts, params, [&](uint32_t seq, int32_t t) {
        tokens[seq].push_back(t);
        return true;
      });
    } catch (const sits::Error &) {
      printTokens(); // what was generated before the error
      throw;
    }
    printTokens();
    const sits::GenerateStats &st = result.stats;
    std::printf("prefill: %u tokens in %u chunk(s), %.3f ms\n", st.promptTokens,
                st.prefillChunks, st.prefillMs);
    std::printf("decode: %u steps, %.4f ms/token, %.1f tokens/s "
                "(batch %u, %s%s%s, bucket %u)\n",
                st.decodeSteps, st.decodeMsPerStep, st.tokensPerSecond,
                st.batch, st.cudaGraph ? "cuda graph" : "no cuda graph",
                st.programmaticLaunch ? ", programmatic launch" : "",
                st.persistentDecode ? ", persistent kernel" : "", st.bucket);
    std::printf("gpu memory: weights %.2f MiB, session %.2f MiB, device "
                "used %.0f of %.0f MiB (%s, sm_%u%s)\n",
                mib(st.weightBytes), mib(st.sessionBytes),
                mib(st.deviceUsedBytes), mib(st.deviceTotalBytes),
                engine->deviceName().c_str(), engine->deviceSm(),
                engine->usesPtx() ? ", PTX JIT" : "");
    if (!o.calibrationLog.empty()) {
      // Read once, after the request: no synchronization inside the steps.
      std::vector<uint64_t> words = session.kvCalibrationWords();
      std::fputs(
          sits::format::kvCalibrationSummary(config.kvCache, words).c_str(),
          stdout);
      std::string error;
      if (!sits::format::writeTextFileAtomic(
              o.calibrationLog,
              sits::format::kvCalibrationJson(config.kvCache, words), &error))
        fail(kExitBadInput, error);
      std::printf("calibration log: %s\n", o.calibrationLog.c_str());
    }
    if (st.tvc) {
      uint64_t rows = st.tvcProvedRows + st.tvcFallbackRows;
      std::printf("tvc lm head: %" PRIu64 " rows, %" PRIu64 " proved, %" PRIu64
                  " fell back to the full head (fallback rate %.2f%%)\n",
                  rows, st.tvcProvedRows, st.tvcFallbackRows,
                  rows ? 100.0 * double(st.tvcFallbackRows) / double(rows)
                       : 0.0);
    }
    return 0;
  } catch (const sits::Error &error) {
    int code = kExitBadInput;
    switch (error.code()) {
    case sits::ErrorCode::NoGpu:
    case sits::ErrorCode::WrongGpu:
      code = kExitGpu;
      break;
    case sits::ErrorCode::KVCacheFull:
      code = kExitCacheFull;
      break;
    case sits::ErrorCode::Cuda:
      code = kExitCuda;
      break;
    default:
      break;
    }
    fail(code, error.what());
  }
}

#endif

} // namespace

int main(int argc, char **argv) {
  Options options = parseArgs(argc, argv);
  if (options.mode != Options::Mode::Run)
    return checkOrInspect(options);
#if SITS_RUNTIME_HAS_CUDA
  return runEngine(options);
#else
  fail(kExitBadInput, "this sits-run was built without CUDA: it can only "
                      "--check and --inspect engines");
#endif
}
