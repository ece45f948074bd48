//===- kv_decode_tests.cpp - Decode attention over a quantized cache ------===//
//
// Compiled as host C++ with the emulator by emulate-kv-decode.test. Fills a
// quantized cache with independent random data (hot ring rows in f16, cold
// levels over the whole range, f16 scales), so that a key or value read
// from the wrong part, row, group or block gives a different result, and
// checks both split-K decode kernels over it against a float64 reference
// of sits.attention with cold operands: attention_decode_kvq.cuh (f32
// products) and attention_decode_kvq_mma.cuh (tensor cores; queries, cold
// products and probabilities rounded to f16). Sequences: one across many
// splits, one inside a single split, one of padding (zeros). Shapes the
// committed models lack: head_dim 128 with several scale groups per row,
// 4 and 8 query heads per KV head, rings that wrap, sliding windows, a
// softcap, per-channel key blocks smaller than a tile. Prints one line per
// case and "N passed, N failed".
//
//===----------------------------------------------------------------------===//

#include "sits/attention_decode_kvq.cuh"
#include "sits/attention_decode_kvq_mma.cuh"

#include "half_bits.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

int passed = 0, failed = 0;
std::mt19937_64 rng(11);

struct Shape {
  int bits, headDim, group, heads, kvHeads;
  bool perChannel;
  int block, hotWindow, hotRows, capacity, window, splitKeys;
  float softcap;
};

template <int Bits, int D, int Group, int Heads, int KvHeads, bool PerChannel,
          int Block, int HotWindow, int HotRows, int Capacity, int Window,
          int SplitKeys, int SoftcapX10>
struct Config {
  typedef sits::F16 Cache;
  static constexpr int kHeads = Heads;
  static constexpr int kKvHeads = KvHeads;
  static constexpr int kHeadDim = D;
  static constexpr int kCapacity = Capacity;
  static constexpr int kWindow = Window;
  static constexpr int kSplitKeys = SplitKeys;
  static constexpr int kSplits = (Capacity + SplitKeys - 1) / SplitKeys;
  static constexpr int kUnroll = 4;
  static constexpr int kStages = 3;
  static constexpr float kScale = 0.125f;
  static constexpr float kSoftcap = SoftcapX10 / 10.0f;
  static constexpr int kBits = Bits;
  static constexpr int kGroup = Group;
  static constexpr int kGroups = (D + Group - 1) / Group;
  static constexpr int kRowBytes = D * Bits / 8;
  static constexpr int kHotWindow = HotWindow;
  static constexpr int kHotRows = HotRows;
  static constexpr bool kPerChannelKeys = PerChannel;
  static constexpr int kChannelBlock = PerChannel ? Block : 1;
  static constexpr int kScaleBlocks =
      (Capacity + kChannelBlock - 1) / kChannelBlock;
  static Shape shape() {
    return {Bits,          D,         Group,   Heads,    KvHeads, PerChannel,
            kChannelBlock, HotWindow, HotRows, Capacity, Window,  SplitKeys,
            kSoftcap};
  }
};

template <class Cfg, bool kMma> void entry(void **args) {
  using sits_emu::arg;
  auto kernel = [] {
    if constexpr (kMma)
      return sits::attentionDecodeKVQMma<Cfg>;
    else
      return sits::attentionDecodeKVQ<Cfg>;
  }();
  kernel(
      arg<const float *>(args[0]), arg<const unsigned short *>(args[1]),
      arg<const unsigned short *>(args[2]), arg<const signed char *>(args[3]),
      arg<const unsigned short *>(args[4]), arg<const signed char *>(args[5]),
      arg<const unsigned short *>(args[6]), arg<float *>(args[7]),
      arg<float *>(args[8]), arg<int *>(args[9]), arg<const int *>(args[10]),
      arg<const int *>(args[11]), /*blockTable=*/nullptr);
}

float uniform(float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

/// The cache and the queries of one case, and the reference's reads.
struct Case {
  Shape s;
  int batch = 3;
  std::vector<unsigned short> keyHot, valueHot, keyScales, valueScales;
  std::vector<signed char> keyCold, valueCold;
  std::vector<float> query;
  std::vector<int> past, steps;

  explicit Case(const Shape &shape) : s(shape) {
    const long rows = long(batch) * s.kvHeads;
    const int groups = (s.headDim + s.group - 1) / s.group;
    const int rowBytes = s.headDim * s.bits / 8;
    keyHot.resize(rows * s.hotRows * s.headDim);
    valueHot.resize(keyHot.size());
    for (size_t i = 0; i < keyHot.size(); ++i) {
      keyHot[i] = halfBits(uniform(-2.0f, 2.0f));
      valueHot[i] = halfBits(uniform(-2.0f, 2.0f));
    }
    keyCold.resize(rows * s.capacity * rowBytes);
    valueCold.resize(keyCold.size());
    for (size_t i = 0; i < keyCold.size(); ++i) {
      keyCold[i] = static_cast<signed char>(rng());
      valueCold[i] = static_cast<signed char>(rng());
    }
    if (s.bits == 8) // levels within +-127, as sits.quantize writes them
      for (auto *cold : {&keyCold, &valueCold})
        for (signed char &level : *cold)
          if (level == -128)
            level = -127;
    // Scales (and 2 halves of padding past the last one, as the engine's).
    const long blocks = (s.capacity + s.block - 1) / s.block;
    keyScales.resize((s.perChannel ? rows * blocks * s.headDim
                                   : rows * s.capacity * groups) +
                     2);
    valueScales.resize(rows * s.capacity * groups + 2);
    const float top = s.bits == 4 ? 0.3f : 0.016f;
    for (auto *scales : {&keyScales, &valueScales})
      for (unsigned short &scale : *scales)
        scale = halfBits(uniform(0.2f * top, top));
    query.resize(long(batch) * s.heads * s.headDim);
    for (float &q : query)
      q = uniform(-1.5f, 1.5f);
    past = {s.capacity - 5, 37, 90};
    steps = {1, 1, 0}; // sequence 2 is padding
  }

  long seqHead(int b, int kvHead) const { return long(b) * s.kvHeads + kvHead; }
  double coldValue(const std::vector<signed char> &cold, int b, int h, int j,
                   int d) const {
    const int rowBytes = s.headDim * s.bits / 8;
    const signed char *row =
        cold.data() + (seqHead(b, h) * s.capacity + j) * rowBytes;
    if (s.bits == 8)
      return row[d];
    const int nibble =
        (static_cast<unsigned char>(row[d / 2]) >> (4 * (d % 2))) & 0xf;
    return nibble >= 8 ? nibble - 16 : nibble;
  }
  /// Key or value j, channel d, as sits.attention reads it.
  double read(bool isKey, int b, int h, int j, int d) const {
    const int groups = (s.headDim + s.group - 1) / s.group;
    const int past = this->past[b];
    const int last = isKey ? (j / s.block) * s.block + s.block - 1 : j;
    if (past - last >= s.hotWindow) {
      double scale;
      if (isKey && s.perChannel) {
        const long blocks = (s.capacity + s.block - 1) / s.block;
        scale = halfValue(
            keyScales[(seqHead(b, h) * blocks + j / s.block) * s.headDim + d]);
      } else {
        const auto &scales = isKey ? keyScales : valueScales;
        scale = halfValue(
            scales[(seqHead(b, h) * s.capacity + j) * groups + d / s.group]);
      }
      return scale * coldValue(isKey ? keyCold : valueCold, b, h, j, d);
    }
    const auto &hot = isKey ? keyHot : valueHot;
    return halfValue(
        hot[(seqHead(b, h) * s.hotRows + j % s.hotRows) * s.headDim + d]);
  }
};

template <class Cfg, bool kMma> void check(const std::string &name) {
  const Shape s = Cfg::shape();
  Case c(s);
  const int B = c.batch, D = s.headDim, G = s.heads / s.kvHeads;
  std::vector<float> out(size_t(B) * s.heads * D, -7.0f);
  std::vector<float> partial(size_t(B) * s.heads * Cfg::kSplits * (D + 4),
                             std::nanf(""));
  std::vector<int> counters(B * s.kvHeads, 0);
  void *pointers[] = {
      c.query.data(),       c.keyHot.data(),    c.valueHot.data(),
      c.keyCold.data(),     c.keyScales.data(), c.valueCold.data(),
      c.valueScales.data(), out.data(),         partial.data(),
      counters.data(),      c.past.data(),      c.steps.data()};
  void *args[12];
  for (int i = 0; i < 12; ++i)
    args[i] = &pointers[i];
  const unsigned shared =
      kMma ? sits::attentionDecodeKVQMmaSharedBytes(D, G, Cfg::kGroup,
                                                    Cfg::kBits)
           : sits::attentionDecodeSharedBytes(D, G, Cfg::kUnroll, Cfg::kStages);
  unsigned grid[3] = {unsigned(Cfg::kSplits), unsigned(s.kvHeads), unsigned(B)};
  unsigned block[3] = {kMma ? unsigned(sits::kMmaDecodeThreads)
                            : unsigned(sits::kDecodeThreads),
                       1, 1};
  char error[512];
  if (sits_emu_launch(entry<Cfg, kMma>, grid, block, shared, args, error,
                      sizeof(error)) != 0) {
    std::printf("%-52s launch failed: %s FAIL\n", name.c_str(), error);
    ++failed;
    return;
  }

  // float64 reference; the error relative to the largest |value|.
  double worst = 0.0;
  for (int b = 0; b < B; ++b)
    for (int head = 0; head < s.heads; ++head) {
      const int h = head / G;
      const float *q = c.query.data() + (long(b) * s.heads + head) * D;
      const int keyEnd = std::min(c.past[b] + 1, s.capacity);
      const int keyBegin =
          s.window > 0 ? std::max(0, c.past[b] - s.window + 1) : 0;
      std::vector<double> weight(keyEnd > keyBegin ? keyEnd - keyBegin : 0);
      double best = -INFINITY, sum = 0.0;
      for (int j = keyBegin; j < keyEnd; ++j) {
        double dot = 0.0;
        for (int d = 0; d < D; ++d)
          dot += double(q[d]) * c.read(true, b, h, j, d);
        double score = 0.125 * dot;
        if (s.softcap > 0.0f)
          score = s.softcap * std::tanh(score / s.softcap);
        weight[j - keyBegin] = score;
        best = std::max(best, score);
      }
      for (double &w : weight)
        sum += (w = std::exp(w - best));
      double scaleOfValues = 1e-30;
      for (int d = 0; d < D; ++d) {
        double expect = 0.0;
        for (int j = keyBegin; j < keyEnd; ++j) {
          const double v = c.read(false, b, h, j, d);
          expect += weight[j - keyBegin] * v / sum;
          scaleOfValues = std::max(scaleOfValues, std::fabs(v));
        }
        if (c.steps[b] == 0)
          expect = 0.0; // padding rows are zeros
        const double got = out[(long(b) * s.heads + head) * D + d];
        const double error = std::fabs(got - expect) / scaleOfValues;
        worst = std::isnan(got) ? INFINITY : std::max(worst, error);
      }
    }
  int counterSum = 0;
  for (int count : counters)
    counterSum += count;
  // f32 products agree to rounding; f16 queries, cold products and
  // probabilities to a few f16 ulps of the values.
  const double tolerance = kMma ? 8e-4 : 2e-5;
  const bool ok = worst <= tolerance && counterSum == 0;
  (ok ? passed : failed)++;
  std::printf("%-52s max error %.2e (of |v|), counters %s %s\n", name.c_str(),
              worst, counterSum == 0 ? "reset" : "left set",
              ok ? "ok" : "FAIL");
}

} // namespace

int main() {
  // Bits, D, group, heads, kv heads, per-channel, block, hot window, ring
  // rows, capacity, window, split keys, softcap x 10.
  typedef Config<4, 128, 64, 8, 2, true, 64, 64, 640, 640, 0, 128, 0> Int4D128;
  typedef Config<8, 128, 32, 8, 2, false, 1, 40, 48, 520, 300, 128, 0>
      Int8D128Window;
  typedef Config<4, 64, 64, 16, 2, true, 8, 20, 36, 300, 0, 64, 300>
      Int4D64Softcap;
  typedef Config<4, 32, 16, 4, 2, false, 1, 16, 24, 200, 0, 64, 0> Int4D32;
  typedef Config<4, 32, 32, 4, 2, false, 1, 16, 24, 200, 0, 64, 0> Int4D32G32;
  typedef Config<4, 128, 64, 8, 2, false, 1, 48, 64, 400, 0, 128, 0>
      Int4D128PerToken;
  typedef Config<8, 64, 64, 8, 1, true, 32, 40, 80, 330, 0, 64, 0>
      Int8D64Block32;
  typedef Config<4, 128, 64, 8, 2, true, 64, 64, 200, 1100, 0, 512, 0>
      Int4D128LongSplits;
  check<Int4D128, true>("mma: int4 D=128 G=4 per-channel blocks of 64");
  check<Int8D128Window, true>(
      "mma: int8 D=128 G=4 per-token groups of 32, window");
  check<Int4D64Softcap, true>(
      "mma: int4 D=64 G=8 per-channel blocks of 8, softcap");
  check<Int4D32G32, true>("mma: int4 D=32 G=2 per-token groups of 32");
  check<Int4D128PerToken, true>("mma: int4 D=128 G=4 per-token groups of 64");
  check<Int8D64Block32, true>("mma: int8 D=64 G=8 per-channel blocks of 32");
  check<Int4D128LongSplits, true>("mma: int4 D=128 G=4, 4 tiles a warp, ring");
  check<Int4D32, false>("f32: int4 D=32 G=2 per-token groups of 16");
  check<Int4D128LongSplits, false>("f32: int4 D=128 G=4, splits of 512, ring");
  check<Int4D128, false>("f32: int4 D=128 G=4 per-channel blocks of 64");
  check<Int8D128Window, false>(
      "f32: int8 D=128 G=4 per-token groups of 32, window");
  sits_emu_set_reverse_schedule(1);
  check<Int4D64Softcap, true>("reverse schedule: mma int4 D=64 G=8");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
