#!/usr/bin/env python3
"""Adds %globaltimer phase points to a copy of the kernels and of
bench/decode_block_times.cu, so that the benchmark also prints, per warp
of the int4 kernel, when it has read past_lengths, issued its first loads,
received its first tile's words and queries, finished its first tile and
all of them, written its block's partial and left, and for each last
block how long the combine took.

  cp -r backends/cuda/kernels /tmp/p/sits
  cp bench/decode_block_times.cu /tmp/p/dbt.cu
  python3 bench/decode_phase_points.py /tmp/p/sits /tmp/p/dbt.cu
  nvcc -O3 -std=c++17 -arch=sm_90a -I /tmp/p /tmp/p/dbt.cu -o dbt-phases
  ./dbt-phases 8192

Copies only: the kernels in the tree carry no timing hooks. The anchors
are the kernels' own lines, so a change there can need a change here
(it stops with the anchor it did not find)."""
import sys
kdir, bench = sys.argv[1], sys.argv[2]

def edit(path, pairs):
    s = open(path).read()
    for old, new in pairs:
        assert s.count(old) == 1, (path, old, s.count(old))
        s = s.replace(old, new)
    open(path, 'w').write(s)

macro = '''#ifndef SITS_DECODE_PHASE
#define SITS_DECODE_PHASE(n, dep)
#endif
'''
last = '''    if (!isLast)
      return;
    __threadfence();
  }'''
if last not in open(kdir + '/attention_decode.cuh').read():
    last = '''    if (!isLast)
      return;
  }'''
edit(kdir + '/attention_decode.cuh', [
    ('#include "sits/common.cuh"\n', '#include "sits/common.cuh"\n' + macro),
    (last, last[:-4] + '\n    SITS_DECODE_PHASE(8, 0);\n  }'),
])
s = open(kdir + '/attention_decode_kvq_mma.cuh').read()
loop = next(a for a in ('    Words current, next;\n', '    Words current;\n    if (myTiles > 0)',
                         '    Words next;\n    if (myTiles > 0)') if a in s)
edit(kdir + '/attention_decode_kvq_mma.cuh', [
    ('  if (blockActive) {\n    const int myChunks',
     '  SITS_DECODE_PHASE(1, past);\n  if (blockActive) {\n    const int myChunks'),
    (loop, '    SITS_DECODE_PHASE(2, myTiles);\n' + loop),
    ('        processTile(current, r0, kColdTile, queryPairs);\n',
     '''        if (r0 == tileStart(0))
          SITS_DECODE_PHASE(3, current.keys[0][0][0] ^ current.values[3][1][0] ^ queryPairs[1][7]);
        processTile(current, r0, kColdTile, queryPairs);
        if (r0 == tileStart(0))
          SITS_DECODE_PHASE(4, __float_as_uint(o[7][3]) ^ __float_as_uint(rowSum[1]));
'''),
    ('#pragma unroll\n    for (int j = 0; j < 2; ++j) {\n      rowSum[j] += __shfl_xor_sync',
     '    SITS_DECODE_PHASE(5, __float_as_uint(o[7][3]) ^ __float_as_uint(rowSum[1]));\n#pragma unroll\n    for (int j = 0; j < 2; ++j) {\n      rowSum[j] += __shfl_xor_sync'),
    ('  combineSplits<Cfg, kMmaDecodeThreads>(',
     '  SITS_DECODE_PHASE(6, 0);\n  combineSplits<Cfg, kMmaDecodeThreads>('),
])
b = open(bench).read()
shared = 'attentionDecodeKVQMmaSharedBytes(kHeadDim, kHeads / kKvHeads)' in b
edit(bench, [
    ('#include "sits/attention_decode_kvq_mma.cuh"\n', '''__device__ unsigned long long *gPhaseTimes;
constexpr int kPhases = 10;
__device__ __forceinline__ void decodePhase(int n, unsigned dep) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "r"(dep));
  if (threadIdx.x % 32 == 0 && gPhaseTimes)
    gPhaseTimes[(((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x +
                  blockIdx.x) * 8 + threadIdx.x / 32) * kPhases + n] = t;
}
#define SITS_DECODE_PHASE(n, dep) decodePhase(n, static_cast<unsigned>(dep))
#include "sits/attention_decode_kvq_mma.cuh"
'''),
    ('''  const unsigned long long t0 = globalTimer();
  sits::attentionDecodeKVQMma''', '''  const unsigned long long t0 = globalTimer();
  decodePhase(0, 0);
  sits::attentionDecodeKVQMma'''),
    ('''  record(times, t0, true);
}

#define CHECK''', '''  record(times, t0, true);
  decodePhase(7, 0);
}

#define CHECK'''),
    ('  const dim3 grid(kSplits, kKvHeads, 1);', '''  const size_t phaseSlots = size_t(kSplits) * kKvHeads * 8 * kPhases;
  unsigned long long *phases = static_cast<unsigned long long *>(
      deviceBytes(8 * phaseSlots, halves(0, 0)));
  const dim3 grid(kSplits, kKvHeads, 1);'''),
    ('''           1000.0f * ms / kLaunches, kSplits, host);''', '''           1000.0f * ms / kLaunches, kSplits, host);
    if (kernel == 1) {
      CHECK(cudaMemset(phases, 0, 8 * phaseSlots));
      CHECK(cudaMemcpyToSymbol(gPhaseTimes, &phases, sizeof(phases)));
      launch();
      CHECK(cudaDeviceSynchronize());
      std::vector<unsigned long long> p(phaseSlots);
      CHECK(cudaMemcpy(p.data(), phases, 8 * phaseSlots, cudaMemcpyDeviceToHost));
      const char *names[kPhases] = {"entry", "past read", "prologue done", "tile0 data+Q'", "tile0 done", "tiles done", "partial written", "exit", "is last", "-"};
      const int chunksTotal = (d.past + 1 + 63) / 64, hotStart = d.past + 1 - 512;
      for (int cls = 0; cls < 2; ++cls) {
        std::printf("  phases (%s blocks), us since warp entry: median / p90 / max\\n", cls ? "hot" : "all-cold");
        for (int n = 1; n < 8; ++n) {
          std::vector<double> d;
          for (size_t w = 0; w < phaseSlots / kPhases; ++w) {
            const unsigned long long *q = &p[w * kPhases];
            const int split = int(w / 8 % kSplits);
            if (!q[0] || !q[n]) continue;
            bool hasHot = false;
            for (int c = split; c < chunksTotal; c += kSplits) if ((c + 1) * 64 > hotStart) hasHot = true;
            if (hasHot != (cls == 1)) continue;
            d.push_back((q[n] - q[0]) / 1000.0);
          }
          if (d.empty()) { std::printf("    %-16s -\\n", names[n]); continue; }
          std::sort(d.begin(), d.end());
          std::printf("    %-16s %6.2f / %6.2f / %6.2f  n=%zu\\n", names[n], d[d.size()/2], d[d.size()*9/10], d.back(), d.size());
        }
      }
      std::vector<double> comb, wait;
      for (size_t w = 0; w < phaseSlots / kPhases; ++w) {
        const unsigned long long *q = &p[w * kPhases];
        if (q[8] && q[7] && q[6]) { comb.push_back((q[7] - q[8]) / 1000.0); wait.push_back((q[8] - q[6]) / 1000.0); }
      }
      std::sort(comb.begin(), comb.end()); std::sort(wait.begin(), wait.end());
      if (!comb.empty())
        std::printf("  last blocks: partial written -> is last %.2f..%.2f us, combine %.2f..%.2f us (n=%zu warps)\\n", wait.front(), wait.back(), comb.front(), comb.back(), comb.size());
      void *null = nullptr;
      CHECK(cudaMemcpyToSymbol(gPhaseTimes, &null, sizeof(null)));
    }'''),
])
