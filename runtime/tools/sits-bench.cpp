//===- sits-bench.cpp - Decode and prefill speed of an engine -------------===//
//
//   sits-bench ENGINE [--batch 1,4,8] [--context 128,2048,8192]
//              [--new-tokens 128] [--repeats 3] [--seed S] [--json FILE]
//              [--no-cuda-graph] [--no-programmatic-launch] [--device D]
//              [--tvc-no-fallback] [--no-persistent-decode]
//              [--persistent-trace FILE]
//
// For every batch size and context length: a prompt of `context` random
// tokens per sequence, prefilled, then `new-tokens` greedy decode steps (EOS
// ignored). Reports the median over the repeats of prefill tokens/s, decode
// ms per step and tokens/s, and the bandwidth decode achieves: the bytes one
// step must read (the weights a step reads once, plus every sequence's KV
// cache at the step's mean length) over the step time. With a quantized KV
// cache, the bytes really stored: the cold rows and their scales for tokens
// outside the hot window, FP16 rows inside it; and after each configuration
// the quantization statistics of its last run (also in --json). It also
// times the decode step's LM head alone (its launches replayed after the run:
// the plain `lm_head` kernel, or a TVC head's eight kernels) and, for an engine
// with a TVC head, reports the share of rows that fell back to the full
// head. --tvc-no-fallback (benchmark only: tokens may differ from the plain
// head's) takes every TVC row as proved, so the head's time with the proof
// succeeding can be measured on random weights, whose proofs rarely hold.
// --persistent-trace FILE (an engine of sitsc --persistent-trace): per
// configuration, the last decode step's tiles by task (when each task's
// first and last tiles had their dependencies, when its last one ended, its
// tiles' mean wait and run, its longest run) and every tile's times into
// FILE as JSON, and the kernels that took longest.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "sits/AtomicFile.h"
#include "sits/Json.h"
#include "sits/KVCalibration.h"
#include "sits/Runtime.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kExitBadInput = 1;
constexpr int kExitGpu = 4;
constexpr int kExitCuda = 6;

const char *kUsage =
    "usage: sits-bench ENGINE [--batch 1,4,8] [--context 128,2048,8192]\n"
    "                  [--new-tokens 128] [--repeats 3] [--seed S]\n"
    "                  [--json FILE] [--no-cuda-graph] [--device D]\n"
    "                  [--no-programmatic-launch] [--tvc-no-fallback]\n"
    "                  [--no-persistent-decode] [--persistent-trace FILE]\n";

struct Options {
  std::string engine;
  std::vector<uint64_t> batches{1, 4, 8};
  std::vector<uint64_t> contexts{128, 2048, 8192};
  uint64_t newTokens = 128;
  uint64_t repeats = 3;
  uint64_t seed = 0;
  uint64_t device = 0;
  std::string jsonPath;
  std::string tracePath;
  bool noCudaGraph = false;
  bool noProgrammaticLaunch = false;
  bool noPersistentDecode = false;
  bool tvcNoFallback = false; ///< benchmark only: tokens may differ
};

Options parseArgs(int argc, char **argv) {
  Options o;
  sits::tools::CommandLine cl("sits-bench", kUsage, argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h")
      cl.printUsage();
    else if (a == "--batch")
      o.batches = cl.parseUnsignedList(a, cl.value(i), 1, 4096);
    else if (a == "--context")
      o.contexts = cl.parseUnsignedList(a, cl.value(i), 1, 1u << 24);
    else if (a == "--new-tokens")
      o.newTokens = cl.parseUnsigned(a, cl.value(i), 1u << 20);
    else if (a == "--repeats")
      o.repeats = cl.parseUnsigned(a, cl.value(i), 1000);
    else if (a == "--seed")
      o.seed = cl.parseUnsigned(a, cl.value(i), UINT64_MAX);
    else if (a == "--device")
      o.device = cl.parseUnsigned(a, cl.value(i), 1024);
    else if (a == "--json")
      o.jsonPath = cl.value(i);
    else if (a == "--persistent-trace")
      o.tracePath = cl.value(i);
    else if (a == "--no-cuda-graph")
      o.noCudaGraph = true;
    else if (a == "--no-programmatic-launch")
      o.noProgrammaticLaunch = true;
    else if (a == "--no-persistent-decode")
      o.noPersistentDecode = true;
    else if (a == "--tvc-no-fallback")
      o.tvcNoFallback = true;
    else if (a.size() > 1 && a[0] == '-')
      cl.usageError("unknown option '" + a + "'");
    else if (o.engine.empty())
      o.engine = a;
    else
      cl.usageError("more than one engine given ('" + o.engine + "', '" + a +
                    "')");
  }
  if (o.engine.empty())
    cl.usageError("no engine file given");
  if (o.newTokens < 1)
    cl.usageError("--new-tokens must be at least 1");
  if (o.repeats < 1)
    cl.usageError("--repeats must be at least 1");
  return o;
}

[[noreturn]] void fail(int code, const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "sits-bench: error: %s\n", message.c_str());
  std::exit(code);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// Bytes of the KV cache one step reads for one sequence of `length`
/// tokens, all layers: a quantized cache's tokens outside the hot window at
/// their stored size (values and scales), the newest ones in FP16.
double kvBytesRead(const sits::format::KVCacheConfig &kv, double length) {
  double hotRow = double(kv.headDim) * sits::format::dtypeBytes(kv.dtype);
  if (!kv.coldBits)
    return length * 2 * hotRow * kv.layers * kv.kvHeads;
  double row = kv.headDim * kv.coldBits / 8.0;
  double groups = (kv.headDim + kv.groupSize - 1) / kv.groupSize;
  double coldValues = std::max(0.0, length - kv.hotWindow);
  double coldKeys = coldValues;
  double keyScaleBytes = coldKeys * 2 * groups;
  if (kv.perChannelKeys) {
    // Blocks go cold whole, once their last token leaves the window.
    coldKeys = std::floor(coldValues / kv.channelBlock) * kv.channelBlock;
    keyScaleBytes = coldKeys / kv.channelBlock * 2 * kv.headDim;
  }
  double values =
      coldValues * (row + 2 * groups) + (length - coldValues) * hotRow;
  double keys = coldKeys * row + keyScaleBytes + (length - coldKeys) * hotRow;
  return (values + keys) * kv.layers * kv.kvHeads;
}

/// Weight bytes a decode step reads: all weights, minus the embedding table
/// when the engine says it is only gathered from (a step reads B rows of it).
uint64_t weightBytesPerStep(const sits::Engine &engine) {
  uint64_t bytes = engine.weightBytes();
  sits::json::Value metadata;
  std::string error;
  if (!sits::json::parse(engine.contents().metadataJson, &metadata, &error))
    return bytes;
  const sits::json::Value *gathered =
      metadata.find("weights")
          ? metadata.find("weights")->find("gather_only_bytes")
          : nullptr;
  if (gathered && gathered->isInteger() && gathered->getInteger() >= 0 &&
      uint64_t(gathered->getInteger()) <= bytes)
    bytes -= uint64_t(gathered->getInteger());
  return bytes;
}

struct Result {
  uint64_t batch = 0, context = 0, newTokens = 0, bucket = 0;
  double prefillMs = 0, prefillTokensPerSecond = 0;
  double decodeMsPerStep = 0, tokensPerSecond = 0;
  double bytesPerStep = 0, gigabytesPerSecond = 0;
  double lmHeadMs = 0;
  bool cudaGraph = false;
  bool programmaticLaunch = false;
  bool persistentDecode = false;
  std::string calibration; ///< JSON of the last run (quantized KV cache)
  bool tvc = false;
  uint64_t tvcProved = 0, tvcFallback = 0;
};

/// A persistent step's trace by task, as JSON (times in us from the step's
/// first tile), and in `summary` the step's length and the kernels whose
/// tasks took longest (from a task's first tile with its dependencies to
/// its last tile's end, summed over the kernel's tasks).
sits::json::Value summarizeTrace(const sits::PersistentTrace &trace,
                                 std::string *summary) {
  using sits::json::Value;
  struct Task {
    uint64_t tiles = 0, firstEnter = UINT64_MAX, firstReady = UINT64_MAX;
    uint64_t lastReady = 0, lastLeave = 0, longestRun = 0;
    uint32_t longestTile = 0, longestBlock = 0;
    double waitNs = 0, runNs = 0;
  };
  std::vector<Task> tasks(trace.taskKernels.size());
  uint64_t start = UINT64_MAX, end = 0;
  for (const sits::PersistentTileTime &tile : trace.tiles) {
    if (tile.task >= tasks.size())
      continue;
    Task &task = tasks[tile.task];
    ++task.tiles;
    task.firstEnter = std::min(task.firstEnter, tile.enterNs);
    task.firstReady = std::min(task.firstReady, tile.readyNs);
    task.lastReady = std::max(task.lastReady, tile.readyNs);
    task.lastLeave = std::max(task.lastLeave, tile.leaveNs);
    if (tile.leaveNs - tile.readyNs >= task.longestRun) {
      task.longestRun = tile.leaveNs - tile.readyNs;
      task.longestTile = tile.tile;
      task.longestBlock = tile.block;
    }
    task.waitNs += double(tile.readyNs - tile.enterNs);
    task.runNs += double(tile.leaveNs - tile.readyNs);
    start = std::min(start, tile.enterNs);
    end = std::max(end, tile.leaveNs);
  }
  Value root = Value::object();
  root.set("step_us", start < end ? (end - start) / 1e3 : 0.0);
  Value &list = root.set("tasks", Value::array());
  std::vector<std::pair<double, std::string>> byKernel;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const Task &task = tasks[t];
    if (!task.tiles)
      continue;
    Value item = Value::object();
    item.set("task", uint64_t(t));
    item.set("kernel", trace.taskKernels[t]);
    item.set("tiles", task.tiles);
    item.set("first_enter_us", (task.firstEnter - start) / 1e3);
    item.set("first_ready_us", (task.firstReady - start) / 1e3);
    item.set("last_ready_us", (task.lastReady - start) / 1e3);
    item.set("last_leave_us", (task.lastLeave - start) / 1e3);
    item.set("mean_wait_us", task.waitNs / task.tiles / 1e3);
    item.set("mean_run_us", task.runNs / task.tiles / 1e3);
    item.set("longest_run_us", task.longestRun / 1e3);
    item.set("longest_tile", uint64_t(task.longestTile));
    item.set("longest_block", uint64_t(task.longestBlock));
    list.push(std::move(item));
    const double span = (task.lastLeave - task.firstReady) / 1e3;
    auto found =
        std::find_if(byKernel.begin(), byKernel.end(), [&](const auto &entry) {
          return entry.second == trace.taskKernels[t];
        });
    if (found == byKernel.end())
      byKernel.push_back({span, trace.taskKernels[t]});
    else
      found->first += span;
  }
  std::sort(byKernel.begin(), byKernel.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  // Every tile, for a timeline: task, tile, block, entered, ready, left.
  Value &records = root.set("tile_records", Value::array());
  for (const sits::PersistentTileTime &tile : trace.tiles) {
    if (tile.task >= tasks.size())
      continue;
    Value record = Value::array();
    record.push(uint64_t(tile.task));
    record.push(uint64_t(tile.tile));
    record.push(uint64_t(tile.block));
    for (uint64_t ns : {tile.enterNs, tile.readyNs, tile.leaveNs})
      record.push((ns - start) / 1e3);
    records.push(std::move(record));
  }
  char line[160];
  std::snprintf(line, sizeof(line),
                "  persistent step: %.1f us from its first tile to its last;"
                " by kernel:",
                start < end ? (end - start) / 1e3 : 0.0);
  *summary = line;
  for (size_t k = 0; k < byKernel.size() && k < 6; ++k) {
    std::snprintf(line, sizeof(line), " %s %.1f us%s",
                  byKernel[k].second.c_str(), byKernel[k].first,
                  k + 1 < byKernel.size() ? "," : "");
    *summary += line;
  }
  *summary += "\n";
  return root;
}

std::string toJson(const Options &o, const sits::Engine &engine,
                   const std::vector<Result> &results) {
  using sits::json::Value;
  Value root = Value::object();
  root.set("engine", o.engine);
  root.set("device", engine.deviceName());
  root.set("weight_bytes", engine.weightBytes());
  root.set("new_tokens", o.newTokens);
  root.set("repeats", o.repeats);
  Value &list = root.set("results", Value::array());
  for (const Result &r : results) {
    Value item = Value::object();
    item.set("batch", r.batch);
    item.set("context", r.context);
    item.set("bucket", r.bucket);
    item.set("cuda_graph", r.cudaGraph);
    item.set("programmatic_launch", r.programmaticLaunch);
    item.set("persistent_decode", r.persistentDecode);
    item.set("prefill_ms", r.prefillMs);
    item.set("prefill_tokens_per_s", r.prefillTokensPerSecond);
    item.set("decode_ms_per_token", r.decodeMsPerStep);
    item.set("decode_tokens_per_s", r.tokensPerSecond);
    item.set("bytes_per_step", r.bytesPerStep);
    item.set("achieved_gb_per_s", r.gigabytesPerSecond);
    sits::json::Value calibration;
    std::string error;
    if (!r.calibration.empty() &&
        sits::json::parse(r.calibration, &calibration, &error))
      item.set("kv_calibration", std::move(calibration));
    item.set("lm_head_ms", r.lmHeadMs);
    if (r.tvc) {
      item.set("tvc_proved_rows", r.tvcProved);
      item.set("tvc_fallback_rows", r.tvcFallback);
      item.set("tvc_fallback_disabled", o.tvcNoFallback);
    }
    list.push(std::move(item));
  }
  return root.write(2) + "\n";
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  try {
    sits::LoadOptions load;
    load.device = static_cast<int>(o.device);
    std::shared_ptr<sits::Engine> engine = sits::Engine::load(o.engine, load);
    const sits::format::RuntimeConfig &config = engine->config();
    for (uint64_t batch : o.batches)
      if (batch > config.maxBatch)
        fail(kExitBadInput, "--batch " + std::to_string(batch) +
                                " exceeds this engine's max batch of " +
                                std::to_string(config.maxBatch));
    for (uint64_t context : o.contexts)
      if (context + o.newTokens > config.maxSeqLen)
        fail(kExitBadInput,
             "--context " + std::to_string(context) + " plus --new-tokens " +
                 std::to_string(o.newTokens) + " exceeds this engine's " +
                 std::to_string(config.maxSeqLen) +
                 " tokens per sequence (compile with a larger --max-seq-len)");

    sits::SessionOptions sessionOptions;
    sessionOptions.useCudaGraphs = !o.noCudaGraph;
    sessionOptions.useProgrammaticLaunch = !o.noProgrammaticLaunch;
    sessionOptions.usePersistentDecode = !o.noPersistentDecode;
    sits::Session session(engine, sessionOptions);
    if (o.tvcNoFallback)
      session.disableTvcFallbackForBenchmark(true);
    if (!o.tracePath.empty()) {
      // Before any run: an engine without the trace fails now.
      std::vector<uint32_t> buckets = session.persistentBuckets();
      if (buckets.empty())
        fail(kExitBadInput,
             "--persistent-trace: no decode step of this session runs a "
             "persistent kernel (an engine of sitsc "
             "--decode-kernels=persistent, without --no-persistent-decode)");
      session.persistentTrace(buckets.front());
    }
    uint64_t weightBytes = weightBytesPerStep(*engine);
    double kvPerToken = kvBytesRead(config.kvCache, 1e9) / 1e9;
    std::mt19937_64 random(o.seed);
    std::uniform_int_distribution<int32_t> token(0, config.vocabSize - 1);

    std::printf("engine %s on %s: %.1f MB of weights (%.1f MB read per "
                "decode step), KV cache %.1f bytes per token\n",
                o.engine.c_str(), engine->deviceName().c_str(),
                engine->weightBytes() / 1e6, weightBytes / 1e6, kvPerToken);
    if (o.tvcNoFallback)
      std::printf("TVC fallback disabled (benchmark only: tokens may differ "
                  "from the plain head's)\n");
    std::printf("%6s %8s %7s %12s %12s %12s %12s %12s %9s %11s\n", "batch",
                "context", "bucket", "prefill t/s", "decode ms", "decode t/s",
                "GB/s", "lm head us", "tvc fb %", "decode step");
    std::vector<Result> results;
    sits::json::Value traces = sits::json::Value::array();
    for (uint64_t batch : o.batches)
      for (uint64_t context : o.contexts) {
        std::vector<double> prefillMs, stepMs;
        Result r;
        r.batch = batch;
        r.context = context;
        r.newTokens = o.newTokens;
        // One warm-up run (graph capture, first-touch) and the repeats.
        for (uint64_t run = 0; run <= o.repeats; ++run) {
          std::vector<std::vector<int32_t>> prompts(batch);
          for (auto &prompt : prompts)
            for (uint64_t i = 0; i < context; ++i)
              prompt.push_back(token(random));
          sits::GenerateParams params;
          params.maxNewTokens = static_cast<uint32_t>(o.newTokens);
          params.stopAtEos = false;
          sits::GenerateResult result = session.generate(prompts, params);
          if (run == 0)
            continue;
          prefillMs.push_back(result.stats.prefillMs);
          stepMs.push_back(result.stats.decodeMsPerStep);
          r.tvc = result.stats.tvc;
          r.tvcProved += result.stats.tvcProvedRows;
          r.tvcFallback += result.stats.tvcFallbackRows;
          r.bucket = result.stats.bucket;
          r.cudaGraph = result.stats.cudaGraph;
          r.programmaticLaunch = result.stats.programmaticLaunch;
          r.persistentDecode = result.stats.persistentDecode;
        }
        std::string summary;
        if (config.kvCache.coldBits) {
          // Read after the timed request: no synchronization inside it.
          std::vector<uint64_t> words = session.kvCalibrationWords();
          r.calibration =
              sits::format::kvCalibrationJson(config.kvCache, words);
          summary = sits::format::kvCalibrationSummary(config.kvCache, words);
        }
        r.prefillMs = median(prefillMs);
        r.prefillTokensPerSecond = batch * context / (r.prefillMs / 1e3);
        r.decodeMsPerStep = median(stepMs);
        r.tokensPerSecond = batch / (r.decodeMsPerStep / 1e3);
        // Each step reads the weights once and every sequence's cache at its
        // length then: on average context + (new tokens - 1) / 2.
        double kvBytes = 0;
        for (uint64_t step = 0; step < o.newTokens; ++step)
          kvBytes += kvBytesRead(config.kvCache, double(context + step));
        r.bytesPerStep = weightBytes + batch * kvBytes / double(o.newTokens);
        r.gigabytesPerSecond = r.bytesPerStep / (r.decodeMsPerStep / 1e3) / 1e9;
        r.lmHeadMs = session.timeLMHead(static_cast<uint32_t>(batch), 100);
        char fallback[32] = "-";
        if (r.tvc && r.tvcProved + r.tvcFallback)
          std::snprintf(fallback, sizeof(fallback), "%.2f",
                        100.0 * double(r.tvcFallback) /
                            double(r.tvcProved + r.tvcFallback));
        std::printf("%6" PRIu64 " %8" PRIu64 " %7" PRIu64
                    " %12.0f %12.4f %12.1f %12.1f %12.2f %9s %11s\n",
                    batch, context, r.bucket, r.prefillTokensPerSecond,
                    r.decodeMsPerStep, r.tokensPerSecond, r.gigabytesPerSecond,
                    r.lmHeadMs * 1e3, fallback,
                    r.persistentDecode ? "persistent" : "kernels");
        std::fputs(summary.c_str(), stdout);
        if (!o.tracePath.empty() && r.persistentDecode) {
          sits::json::Value item = summarizeTrace(
              session.persistentTrace(static_cast<uint32_t>(r.bucket)),
              &summary);
          item.set("batch", batch);
          item.set("context", context);
          item.set("bucket", r.bucket);
          traces.push(std::move(item));
          std::fputs(summary.c_str(), stdout);
        }
        results.push_back(r);
      }

    if (!o.tracePath.empty()) {
      std::string error;
      if (!sits::writeFileAtomic(o.tracePath, traces.write(2) + "\n", &error))
        fail(kExitBadInput, "--persistent-trace: " + error);
    }
    if (!o.jsonPath.empty()) {
      std::string error;
      if (!sits::writeFileAtomic(o.jsonPath, toJson(o, *engine, results),
                                 &error))
        fail(kExitBadInput, "--json: " + error);
    }
  } catch (const sits::Error &error) {
    int code = kExitBadInput;
    if (error.code() == sits::ErrorCode::NoGpu ||
        error.code() == sits::ErrorCode::WrongGpu)
      code = kExitGpu;
    else if (error.code() == sits::ErrorCode::Cuda)
      code = kExitCuda;
    fail(code, error.what());
  }
  return 0;
}
