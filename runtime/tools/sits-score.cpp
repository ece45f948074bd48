//===- sits-score.cpp - Teacher-forced logits and generation for tests ----===//
//
//   sits-score ENGINE score --tokens 1,2,3[;4,5,6] [--prefill N]
//              --out LOGITS.npy [--no-cuda-graph]
//   sits-score ENGINE generate --tokens 1,2,3[;4,5] --max-new-tokens N
//              [--temperature T] [--top-k K] [--top-p P] [--seed S]
//              [--no-cuda-graph]
//
// `score` writes Session::scoreTokens's logits as a float32 .npy
// [sequences, positions, vocab] (positions N-1 .. length-1; the sequences
// must have one length). `generate` prints `tokens[i]: ...` per sequence
// (EOS ignored), for prompts that may differ in length. The GPU model tests
// (test/gpu/run-model-tests.sh) drive it; sits-emulate takes the same
// arguments on the CPU.
//
//===----------------------------------------------------------------------===//

#include "sits/AtomicFile.h"
#include "sits/KVCalibration.h"
#include "sits/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: sits-score ENGINE score --tokens 1,2,3[;4,5,6] [--prefill N] "
    "--out LOGITS.npy [--no-cuda-graph]\n"
    "       sits-score ENGINE generate --tokens 1,2,3[;...] --max-new-tokens "
    "N [--temperature T] [--top-k K] [--top-p P] [--seed S] "
    "[--no-cuda-graph]\n"
    "  either mode: --calibration-log FILE.json (quantized KV cache)\n";

[[noreturn]] void fail(int code, const std::string &message) {
  std::fprintf(stderr, "sits-score: error: %s\n", message.c_str());
  std::exit(code);
}

struct Options {
  std::string engine, mode, out, calibrationLog;
  std::vector<std::vector<int32_t>> tokens;
  uint32_t prefill = 1, maxNewTokens = 16;
  sits::SamplingParams sampling;
  bool noCudaGraph = false;
};

std::vector<std::vector<int32_t>> parseTokens(const std::string &text) {
  std::vector<std::vector<int32_t>> rows(1);
  std::string number;
  auto bad = [&]() {
    fail(2, "--tokens must be ids separated by ',' (sequences by ';'), got '" +
                text + "'");
  };
  auto flush = [&]() {
    if (number.empty())
      bad();
    rows.back().push_back(static_cast<int32_t>(std::stol(number)));
    number.clear();
  };
  for (char c : text) {
    if (c >= '0' && c <= '9' && number.size() < 9)
      number += c;
    else if (c == ',')
      flush();
    else if (c == ';') {
      flush();
      rows.emplace_back();
    } else
      bad();
  }
  flush();
  return rows;
}

double number(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end)
    fail(2, flag + " needs a number, got '" + text + "'");
  return value;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(2, a + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (a == "--tokens")
      o.tokens = parseTokens(value());
    else if (a == "--prefill")
      o.prefill = static_cast<uint32_t>(number(a, value()));
    else if (a == "--max-new-tokens")
      o.maxNewTokens = static_cast<uint32_t>(number(a, value()));
    else if (a == "--out")
      o.out = value();
    else if (a == "--calibration-log")
      o.calibrationLog = value();
    else if (a == "--temperature")
      o.sampling.temperature = static_cast<float>(number(a, value()));
    else if (a == "--top-k")
      o.sampling.topK = static_cast<uint32_t>(number(a, value()));
    else if (a == "--top-p")
      o.sampling.topP = static_cast<float>(number(a, value()));
    else if (a == "--seed")
      o.sampling.seed = static_cast<uint64_t>(number(a, value()));
    else if (a == "--no-cuda-graph")
      o.noCudaGraph = true;
    else if (a == "score" || a == "generate")
      o.mode = a;
    else if (!a.empty() && a[0] != '-' && o.engine.empty())
      o.engine = a;
    else
      fail(2, "unknown argument '" + a + "'\n" + kUsage);
  }
  if (o.engine.empty() || o.mode.empty() || o.tokens.empty())
    fail(2, std::string("missing arguments\n") + kUsage);
  if (o.mode == "score" && o.out.empty())
    fail(2, "score needs --out FILE.npy");
  return o;
}

void writeNpy(const std::string &path, const std::vector<float> &data,
              const std::vector<size_t> &shape) {
  std::string dims;
  for (size_t d : shape)
    dims += std::to_string(d) + ", ";
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  uint16_t length = static_cast<uint16_t>(header.size());
  bytes.append(reinterpret_cast<const char *>(&length), 2);
  bytes += header;
  bytes.append(reinterpret_cast<const char *>(data.data()), data.size() * 4);
  std::string error;
  if (!sits::writeFileAtomic(path, bytes, &error))
    fail(1, error);
}

} // namespace

/// --calibration-log: the request's quantization statistics.
void writeCalibrationLog(const Options &o, sits::Session &session,
                         const sits::format::RuntimeConfig &config) {
  if (o.calibrationLog.empty())
    return;
  std::string error;
  if (!sits::format::writeTextFileAtomic(
          o.calibrationLog,
          sits::format::kvCalibrationJson(config.kvCache,
                                          session.kvCalibrationWords()),
          &error))
    fail(1, error);
}

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  std::string pathError;
  if (!o.calibrationLog.empty() &&
      !sits::format::checkWritablePath(o.calibrationLog, &pathError))
    fail(2, "--calibration-log: " + pathError);
  try {
    auto engine = sits::Engine::load(o.engine);
    sits::SessionOptions sessionOptions;
    sessionOptions.useCudaGraphs = !o.noCudaGraph;
    sits::Session session(engine, sessionOptions);
    if (!o.calibrationLog.empty() && !engine->config().kvCache.coldBits)
      fail(1, "--calibration-log needs an engine with a quantized KV cache");
    if (o.mode == "score") {
      size_t length = o.tokens[0].size();
      for (const auto &row : o.tokens)
        if (row.size() != length)
          fail(2, "score needs sequences of one length");
      auto logits = session.scoreTokens(o.tokens, o.prefill);
      size_t positions = logits[0].size(), vocab = logits[0][0].size();
      std::vector<float> flat;
      flat.reserve(o.tokens.size() * positions * vocab);
      for (const auto &sequence : logits)
        for (const auto &row : sequence)
          flat.insert(flat.end(), row.begin(), row.end());
      writeNpy(o.out, flat, {o.tokens.size(), positions, vocab});
      writeCalibrationLog(o, session, engine->config());
      return 0;
    }
    sits::GenerateParams params;
    params.maxNewTokens = o.maxNewTokens;
    params.sampling = o.sampling;
    params.stopAtEos = false;
    sits::GenerateResult result = session.generate(o.tokens, params);
    for (size_t b = 0; b < result.tokens.size(); ++b) {
      std::printf("tokens[%zu]:", b);
      for (int32_t t : result.tokens[b])
        std::printf(" %d", t);
      std::printf("\n");
    }
    std::printf("graphs: %u\n", session.capturedGraphs());
    writeCalibrationLog(o, session, engine->config());
    if (result.stats.tvc) { // as sits-emulate prints them
      const sits::GenerateStats &st = result.stats;
      uint64_t rows = st.tvcProvedRows + st.tvcFallbackRows;
      std::printf("tvc: %llu proved, %llu fallback rows (fallback rate "
                  "%.2f%%)\n",
                  static_cast<unsigned long long>(st.tvcProvedRows),
                  static_cast<unsigned long long>(st.tvcFallbackRows),
                  rows ? 100.0 * double(st.tvcFallbackRows) / double(rows)
                       : 0.0);
    }
    return 0;
  } catch (const sits::Error &error) {
    bool noGpu = error.code() == sits::ErrorCode::NoGpu ||
                 error.code() == sits::ErrorCode::WrongGpu;
    fail(noGpu ? 4 : 1, error.what());
  }
}
