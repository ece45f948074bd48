//===- kv_quant.cuh - The quantized KV cache: cold copies, calibration ----===//
//
// A quantized cache (#sits.kv_quant) keeps, per layer and for K and V apart:
//   hot    [max_batch, kv_heads, kHotRows, head_dim] FP16/BF16, a ring: token
//          j of a sequence lives in row j % kHotRows (append_kv writes it);
//   cold   [max_batch, kv_heads, capacity, kRowBytes] int8, or int4 two per
//          byte (the even channel in the low nibble);
//   scales f16: per token [.., capacity, kGroups] (groups of kGroup
//          channels), or for per-channel keys [.., kScaleBlocks, head_dim]
//          (one scale per channel and block of kChannelBlock tokens).
// A paged cache (kBlockTokens = B, kMaxBlocks) keeps the cold rows and
// scales in the pool's blocks instead, `[blocks, kv_heads, B, ..]` and
// per-channel key scales `[blocks, kv_heads, B / kChannelBlock, head_dim]`,
// through the block table (ColdRows); the hot ring stays per sequence.
//
// quantizeKV runs after the step's append: the token that leaves the hot
// window at each of the step's query positions p (token p - kHotWindow) is
// quantized from its hot row, with scales computed from its own values by
// sits.quantize's rule (f32 absmax / L, f16 scale, rint half to even,
// clamp); with per-channel keys a block of keys is quantized when its last
// token leaves the window. The ring holds kHotWindow + kChannelBlock - 1 +
// max_prefill_tokens rows, so every row is quantized before the ring
// overwrites it (docs/codegen.md).
//
// Calibration: per (layer, kv head, K or V) eight u64 counters (tokens,
// groups, values, clipped values, f64 sum of scales, f64 sum of squared
// errors, min and max scale), accumulated with atomics; the runtime zeroes
// them at the start of a request and reads them once at its end.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_KV_QUANT_CUH
#define SITS_KERNELS_KV_QUANT_CUH

#include "sits/common.cuh"

namespace sits {

typedef unsigned long long u64;

/// Counters per (layer, kv head, K/V); index 0 K, 1 V.
constexpr int kKVStatSlots = 8;

__device__ __forceinline__ bool isFiniteBits(float x) {
  return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ float absBits(float x) {
  return __uint_as_float(__float_as_uint(x) & 0x7fffffffu);
}

/// sits.quantize's scale of a group with maximum magnitude `absMax`
/// (`finite`: no NaN or infinity in the group): f32 division by L, rounded
/// to f16, at most 65504; NaN for a non-finite group.
template <int kBits>
__device__ __forceinline__ u16 groupScaleBits(float absMax, bool finite) {
  if (!finite)
    return 0x7e00u; // NaN
  const float scale = absMax / static_cast<float>((1 << (kBits - 1)) - 1);
  float rounded = halfToFloat(floatToHalf(scale));
  if (!(rounded <= 65504.0f))
    rounded = 65504.0f;
  return floatToHalf(rounded);
}

/// sits.quantize's level of `x` with scale `s`; counts a clipped value.
template <int kBits>
__device__ __forceinline__ int quantLevel(float x, float s, bool *clipped) {
  *clipped = false;
  if (!(s > 0.0f))
    return 0;
  constexpr float kLimit = static_cast<float>((1 << (kBits - 1)) - 1);
  float level = rintf(x / s);
  if (level > kLimit || level < -kLimit) {
    *clipped = true;
    level = level > 0.0f ? kLimit : -kLimit;
  }
  return static_cast<int>(level);
}

/// The signed level of channel `d` in a cold row.
template <int kBits>
__device__ __forceinline__ int coldLevel(const signed char *row, int d) {
  if constexpr (kBits == 8) {
    return row[d];
  } else {
    const int byte = static_cast<unsigned char>(row[d >> 1]);
    const int nibble = (d & 1) ? byte >> 4 : byte & 0xf;
    return nibble >= 8 ? nibble - 16 : nibble;
  }
}

/// Eight cold channels (the first 8 or 4 bytes of `raw`) times their
/// scales, as sits.dequantize: one f32 product each.
template <int kBits>
__device__ __forceinline__ void unpackCold(const uint4 &raw,
                                           const float *scales, float *out) {
  const u32 words[2] = {raw.x, raw.y};
  for (int e = 0; e < 8; ++e) {
    int level;
    if constexpr (kBits == 8) {
      level = static_cast<signed char>((words[e / 4] >> (8 * (e % 4))) & 0xffu);
    } else {
      const int nibble = static_cast<int>((raw.x >> (4 * e)) & 0xfu);
      level = nibble >= 8 ? nibble - 16 : nibble;
    }
    out[e] = scales[e] * static_cast<float>(level);
  }
}

/// The cold parts of one (sequence b, kv head): row bytes, per-token scales
/// and per-channel key scales, per sequence or in the pool's blocks (B a
/// multiple of kChannelBlock, so that a block of keys lies in one block).
template <class Cfg> struct ColdRows {
  static_assert(kvBlockTokensOf<Cfg>(0) % Cfg::kChannelBlock == 0,
                "a paged block holds whole blocks of per-channel keys");
  PagedRows<Cfg::kKvHeads, Cfg::kRowBytes, Cfg::kCapacity,
            kvBlockTokensOf<Cfg>(0), kvMaxBlocksOf<Cfg>(0)>
      rows;
  PagedRows<Cfg::kKvHeads, Cfg::kGroups, Cfg::kCapacity,
            kvBlockTokensOf<Cfg>(0), kvMaxBlocksOf<Cfg>(0)>
      tokenScales;
  PagedRows<Cfg::kKvHeads, Cfg::kHeadDim, Cfg::kScaleBlocks,
            kvBlockTokensOf<Cfg>(0) / Cfg::kChannelBlock, kvMaxBlocksOf<Cfg>(0)>
      channelScales;
  __device__ __forceinline__ ColdRows(const int *blockTable, int b, int kvHead)
      : rows(blockTable, b, kvHead), tokenScales(blockTable, b, kvHead),
        channelScales(blockTable, b, kvHead) {}
  /// Byte offset of token t's cold row.
  __device__ __forceinline__ long row(int t) const { return rows.at(t); }
  /// Index of token t's first per-token scale.
  __device__ __forceinline__ long tokenScale(int t) const {
    return tokenScales.at(t);
  }
  /// Index of the first channel's scale of per-channel key block c.
  __device__ __forceinline__ long channelScale(int c) const {
    return channelScales.at(c);
  }
};

/// Adds one group's statistics (reduced over a warp by the caller) to a
/// (layer, head, K/V) slot.
__device__ __forceinline__ void addStats(u64 *slot, u64 tokens, u64 groups,
                                         u64 values, u64 clipped,
                                         float scaleSum, float errorSum,
                                         float scaleMin, float scaleMax) {
  if (tokens)
    atomicAdd(slot + 0, tokens);
  atomicAdd(slot + 1, groups);
  atomicAdd(slot + 2, values);
  if (clipped)
    atomicAdd(slot + 3, clipped);
  atomicAdd(reinterpret_cast<double *>(slot + 4),
            static_cast<double>(scaleSum));
  atomicAdd(reinterpret_cast<double *>(slot + 5),
            static_cast<double>(errorSum));
  if (groups) {
    // Non-negative floats order as their bits; min as the max of the
    // complement (the counters start at zero).
    atomicMax(slot + 6, 0xffffffffull - __float_as_uint(scaleMin));
    atomicMax(slot + 7, static_cast<u64>(__float_as_uint(scaleMax)));
  }
}

/// Config: Hot (F16/BF16), kKvHeads, kHeadDim, kCapacity, kBits, kGroup,
/// kGroups, kRowBytes, kHotWindow, kHotRows, kPerChannelKeys, kChannelBlock,
/// kScaleBlocks, kThreads; a paged cache adds kBlockTokens and kMaxBlocks,
/// and `blockTable`. grid (S, kv_heads, B).
template <class Cfg>
__device__ void
quantizeKV(const typename Cfg::Hot::Storage *SITS_RESTRICT keyHot,
           const typename Cfg::Hot::Storage *SITS_RESTRICT valueHot,
           signed char *SITS_RESTRICT keyCold, u16 *SITS_RESTRICT keyScales,
           signed char *SITS_RESTRICT valueCold, u16 *SITS_RESTRICT valueScales,
           u64 *SITS_RESTRICT stats, const int *SITS_RESTRICT pastLengths,
           const int *SITS_RESTRICT stepLengths, int seqLen,
           const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Hot H;
  constexpr int D = Cfg::kHeadDim, G = Cfg::kGroup, kBits = Cfg::kBits;
  constexpr int kWarps = Cfg::kThreads / kWarpSize;
  static_assert(G % 2 == 0 && G <= 2 * kWarpSize, "a warp holds a group");
  static_assert(D % 2 == 0 && D / 2 <= Cfg::kThreads, "a thread per pair");
  const int x = tileIndex().x, head = tileIndex().y, b = tileIndex().z;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  if (x >= min(stepLengths[b], seqLen))
    return;
  // The token that leaves the hot window at query position past + x.
  const int t = pastLengths[b] + x - Cfg::kHotWindow;
  if (t < 0 || t >= Cfg::kCapacity)
    return;
  const long seqHead = static_cast<long>(b) * Cfg::kKvHeads + head;
  const long hotSeq = seqHead * Cfg::kHotRows;
  const ColdRows<Cfg> coldRows(blockTable, b, head);
  u64 *keyStats = stats + (head * 2) * kKVStatSlots;
  u64 *valueStats = keyStats + kKVStatSlots;

  // Per-token groups: values always, keys unless per channel.
  constexpr int kTasks = (Cfg::kPerChannelKeys ? 1 : 2) * Cfg::kGroups;
  for (int task = warp; task < kTasks; task += kWarps) {
    const bool isValue = task < Cfg::kGroups;
    const int g = isValue ? task : task - Cfg::kGroups;
    const typename H::Storage *hot =
        (isValue ? valueHot : keyHot) + (hotSeq + t % Cfg::kHotRows) * D;
    const int e0 = g * G + 2 * lane, groupEnd = min(D, (g + 1) * G);
    const bool has0 = 2 * lane < G && e0 < groupEnd,
               has1 = has0 && e0 + 1 < groupEnd;
    const float x0 = has0 ? H::load(hot[e0]) : 0.0f;
    const float x1 = has1 ? H::load(hot[e0 + 1]) : 0.0f;
    const float bad =
        warpMax((isFiniteBits(x0) && isFiniteBits(x1)) ? 0.0f : 1.0f);
    const float absMax = warpMax(fmaxf(absBits(x0), absBits(x1)));
    const u16 scaleBits = groupScaleBits<kBits>(absMax, bad == 0.0f);
    const float s = halfToFloat(scaleBits);
    bool c0, c1;
    const int q0 = quantLevel<kBits>(x0, s, &c0);
    const int q1 = quantLevel<kBits>(x1, s, &c1);
    signed char *cold = (isValue ? valueCold : keyCold) + coldRows.row(t);
    if (has0) {
      if constexpr (kBits == 8) {
        cold[e0] = static_cast<signed char>(q0);
        if (has1)
          cold[e0 + 1] = static_cast<signed char>(q1);
      } else {
        cold[e0 >> 1] =
            static_cast<signed char>((q0 & 0xf) | ((q1 & 0xf) << 4));
      }
    }
    const float e0r = has0 ? x0 - s * static_cast<float>(q0) : 0.0f;
    const float e1r = has1 ? x1 - s * static_cast<float>(q1) : 0.0f;
    const float errors = warpSum(e0r * e0r + e1r * e1r);
    const float clipped =
        warpSum(static_cast<float>((has0 && c0) + (has1 && c1)));
    if (lane == 0) {
      (isValue ? valueScales : keyScales)[coldRows.tokenScale(t) + g] =
          scaleBits;
      const bool finite = s == s;
      addStats(isValue ? valueStats : keyStats, g == 0 ? 1 : 0, finite ? 1 : 0,
               groupEnd - g * G, static_cast<u64>(clipped), finite ? s : 0.0f,
               finite ? errors : 0.0f, s, s);
    }
  }

  if constexpr (Cfg::kPerChannelKeys) {
    constexpr int B = Cfg::kChannelBlock;
    if (t % B != B - 1)
      return;
    // Block c of keys: tokens [c*B, c*B + B), a thread per channel pair.
    const int c = t / B, d = 2 * tid;
    const bool active = d < D;
    // Absolute maxima, and whether a NaN or an infinity makes a channel's
    // scale NaN (the two channels of a pair are separate groups).
    float a0 = 0.0f, a1 = 0.0f;
    bool f0 = true, f1 = true;
    if (active)
      for (int r = 0; r < B; ++r) {
        const typename H::Storage *hot =
            keyHot + (hotSeq + (c * B + r) % Cfg::kHotRows) * D + d;
        const float x0 = H::load(hot[0]), x1 = H::load(hot[1]);
        f0 = f0 && isFiniteBits(x0);
        f1 = f1 && isFiniteBits(x1);
        a0 = fmaxf(a0, absBits(x0));
        a1 = fmaxf(a1, absBits(x1));
      }
    const u16 s0Bits = groupScaleBits<kBits>(a0, f0);
    const u16 s1Bits = groupScaleBits<kBits>(a1, f1);
    const float s0 = halfToFloat(s0Bits), s1 = halfToFloat(s1Bits);
    float errors = 0.0f, clipped = 0.0f;
    if (active) {
      for (int r = 0; r < B; ++r) {
        const int row = c * B + r;
        const typename H::Storage *hot =
            keyHot + (hotSeq + row % Cfg::kHotRows) * D + d;
        const float x0 = H::load(hot[0]), x1 = H::load(hot[1]);
        bool c0, c1;
        const int q0 = quantLevel<kBits>(x0, s0, &c0);
        const int q1 = quantLevel<kBits>(x1, s1, &c1);
        signed char *cold = keyCold + coldRows.row(row);
        if constexpr (kBits == 8) {
          cold[d] = static_cast<signed char>(q0);
          cold[d + 1] = static_cast<signed char>(q1);
        } else {
          cold[d >> 1] =
              static_cast<signed char>((q0 & 0xf) | ((q1 & 0xf) << 4));
        }
        const float e0 = x0 - s0 * static_cast<float>(q0);
        const float e1 = x1 - s1 * static_cast<float>(q1);
        if (s0 == s0)
          errors += e0 * e0;
        if (s1 == s1)
          errors += e1 * e1;
        clipped += static_cast<float>(c0 + c1);
      }
      u16 *scales = keyScales + coldRows.channelScale(c) + d;
      scales[0] = s0Bits;
      scales[1] = s1Bits;
    }
    // Per-warp sums, then one lane's atomics.
    const int groups = active ? (s0 == s0) + (s1 == s1) : 0;
    const float scaleSum =
        (active && s0 == s0 ? s0 : 0.0f) + (active && s1 == s1 ? s1 : 0.0f);
    const float big = __int_as_float(0x7f800000);
    const float lo =
        fminf(active && s0 == s0 ? s0 : big, active && s1 == s1 ? s1 : big);
    const float hi =
        fmaxf(active && s0 == s0 ? s0 : 0.0f, active && s1 == s1 ? s1 : 0.0f);
    const float warpGroups = warpSum(static_cast<float>(groups));
    const float warpScales = warpSum(scaleSum);
    const float warpErrors = warpSum(errors);
    const float warpClipped = warpSum(clipped);
    const float warpLo = -warpMax(-lo);
    const float warpHi = warpMax(hi);
    const int warpValues =
        min(D, (warp + 1) * 2 * kWarpSize) - min(D, warp * 2 * kWarpSize);
    if (lane == 0 && warpValues > 0)
      addStats(keyStats, warp == 0 ? B : 0, static_cast<u64>(warpGroups),
               static_cast<u64>(warpValues) * B, static_cast<u64>(warpClipped),
               warpScales, warpErrors, warpLo, warpHi);
  }
}

} // namespace sits

#endif // SITS_KERNELS_KV_QUANT_CUH
