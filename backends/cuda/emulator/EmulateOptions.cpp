//===- EmulateOptions.cpp - sits-emulate's command line -------------------===//

#include "backends/cuda/emulator/EmulateOptions.h"

#include "sits/EngineFormat.h"
#include "sits/KVCalibration.h"

#include <cstdio>
#include <cstdlib>

namespace sits::emulate {

void die(const std::string &message) {
  std::fprintf(stderr, "sits-emulate: error: %s\n", message.c_str());
  std::exit(1);
}

namespace {

const char *kUsage =
    "usage: sits-emulate ENGINE --cuda KERNELS.cu [--poison] "
    "[--reverse-schedule] score --tokens "
    "1,2,3[;4,5,6] [--prefill N] --out LOGITS.npy\n"
    "       sits-emulate ENGINE --cuda KERNELS.cu [--poison] generate "
    "--tokens 1,2,3[;...] --max-new-tokens N [--stagger N [--chunk N] "
    "[--padded]]\n"
    "  --calibration-log FILE.json  (quantized KV cache) write the "
    "quantization statistics after the run\n"
    "  --multiprocessors N  the SMs of the emulated GPU (the plan's M; "
    "default 2, so that kernels with a grid of a few blocks per SM loop "
    "over their work)\n"
    "  --persistent-decode  every decode step runs its bucket's persistent "
    "decode kernel (the source from sitsc --decode-kernels=persistent; "
    "--multiprocessors must be its --persistent-blocks)\n"
    "  --gemm-prefill  every prefill step runs the program prefill, "
    "none prefill_few (whose linear layers are GEMVs)\n"
    "  --count-programs  after generate, print \"programs: NAME STEPS ...\" "
    "(the steps each program ran)\n"
    "  --block-order shuffled|sequential  (paged KV cache) the order in "
    "which blocks are handed out (default shuffled)\n"
    "  --stagger N  sequence b joins after b x N steps, its prompt in "
    "chunks (--chunk, default the engine's) beside the others' decode "
    "tokens; --padded pads such steps even where the engine packs them\n"
    "       sits-emulate ENGINE --cuda KERNELS.cu prefix --tokens A;B --hit "
    "N --max-new-tokens N  (paged quantized KV cache) B's greedy tokens "
    "after loading the first N blocks A saved, as the runtime's prefix "
    "cache does\n";

std::vector<std::vector<int32_t>> parseTokens(const std::string &text) {
  std::vector<std::vector<int32_t>> rows(1);
  std::string number;
  auto flush = [&]() {
    if (number.empty())
      die("--tokens must be ids separated by ',' (sequences by ';'), got '" +
          text + "'");
    rows.back().push_back(static_cast<int32_t>(std::stol(number)));
    number.clear();
  };
  for (char c : text) {
    if (c >= '0' && c <= '9' && number.size() < 9) {
      number += c;
    } else if (c == ',') {
      flush();
    } else if (c == ';') {
      flush();
      rows.emplace_back();
    } else {
      die("--tokens must be ids separated by ',' (sequences by ';'), got '" +
          text + "'");
    }
  }
  flush();
  return rows;
}

} // namespace

Options parseArgs(int argc, char **argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto value = [&](size_t &i) -> std::string {
    if (i + 1 >= args.size())
      die(args[i] + " needs a value\n" + kUsage);
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--cuda")
      o.cuda = value(i);
    else if (a == "--poison")
      o.poison = true;
    else if (a == "--reverse-schedule")
      o.reverse = true;
    else if (a == "--tokens")
      o.tokens = parseTokens(value(i));
    else if (a == "--prefill")
      o.prefill = std::stol(value(i));
    else if (a == "--max-new-tokens")
      o.maxNewTokens = std::stol(value(i));
    else if (a == "--hit")
      o.hit = std::stol(value(i));
    else if (a == "--stagger")
      o.stagger = std::stol(value(i));
    else if (a == "--chunk")
      o.chunk = std::stol(value(i));
    else if (a == "--padded")
      o.padded = true;
    else if (a == "--persistent-decode")
      o.persistentDecode = true;
    else if (a == "--gemm-prefill")
      o.gemmPrefill = true;
    else if (a == "--count-programs")
      o.countPrograms = true;
    else if (a == "--out")
      o.out = value(i);
    else if (a == "--multiprocessors") {
      std::string text = value(i);
      char *end = nullptr;
      long count = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end || count < 1 ||
          count > format::kMaxMultiprocessors)
        die("--multiprocessors must be a number from 1 to " +
            std::to_string(format::kMaxMultiprocessors) + ", got '" + text +
            "'");
      o.multiprocessors = count;
    } else if (a == "--calibration-log") {
      o.calibrationLog = value(i);
    } else if (a == "--block-order") {
      std::string order = value(i);
      if (order != "shuffled" && order != "sequential")
        die("--block-order must be shuffled or sequential, got '" + order +
            "'");
      o.shuffleBlocks = order == "shuffled";
    } else if (a == "score" || a == "generate" || a == "prefix")
      o.mode = a;
    else if (!a.empty() && a[0] != '-' && o.engine.empty())
      o.engine = a;
    else
      die("unknown argument '" + a + "'\n" + kUsage);
  }
  if (o.engine.empty() || o.cuda.empty() || o.mode.empty() || o.tokens.empty())
    die(std::string("missing arguments\n") + kUsage);
  if (o.mode == "score" && o.out.empty())
    die("score needs --out FILE.npy");
  std::string pathError;
  if (!o.calibrationLog.empty() &&
      !format::checkWritablePath(o.calibrationLog, &pathError))
    die("--calibration-log: " + pathError);
  return o;
}

} // namespace sits::emulate
