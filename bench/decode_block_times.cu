//===- decode_block_times.cu - When each block of a decode kernel runs ----===//
//
// Launches the split-K decode attention kernels on the Llama-3-8B attention
// shape (32 query heads, 8 KV heads, head_dim 128, batch 1) over synthetic
// caches, outside any engine: attention_decode (fp16 cache) and
// attention_decode_kvq_mma (int4 cache, per-channel keys in blocks of 64,
// hot window 512). Each launch goes through a wrapper that records every
// block's SM and its start and end (%globaltimer), so that a kernel whose
// time is longer than its blocks' (ncu: the last SM active far longer than
// the others) shows where the difference is: blocks that start late, blocks
// on one SM that run one after the other, or a few long blocks.
//
// Each kernel runs at every block size of a list of keys per split (the
// engine's --decode-split-keys; the default engine takes 256).
//
// Built with the runtime (target decode-block-times, CUDA toolkit only);
// run on the device:
//   build/bin/decode-block-times [context [split keys,... [warm|cold]]]
// (defaults 8192, 256 and warm; e.g. `8192 128,256,512,1024 cold`). Warm
// times launches back to back with the caches in L2 (they fit: 10 MB of
// int4, 35 MB of fp16 at 8192); cold writes twice the L2 before each
// launch, as an engine step meets a layer's cache.
//
//===----------------------------------------------------------------------===//

#include "sits/attention_decode_kvq_mma.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kCapacity = 8448;
/// The block sizes compiled (keys per split), and the most splits of any.
constexpr int kSplitSizes[] = {128, 256, 512, 1024};
constexpr int kMaxSplits = (kCapacity + 127) / 128;

template <int SplitKeys> struct Fp16Cfg {
  typedef sits::F16 Cache;
  static constexpr int kHeads = ::kHeads, kKvHeads = ::kKvHeads;
  static constexpr int kHeadDim = ::kHeadDim, kCapacity = ::kCapacity;
  static constexpr int kWindow = 0, kSplitKeys = SplitKeys;
  static constexpr int kSplits = (kCapacity + SplitKeys - 1) / SplitKeys;
  static constexpr int kUnroll = 4, kStages = 3;
  static constexpr float kScale = 0.08838834764831845f, kSoftcap = 0.0f;
};

template <int SplitKeys> struct Int4Cfg : Fp16Cfg<SplitKeys> {
  static constexpr int kBits = 4, kGroup = 64, kGroups = 2;
  static constexpr int kRowBytes = kHeadDim * kBits / 8;
  static constexpr int kHotWindow = 512, kHotRows = 512 + 63 + 512;
  static constexpr bool kPerChannelKeys = true;
  static constexpr int kChannelBlock = 64;
  static constexpr int kScaleBlocks = (kCapacity + 63) / 64;
};

/// Per block: SM, start and end (ns, %globaltimer).
struct BlockTime {
  unsigned sm;
  unsigned long long start, end;
};

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void record(BlockTime *times, unsigned long long t0,
                                       bool atEnd) {
  __syncthreads();
  if (threadIdx.x == 0) {
    BlockTime &slot =
        times[(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x];
    if (atEnd) {
      slot.end = globalTimer();
      slot.start = t0;
      unsigned sm;
      asm("mov.u32 %0, %%smid;" : "=r"(sm));
      slot.sm = sm;
    }
  }
}

template <int SplitKeys>
__global__ void __launch_bounds__(sits::kDecodeThreads)
    fp16Kernel(const float *query, const unsigned short *keys,
               const unsigned short *values, float *out, float *partial,
               int *counters, const int *past, const int *step,
               BlockTime *times) {
  const unsigned long long t0 = globalTimer();
  sits::attentionDecode<Fp16Cfg<SplitKeys>>(query, keys, values, out, partial,
                                            counters, past, step);
  record(times, t0, true);
}

template <int SplitKeys>
__global__ void __launch_bounds__(sits::kMmaDecodeThreads, 2)
    int4Kernel(const float *query, const unsigned short *keyHot,
               const unsigned short *valueHot, const signed char *keyCold,
               const unsigned short *keyScales, const signed char *valueCold,
               const unsigned short *valueScales, float *out, float *partial,
               int *counters, const int *past, const int *step,
               BlockTime *times) {
  const unsigned long long t0 = globalTimer();
  sits::attentionDecodeKVQMma<Int4Cfg<SplitKeys>>(
      query, keyHot, valueHot, keyCold, keyScales, valueCold, valueScales, out,
      partial, counters, past, step);
  record(times, t0, true);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t status = (call);                                               \
    if (status != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status));     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// `count` bytes of device memory filled with `fill` (a byte pattern).
void *deviceBytes(size_t count, const std::vector<unsigned char> &pattern) {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, count));
  std::vector<unsigned char> host(count);
  for (size_t i = 0; i < count; ++i)
    host[i] = pattern[i % pattern.size()];
  CHECK(cudaMemcpy(p, host.data(), count, cudaMemcpyHostToDevice));
  return p;
}

/// A pattern of f16 values (small, positive and negative) or random bytes.
std::vector<unsigned char> halves(unsigned short a, unsigned short b) {
  return {static_cast<unsigned char>(a), static_cast<unsigned char>(a >> 8),
          static_cast<unsigned char>(b), static_cast<unsigned char>(b >> 8)};
}
std::vector<unsigned char> randomBytes(size_t n) {
  std::vector<unsigned char> v(n);
  unsigned state = 12345u;
  for (auto &byte : v)
    byte = static_cast<unsigned char>(
        (state = state * 1664525u + 1013904223u) >> 24);
  return v;
}

/// Summarizes the last launch's block times.
void report(const std::string &name, float microseconds, int splits,
            const std::vector<BlockTime> &times) {
  unsigned long long first = ~0ull, last = 0;
  for (const BlockTime &t : times) {
    first = std::min(first, t.start);
    last = std::max(last, t.end);
  }
  std::vector<double> durations, starts, ends;
  std::map<unsigned, std::vector<const BlockTime *>> bySm;
  for (const BlockTime &t : times) {
    durations.push_back((t.end - t.start) / 1000.0);
    starts.push_back((t.start - first) / 1000.0);
    ends.push_back((t.end - first) / 1000.0);
    bySm[t.sm].push_back(&t);
  }
  auto quantiles = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char text[128];
    std::snprintf(text, sizeof(text), "min %.2f median %.2f p90 %.2f max %.2f",
                  v.front(), v[v.size() / 2], v[v.size() * 9 / 10], v.back());
    return std::string(text);
  };
  int overlapped = 0, sequential = 0;
  for (auto &[sm, blocks] : bySm) {
    if (blocks.size() != 2)
      continue;
    const BlockTime &a = *blocks[0], &b = *blocks[1];
    (a.start < b.end && b.start < a.end ? overlapped : sequential)++;
  }
  std::printf("%s: %.2f us a launch (events), blocks %zu on %zu SMs, first "
              "start to last end %.2f us\n",
              name.c_str(), microseconds, times.size(), bySm.size(),
              (last - first) / 1000.0);
  std::printf("  block us:  %s\n", quantiles(durations).c_str());
  std::printf("  start us:  %s\n", quantiles(starts).c_str());
  std::printf("  end us:    %s\n", quantiles(ends).c_str());
  std::printf("  SMs with two blocks: %d overlapped, %d one after the other\n",
              overlapped, sequential);
  std::vector<size_t> order(times.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return times[x].end > times[y].end; });
  std::printf("  last to end (split, kv head: start..end us, SM):");
  for (int k = 0; k < 6; ++k) {
    const size_t i = order[k];
    std::printf(" (%zu,%zu: %.1f..%.1f, %u)", i % splits, i / splits, starts[i],
                ends[i], times[i].sm);
  }
  std::printf("\n");
}

/// The device buffers both kernels read, sized for the most splits.
struct Buffers {
  float *query, *out, *partial;
  void *fp16Keys, *fp16Values, *keyHot, *valueHot, *keyCold, *valueCold;
  void *keyScales, *valueScales;
  int *counters, *pastLengths, *stepLengths;
  BlockTime *times;
  int past; ///< the value at pastLengths
  /// With `cold`, each timed launch follows a write of flushBytes here, so
  /// that the caches come from DRAM as in an engine, where a step reads
  /// every layer's cache once (L2 holds a few layers' at most).
  void *flush;
  size_t flushBytes;
  bool cold;
};

/// Both kernels at SplitKeys keys a block: after a warm-up, kLaunches
/// launches timed together (warm: back to back over caches in L2) or one
/// by one after an L2 flush (cold: the median), then the block times of the
/// last one.
template <int SplitKeys> void measure(const Buffers &d) {
  typedef Int4Cfg<SplitKeys> Q;
  constexpr int kSplits = Q::kSplits;
  const dim3 grid(kSplits, kKvHeads, 1);
  const int fp16Shared =
      sits::attentionDecodeSharedBytes(kHeadDim, kHeads / kKvHeads, 4, 3);
  const int int4Shared = sits::attentionDecodeKVQMmaSharedBytes(
      kHeadDim, kHeads / kKvHeads, Q::kGroup, Q::kBits);
  CHECK(cudaFuncSetAttribute(fp16Kernel<SplitKeys>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             fp16Shared));
  CHECK(cudaFuncSetAttribute(int4Kernel<SplitKeys>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int4Shared));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  constexpr int kLaunches = 20;
  for (int kernel = 0; kernel < 2; ++kernel) {
    auto launch = [&] {
      if (kernel == 0)
        fp16Kernel<SplitKeys><<<grid, sits::kDecodeThreads, fp16Shared>>>(
            d.query, static_cast<unsigned short *>(d.fp16Keys),
            static_cast<unsigned short *>(d.fp16Values), d.out, d.partial,
            d.counters, d.pastLengths, d.stepLengths, d.times);
      else
        int4Kernel<SplitKeys><<<grid, sits::kMmaDecodeThreads, int4Shared>>>(
            d.query, static_cast<unsigned short *>(d.keyHot),
            static_cast<unsigned short *>(d.valueHot),
            static_cast<signed char *>(d.keyCold),
            static_cast<unsigned short *>(d.keyScales),
            static_cast<signed char *>(d.valueCold),
            static_cast<unsigned short *>(d.valueScales), d.out, d.partial,
            d.counters, d.pastLengths, d.stepLengths, d.times);
      CHECK(cudaGetLastError());
    };
    launch(); // warm-up
    CHECK(cudaDeviceSynchronize());
    float ms = 0.0f;
    if (d.cold) {
      std::vector<float> each;
      for (int i = 0; i < kLaunches; ++i) {
        CHECK(cudaMemsetAsync(d.flush, i, d.flushBytes));
        CHECK(cudaEventRecord(begin));
        launch();
        CHECK(cudaEventRecord(end));
        CHECK(cudaEventSynchronize(end));
        float one = 0.0f;
        CHECK(cudaEventElapsedTime(&one, begin, end));
        each.push_back(one);
      }
      std::sort(each.begin(), each.end());
      ms = each[each.size() / 2] * kLaunches; // reported per launch below
    } else {
      CHECK(cudaEventRecord(begin));
      for (int i = 0; i < kLaunches; ++i)
        launch();
      CHECK(cudaEventRecord(end));
      CHECK(cudaEventSynchronize(end));
      CHECK(cudaEventElapsedTime(&ms, begin, end));
    }
    std::vector<BlockTime> host(kSplits * kKvHeads);
    CHECK(cudaMemcpy(host.data(), d.times, sizeof(BlockTime) * host.size(),
                     cudaMemcpyDeviceToHost));
    report(std::string(kernel == 0 ? "attention_decode (fp16 cache)"
                                   : "attention_decode_kvq_mma (int4 cache)") +
               ", " + std::to_string(SplitKeys) + " keys a split" +
               (d.cold ? ", cold L2 (median)" : ""),
           1000.0f * ms / kLaunches, kSplits, host);
  }
  CHECK(cudaEventDestroy(begin));
  CHECK(cudaEventDestroy(end));
}

/// measure<kSplitSizes[i]> for the i with that size (main checked that
/// there is one).
template <int I = 0> void measureSize(int splitKeys, const Buffers &d) {
  if constexpr (I < static_cast<int>(std::size(kSplitSizes))) {
    if (splitKeys == kSplitSizes[I])
      measure<kSplitSizes[I]>(d);
    else
      measureSize<I + 1>(splitKeys, d);
  }
}

} // namespace

int main(int argc, char **argv) {
  const int context = argc > 1 ? std::atoi(argv[1]) : 8192;
  if (context < 1 || context >= kCapacity) {
    std::fprintf(stderr, "context must be in [1, %d)\n", kCapacity);
    return 1;
  }
  std::vector<int> splitSizes;
  for (const char *p = argc > 2 ? argv[2] : "256"; *p;) {
    char *next = nullptr;
    const long keys = std::strtol(p, &next, 10);
    if (next == p || (*next && *next != ',')) {
      std::fprintf(stderr,
                   "split keys must be a comma-separated list, got "
                   "'%s'\n",
                   argv[2]);
      return 1;
    }
    if (std::find(std::begin(kSplitSizes), std::end(kSplitSizes), keys) ==
        std::end(kSplitSizes)) {
      std::fprintf(stderr,
                   "no kernels built for %ld keys a split (built: "
                   "128, 256, 512, 1024)\n",
                   keys);
      return 1;
    }
    splitSizes.push_back(static_cast<int>(keys));
    p = *next ? next + 1 : next;
  }
  const std::string mode = argc > 3 ? argv[3] : "warm";
  if (mode != "warm" && mode != "cold") {
    std::fprintf(stderr, "the third argument must be warm or cold, got '%s'\n",
                 mode.c_str());
    return 1;
  }
  const int past = context; // the query at position `context`
  const size_t rows = size_t(kKvHeads) * kCapacity;
  typedef Int4Cfg<256> Q; // the cache layout does not depend on the split
  Buffers d;
  d.query = static_cast<float *>(
      deviceBytes(sizeof(float) * kHeads * kHeadDim, halves(0, 0)));
  {
    std::vector<float> q(kHeads * kHeadDim);
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = 0.25f * static_cast<float>((i * 7919) % 17) - 2.0f;
    CHECK(cudaMemcpy(d.query, q.data(), sizeof(float) * q.size(),
                     cudaMemcpyHostToDevice));
  }
  const auto smallHalves = halves(0x2e66, 0xae66); // 0.1, -0.1
  d.fp16Keys = deviceBytes(2 * rows * kHeadDim, smallHalves);
  d.fp16Values = deviceBytes(2 * rows * kHeadDim, smallHalves);
  const size_t hotRows = size_t(kKvHeads) * Q::kHotRows;
  d.keyHot = deviceBytes(2 * hotRows * kHeadDim, smallHalves);
  d.valueHot = deviceBytes(2 * hotRows * kHeadDim, smallHalves);
  d.keyCold = deviceBytes(rows * Q::kRowBytes, randomBytes(4096));
  d.valueCold = deviceBytes(rows * Q::kRowBytes, randomBytes(4099));
  const auto scales = halves(0x211f, 0x2266); // about 0.01 and 0.05
  d.keyScales =
      deviceBytes(2 * size_t(kKvHeads) * Q::kScaleBlocks * kHeadDim, scales);
  d.valueScales = deviceBytes(2 * rows * Q::kGroups, scales);
  d.out = static_cast<float *>(
      deviceBytes(sizeof(float) * kHeads * kHeadDim, halves(0, 0)));
  d.partial = static_cast<float *>(deviceBytes(
      sizeof(float) * kHeads * kMaxSplits * (kHeadDim + 4), halves(0, 0)));
  d.counters =
      static_cast<int *>(deviceBytes(sizeof(int) * kKvHeads, halves(0, 0)));
  d.pastLengths = static_cast<int *>(
      deviceBytes(sizeof(int), {static_cast<unsigned char>(past),
                                static_cast<unsigned char>(past >> 8), 0, 0}));
  d.stepLengths = static_cast<int *>(deviceBytes(sizeof(int), {1, 0, 0, 0}));
  d.past = past;
  d.cold = mode == "cold";
  int l2Bytes = 0;
  CHECK(cudaDeviceGetAttribute(&l2Bytes, cudaDevAttrL2CacheSize, 0));
  d.flushBytes = d.cold ? 2 * static_cast<size_t>(l2Bytes) : 0;
  d.flush = nullptr;
  if (d.cold)
    CHECK(cudaMalloc(&d.flush, d.flushBytes));
  d.times = static_cast<BlockTime *>(
      deviceBytes(sizeof(BlockTime) * kMaxSplits * kKvHeads, halves(0, 0)));
  for (int splitKeys : splitSizes)
    measureSize(splitKeys, d);
  return 0;
}
