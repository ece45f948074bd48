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
// Built with the runtime (target decode-block-times, CUDA toolkit only);
// run on the device: build/bin/decode-block-times [context] (default 8192).
//
//===----------------------------------------------------------------------===//

#include "sits/attention_decode_kvq_mma.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kCapacity = 8448;
constexpr int kSplitKeys = 256, kSplits = (kCapacity + kSplitKeys - 1) / 256;

struct Fp16Cfg {
  typedef sits::F16 Cache;
  static constexpr int kHeads = ::kHeads, kKvHeads = ::kKvHeads;
  static constexpr int kHeadDim = ::kHeadDim, kCapacity = ::kCapacity;
  static constexpr int kWindow = 0, kSplitKeys = ::kSplitKeys;
  static constexpr int kSplits = ::kSplits, kUnroll = 4, kStages = 3;
  static constexpr float kScale = 0.08838834764831845f, kSoftcap = 0.0f;
};

struct Int4Cfg : Fp16Cfg {
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

__global__ void __launch_bounds__(sits::kDecodeThreads)
    fp16Kernel(const float *query, const unsigned short *keys,
               const unsigned short *values, float *out, float *partial,
               int *counters, const int *past, const int *step,
               BlockTime *times) {
  const unsigned long long t0 = globalTimer();
  sits::attentionDecode<Fp16Cfg>(query, keys, values, out, partial, counters,
                                 past, step);
  record(times, t0, true);
}

__global__ void __launch_bounds__(sits::kMmaDecodeThreads, 2)
    int4Kernel(const float *query, const unsigned short *keyHot,
               const unsigned short *valueHot, const signed char *keyCold,
               const unsigned short *keyScales, const signed char *valueCold,
               const unsigned short *valueScales, float *out, float *partial,
               int *counters, const int *past, const int *step,
               BlockTime *times) {
  const unsigned long long t0 = globalTimer();
  sits::attentionDecodeKVQMma<Int4Cfg>(query, keyHot, valueHot, keyCold,
                                       keyScales, valueCold, valueScales, out,
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
void report(const char *name, float microseconds,
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
              name, microseconds, times.size(), bySm.size(),
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
    std::printf(" (%zu,%zu: %.1f..%.1f, %u)", i % kSplits, i / kSplits,
                starts[i], ends[i], times[i].sm);
  }
  std::printf("\n");
}

} // namespace

int main(int argc, char **argv) {
  const int context = argc > 1 ? std::atoi(argv[1]) : 8192;
  if (context < 1 || context >= kCapacity) {
    std::fprintf(stderr, "context must be in [1, %d)\n", kCapacity);
    return 1;
  }
  const int past = context; // the query at position `context`
  const size_t rows = size_t(kKvHeads) * kCapacity;
  float *query = static_cast<float *>(
      deviceBytes(sizeof(float) * kHeads * kHeadDim, halves(0, 0)));
  {
    std::vector<float> q(kHeads * kHeadDim);
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = 0.25f * static_cast<float>((i * 7919) % 17) - 2.0f;
    CHECK(cudaMemcpy(query, q.data(), sizeof(float) * q.size(),
                     cudaMemcpyHostToDevice));
  }
  const auto smallHalves = halves(0x2e66, 0xae66); // 0.1, -0.1
  void *fp16Keys = deviceBytes(2 * rows * kHeadDim, smallHalves);
  void *fp16Values = deviceBytes(2 * rows * kHeadDim, smallHalves);
  const size_t hotRows = size_t(kKvHeads) * Int4Cfg::kHotRows;
  void *keyHot = deviceBytes(2 * hotRows * kHeadDim, smallHalves);
  void *valueHot = deviceBytes(2 * hotRows * kHeadDim, smallHalves);
  void *keyCold = deviceBytes(rows * Int4Cfg::kRowBytes, randomBytes(4096));
  void *valueCold = deviceBytes(rows * Int4Cfg::kRowBytes, randomBytes(4099));
  const auto scales = halves(0x211f, 0x2266); // about 0.01 and 0.05
  void *keyScales = deviceBytes(
      2 * size_t(kKvHeads) * Int4Cfg::kScaleBlocks * kHeadDim, scales);
  void *valueScales = deviceBytes(2 * rows * Int4Cfg::kGroups, scales);
  float *out = static_cast<float *>(
      deviceBytes(sizeof(float) * kHeads * kHeadDim, halves(0, 0)));
  float *partial = static_cast<float *>(deviceBytes(
      sizeof(float) * kHeads * kSplits * (kHeadDim + 4), halves(0, 0)));
  int *counters =
      static_cast<int *>(deviceBytes(sizeof(int) * kKvHeads, halves(0, 0)));
  int *pastLengths = static_cast<int *>(
      deviceBytes(sizeof(int), {static_cast<unsigned char>(past),
                                static_cast<unsigned char>(past >> 8), 0, 0}));
  int *stepLengths = static_cast<int *>(deviceBytes(sizeof(int), {1, 0, 0, 0}));
  BlockTime *times = static_cast<BlockTime *>(
      deviceBytes(sizeof(BlockTime) * kSplits * kKvHeads, halves(0, 0)));

  const dim3 grid(kSplits, kKvHeads, 1);
  const int fp16Shared =
      sits::attentionDecodeSharedBytes(kHeadDim, kHeads / kKvHeads, 4, 3);
  const int int4Shared = sits::attentionDecodeKVQMmaSharedBytes(
      kHeadDim, kHeads / kKvHeads, Int4Cfg::kGroup, Int4Cfg::kBits);
  CHECK(cudaFuncSetAttribute(
      fp16Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fp16Shared));
  CHECK(cudaFuncSetAttribute(
      int4Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int4Shared));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  constexpr int kLaunches = 20;
  for (int kernel = 0; kernel < 2; ++kernel) {
    auto launch = [&] {
      if (kernel == 0)
        fp16Kernel<<<grid, sits::kDecodeThreads, fp16Shared>>>(
            query, static_cast<unsigned short *>(fp16Keys),
            static_cast<unsigned short *>(fp16Values), out, partial, counters,
            pastLengths, stepLengths, times);
      else
        int4Kernel<<<grid, sits::kMmaDecodeThreads, int4Shared>>>(
            query, static_cast<unsigned short *>(keyHot),
            static_cast<unsigned short *>(valueHot),
            static_cast<signed char *>(keyCold),
            static_cast<unsigned short *>(keyScales),
            static_cast<signed char *>(valueCold),
            static_cast<unsigned short *>(valueScales), out, partial, counters,
            pastLengths, stepLengths, times);
    };
    launch(); // warm-up
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(begin));
    for (int i = 0; i < kLaunches; ++i)
      launch();
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    std::vector<BlockTime> host(kSplits * kKvHeads);
    CHECK(cudaMemcpy(host.data(), times, sizeof(BlockTime) * host.size(),
                     cudaMemcpyDeviceToHost));
    report(kernel == 0 ? "attention_decode (fp16 cache)"
                       : "attention_decode_kvq_mma (int4 cache)",
           1000.0f * ms / kLaunches, host);
  }
  return 0;
}
