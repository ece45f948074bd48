//===- common.cuh - Types, conversions and reductions of the kernels ------===//
//
// Shared by every kernel family. The kernels are compiled by NVRTC without
// the CUDA headers (the device machine may have none), so the f16/bf16
// conversions are written here. With SITS_EMULATE they compile as host C++
// for the CPU emulator (backends/cuda/emulator/), which provides the CUDA
// built-ins.
//
// Conventions of every kernel:
// * activations are f32, token-major `[T, width]`: token i of sequence b is
//   row b * S + i, or in a packed step follows sequence b - 1's (rows.cuh);
// * linear weights are `[out, in]` in the engine's weight type; vectors
//   (norm weights, biases) and RoPE tables are f32;
// * positions and lengths come from device memory (`past_lengths`,
//   `step_lengths`), never from constants, so a captured graph replays.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_COMMON_CUH
#define SITS_KERNELS_COMMON_CUH

/// Declares the block's dynamic shared memory as `type *name`.
#ifndef SITS_EMULATE
// One declaration type for every kernel (extern shared arrays of one name
// must agree), 16-byte aligned for vector and cp.async accesses.
#define SITS_DYNAMIC_SHARED(type, name)                                        \
  extern __shared__ __align__(16) unsigned char sitsDynamicShared[];           \
  type *name = reinterpret_cast<type *>(sitsDynamicShared)
#endif
/// Checks (in the CPU emulator) that a vector access is aligned; free on the
/// GPU, where a misaligned access faults anyway.
#ifndef SITS_ASSERT_ALIGNED
#define SITS_ASSERT_ALIGNED(pointer, bytes)
#endif

// The block's coordinates, sizes and barrier, and the dependent-launch
// waits: the kernels use nothing else of their launch.
#include "sits/tile.cuh"

namespace sits {

typedef unsigned short u16;
typedef unsigned int u32;

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float halfToFloat(u16 bits) {
#ifdef SITS_EMULATE
  return sits_emu::halfToFloat(bits);
#else
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
#endif
}

__device__ __forceinline__ u16 floatToHalf(float value) {
#ifdef SITS_EMULATE
  return sits_emu::floatToHalf(value);
#else
  u16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
#endif
}

__device__ __forceinline__ float bf16ToFloat(u16 bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

/// Round to nearest even; NaN stays NaN (what format::floatToBFloat16 does).
__device__ __forceinline__ u16 floatToBf16(float value) {
  u32 bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<u16>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<u16>(bits >> 16);
}

/// Storage types of weights and of the KV cache. `Storage` is what memory
/// holds; `load`/`store` convert from and to f32.
struct F32 {
  typedef float Storage;
  static constexpr int kBytes = 4;
  static constexpr bool kIsBf16 = false;
  __device__ static __forceinline__ float load(Storage v) { return v; }
  __device__ static __forceinline__ Storage store(float v) { return v; }
};
struct F16 {
  typedef u16 Storage;
  static constexpr int kBytes = 2;
  static constexpr bool kIsBf16 = false;
  __device__ static __forceinline__ float load(Storage v) {
    return halfToFloat(v);
  }
  __device__ static __forceinline__ Storage store(float v) {
    return floatToHalf(v);
  }
};
struct BF16 {
  typedef u16 Storage;
  static constexpr int kBytes = 2;
  static constexpr bool kIsBf16 = true;
  __device__ static __forceinline__ float load(Storage v) {
    return bf16ToFloat(v);
  }
  __device__ static __forceinline__ Storage store(float v) {
    return floatToBf16(v);
  }
};

/// Elements of `T` in one 16-byte load.
template <class T> struct Vec16 {
  static constexpr int kElems = 16 / T::kBytes;
};

/// Widens the 16 bytes in `raw` (Vec16<T>::kElems elements) to f32.
template <class T>
__device__ __forceinline__ void unpack16(const uint4 &raw, float *out) {
  u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (T::kBytes == 4) {
    for (int e = 0; e < 4; ++e)
      out[e] = __uint_as_float(words[e]);
  } else {
    for (int e = 0; e < 4; ++e) {
      out[2 * e] = T::load(static_cast<u16>(words[e] & 0xffffu));
      out[2 * e + 1] = T::load(static_cast<u16>(words[e] >> 16));
    }
  }
}

/// Loads 16 bytes (Vec16<T>::kElems elements) at `p`, which must be 16-byte
/// aligned, and widens them to f32. The read goes through the read-only
/// cache: weights and the KV cache are never written by the same kernel.
template <class T>
__device__ __forceinline__ void load16(const typename T::Storage *p,
                                       float *out) {
  unpack16<T>(__ldg(reinterpret_cast<const uint4 *>(p)), out);
}

/// Loads `N` consecutive f32 (N a multiple of 4, `p` 16-byte aligned).
template <int N>
__device__ __forceinline__ void loadFloats(const float *p, float *out) {
  SITS_ASSERT_ALIGNED(p, 16);
  for (int e = 0; e < N; e += 4) {
    float4 v = *reinterpret_cast<const float4 *>(p + e);
    out[e] = v.x;
    out[e + 1] = v.y;
    out[e + 2] = v.z;
    out[e + 3] = v.w;
  }
}

/// 16 bytes at `p` (16-byte aligned) through the read-only path when
/// `predicate` holds; otherwise no load and values that must not be used
/// (the emulator gives NaN), so that no registers are zeroed. For operands
/// whose results are dropped, such as the mma columns of absent tokens: a
/// warp's load then touches L1 only for the lanes that need it.
__device__ __forceinline__ uint4 load16IfUsed(bool predicate, const void *p) {
#ifdef SITS_EMULATE
  if (!predicate)
    return make_uint4(0x7fc00000u, 0x7fc00000u, 0x7fc00000u, 0x7fc00000u);
  SITS_ASSERT_ALIGNED(p, 16);
  return *reinterpret_cast<const uint4 *>(p);
#else
  uint4 v;
  asm("{\n  .reg .pred p;\n  setp.ne.b32 p, %5, 0;\n"
      "  @p ld.global" SITS_LD_NC ".v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(static_cast<int>(predicate)));
  return v;
#endif
}

/// Loads 16 bytes at `p` when `predicate` holds, zeros otherwise. The load is
/// predicated inside the asm rather than branched around: with branches,
/// ptxas schedules each load in its own block next to its first use, and a
/// lane has only one or two loads in flight instead of all of a step's.
/// `volatile` keeps these loads in program order with the mma below, so a
/// step's loads are all issued before its first mma waits for them.
/// Streaming (weights, the KV cache: read once per step) bypasses L1 so that
/// what is reused there (activations) stays.
template <bool kStreaming>
__device__ __forceinline__ uint4 load16If(bool predicate, const void *p) {
#ifdef SITS_EMULATE
  if (!predicate)
    return make_uint4(0u, 0u, 0u, 0u);
  SITS_ASSERT_ALIGNED(p, 16);
  return *reinterpret_cast<const uint4 *>(p);
#else
  uint4 v;
  if constexpr (kStreaming)
    asm volatile("{\n  .reg .pred p;\n  setp.ne.b32 p, %5, 0;\n"
                 "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n"
                 "  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"
                 "  @p ld.global" SITS_LD_NC ".L1::no_allocate.v4.u32 "
                 "{%0, %1, %2, %3}, [%4];\n}"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "r"(static_cast<int>(predicate)));
  else
    asm volatile("{\n  .reg .pred p;\n  setp.ne.b32 p, %5, 0;\n"
                 "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n"
                 "  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"
                 "  @p ld.global" SITS_LD_NC
                 ".v4.u32 {%0, %1, %2, %3}, [%4];\n}"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "r"(static_cast<int>(predicate)));
  return v;
#endif
}

/// Starts an asynchronous 16-byte copy from global to shared memory
/// (cp.async, sm_80+), or writes 16 zero bytes when `predicate` is false.
/// `kKeepInL1`: cache the source in L1 (activations read by many blocks);
/// otherwise it is read through L2 only (weights, the KV cache). Nothing
/// waits for the copy until copyAsyncWait, so a lane can have many in flight
/// whatever order ptxas gives the instructions.
template <bool kKeepInL1>
__device__ __forceinline__ void copyAsync16(void *sharedDst, const void *src,
                                            bool predicate) {
#ifdef SITS_EMULATE
  if (predicate) {
    SITS_ASSERT_ALIGNED(src, 16);
    std::memcpy(sharedDst, src, 16);
  } else {
    std::memset(sharedDst, 0, 16);
  }
#else
  unsigned dst;
  asm("{\n  .reg .u64 a;\n  cvta.to.shared.u64 a, %1;\n  cvt.u32.u64 %0, a;\n}"
      : "=r"(dst)
      : "l"(sharedDst));
  if constexpr (kKeepInL1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(dst),
                 "l"(src), "r"(predicate ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst),
                 "l"(src), "r"(predicate ? 16 : 0)
                 : "memory");
#endif
}

/// A shared-memory address as cp.async takes it: computed once
/// (sharedAddressOf) for copies at constant offsets from it
/// (copyAsync16At), so that each copy costs no generic-to-shared
/// conversion.
#ifdef SITS_EMULATE
typedef unsigned char *SharedAddress;
#else
typedef unsigned SharedAddress;
#endif

__device__ __forceinline__ SharedAddress sharedAddressOf(void *shared) {
#ifdef SITS_EMULATE
  return static_cast<unsigned char *>(shared);
#else
  unsigned address;
  asm("{\n  .reg .u64 a;\n  cvta.to.shared.u64 a, %1;\n  cvt.u32.u64 %0, a;\n}"
      : "=r"(address)
      : "l"(shared));
  return address;
#endif
}

/// copyAsync16<false> (through L2 only) to `base` + `offset` bytes; with a
/// constant offset, ptxas folds it into the copy's address.
__device__ __forceinline__ void copyAsync16At(SharedAddress base, int offset,
                                              const void *src, bool predicate) {
#ifdef SITS_EMULATE
  copyAsync16<false>(base + offset, src, predicate);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   base + static_cast<unsigned>(offset)),
               "l"(src), "r"(predicate ? 16 : 0)
               : "memory");
#endif
}

/// Starts an asynchronous copy of kBytes (4 or 8) from global to shared
/// memory (cp.async.ca: the .cg form copies 16 bytes only).
template <int kBytes>
__device__ __forceinline__ void copyAsyncSmall(void *sharedDst,
                                               const void *src) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async copies 4, 8 or 16");
#ifdef SITS_EMULATE
  SITS_ASSERT_ALIGNED(src, kBytes);
  std::memcpy(sharedDst, src, kBytes);
#else
  unsigned dst;
  asm("{\n  .reg .u64 a;\n  cvta.to.shared.u64 a, %1;\n  cvt.u32.u64 %0, a;\n}"
      : "=r"(dst)
      : "l"(sharedDst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(src),
               "n"(kBytes)
               : "memory");
#endif
}

/// Starts an asynchronous copy of kBytes (4, 8 or 16) from global to shared
/// memory, cached in L1 for 4 and 8 bytes (the only form cp.async has for
/// them) and through L2 only for 16.
template <int kBytes>
__device__ __forceinline__ void copyAsyncBytes(void *sharedDst,
                                               const void *src) {
  if constexpr (kBytes == 16)
    copyAsync16<false>(sharedDst, src, true);
  else
    copyAsyncSmall<kBytes>(sharedDst, src);
}

/// Closes the group of this thread's copies started since the last commit.
__device__ __forceinline__ void copyAsyncCommit() {
#ifndef SITS_EMULATE
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// Waits until at most `kPending` of this thread's committed groups are
/// still in flight. A thread sees its own copies after this; other threads'
/// copies need a barrier besides.
template <int kPending> __device__ __forceinline__ void copyAsyncWait() {
#ifndef SITS_EMULATE
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

//===----------------------------------------------------------------------===//
// Tensor cores (sm_80 and newer)
//===----------------------------------------------------------------------===//

/// Two floats rounded to `T` (F16 or BF16) in one register, `lo` in the low
/// half: the layout of an mma operand pair (the lower k in the low bits).
template <class T> __device__ __forceinline__ u32 packPair(float lo, float hi) {
  return static_cast<u32>(T::store(lo)) |
         (static_cast<u32>(T::store(hi)) << 16);
}

/// PTX prmt.b32 (default mode): byte i of the result is byte (s >> 4i) & 7
/// of the pair {b, a} (a: bytes 0-3, b: bytes 4-7).
__device__ __forceinline__ u32 bytePermute(u32 a, u32 b, u32 s) {
#ifdef SITS_EMULATE
  unsigned long long pair = static_cast<unsigned long long>(a) |
                            (static_cast<unsigned long long>(b) << 32);
  u32 out = 0;
  for (int i = 0; i < 4; ++i)
    out |= static_cast<u32>((pair >> (8 * ((s >> (4 * i)) & 7))) & 0xffu)
           << (8 * i);
  return out;
#else
  u32 out;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(out) : "r"(a), "r"(b), "r"(s));
  return out;
#endif
}

/// Two f16 subtractions in one register (exact for the values used here).
__device__ __forceinline__ u32 subHalf2(u32 a, u32 b) {
#ifdef SITS_EMULATE
  u32 lo = floatToHalf(halfToFloat(static_cast<u16>(a & 0xffffu)) -
                       halfToFloat(static_cast<u16>(b & 0xffffu)));
  u32 hi = floatToHalf(halfToFloat(static_cast<u16>(a >> 16)) -
                       halfToFloat(static_cast<u16>(b >> 16)));
  return lo | (hi << 16);
#else
  u32 out;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
  return out;
#endif
}

/// a * b + c on two f16 pairs, one rounding (exact for the values used here).
__device__ __forceinline__ u32 fmaHalf2(u32 a, u32 b, u32 c) {
#ifdef SITS_EMULATE
  u32 out = 0;
  for (int h = 0; h < 2; ++h) {
    auto half = [&](u32 v) {
      return halfToFloat(static_cast<u16>(v >> (16 * h)));
    };
    out |= static_cast<u32>(floatToHalf(half(a) * half(b) + half(c)))
           << (16 * h);
  }
  return out;
#else
  u32 out;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(a), "r"(b), "r"(c));
  return out;
#endif
}

/// Two f16 products in one register, each rounded once.
__device__ __forceinline__ u32 mulHalf2(u32 a, u32 b) {
#ifdef SITS_EMULATE
  u32 lo = floatToHalf(halfToFloat(static_cast<u16>(a & 0xffffu)) *
                       halfToFloat(static_cast<u16>(b & 0xffffu)));
  u32 hi = floatToHalf(halfToFloat(static_cast<u16>(a >> 16)) *
                       halfToFloat(static_cast<u16>(b >> 16)));
  return lo | (hi << 16);
#else
  u32 out;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
  return out;
#endif
}

/// (a & kMask) ^ b in one lop3. Written as C++, ptxas splits it in two when
/// both constants are immediates (LOP3 takes one), which doubled the int4
/// unpacking's logic ops in the quantized GEMV's SASS.
template <u32 kMask> __device__ __forceinline__ u32 andXor(u32 a, u32 b) {
#ifdef SITS_EMULATE
  return (a & kMask) ^ b;
#else
  u32 out;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;"
      : "=r"(out)
      : "r"(a), "n"(kMask), "r"(b));
  return out;
#endif
}

/// The element of a GEMV's input rows: f32, or (kHalfX) the 16-bit mma
/// operands a producer wrote (operandHalfIndex).
template <bool kHalves> struct InputElement { typedef float Type; };
template <> struct InputElement<true> { typedef u16 Type; };

/// Where input k of a row of x goes when it is written as the B operands
/// of the tensor-core GEMV over `kBits`-bit weights (kHalfX). 16 (gemv.cuh):
/// in input order, lane t of a chunk loading its 8 inputs as its 4
/// registers. 8 and 4, interleaved rows (gemv_quant.cuh): lane t of chunk c
/// (128 int4 or 64 int8
/// inputs) finds its registers b[m][r] as 16 consecutive halves (int8) or
/// 32 (int4) at (4 c + t) times that, register 2 m + r; each register holds
/// the pair levelPairsF16 gives for the same word. int4: input
/// 32 w + 16 h + 4 t + j is half h of register 4 w + j; int8: input
/// 16 w + 4 t + j is half j % 2 of register 2 w + j / 2.
template <int kBits> __host__ __device__ constexpr int operandHalfIndex(int k) {
  static_assert(kBits == 16 || kBits == 8 || kBits == 4, "16, 8 or 4 bits");
  if (kBits == 16)
    return k;
  constexpr int kChunk = kBits == 8 ? 64 : 128;
  const int c = k / kChunk, r = k % kChunk;
  const int t = r / 4 % 4, j = r % 4;
  if (kBits == 8) // w = r / 16
    return (4 * c + t) * 16 + 4 * (r / 16) + j;
  return (4 * c + t) * 32 + 2 * (4 * (r / 32) + j) + r / 16 % 2;
}

/// The int8 or int4 levels of one 32-bit word as exact f16 pairs: the level
/// under the exponent of 1024 (the sign bit flipped, as level + 128 or + 8),
/// then one f16x2 subtraction (or, for int4 nibbles at bits 4-7, a
/// multiply-add by 1/16) per pair. int8 (bytes v0..v3): pairs[0] = (v0, v1),
/// pairs[1] = (v2, v3); int4 (nibbles v0..v7): pairs[j] = (v_j, v_{j+4}).
template <int kBits>
__device__ __forceinline__ void levelPairsF16(u32 word, u32 *pairs) {
  if constexpr (kBits == 8) {
    const u32 biased = word ^ 0x80808080u; // level + 128, unsigned
    pairs[0] = subHalf2(bytePermute(biased, 0x64646464u, 0x4140u), 0x64806480u);
    pairs[1] = subHalf2(bytePermute(biased, 0x64646464u, 0x4342u), 0x64806480u);
  } else {
    // Nibbles at bits 0-3 (and 16-19), flipped to level + 8: 1024 + u,
    // minus 1032. Nibbles at bits 4-7: 1024 + 16 u, times 1/16 minus 72.
    for (int j = 0; j < 4; j += 2) {
      const u32 w = word >> (4 * j);
      pairs[j] = subHalf2(andXor<0x000f000fu>(w, 0x64086408u), 0x64086408u);
      pairs[j + 1] = fmaHalf2(andXor<0x00f000f0u>(w, 0x64806480u), 0x2c002c00u,
                              0xd480d480u);
    }
  }
}

/// Two floats rounded to `T` (F16 or BF16) in one register as packPair
/// does, with one cvt on sm_80+.
template <class T>
__device__ __forceinline__ u32 packPairRn(float lo, float hi) {
#if !defined(SITS_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  u32 out;
  if constexpr (T::kIsBf16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
#else
  return packPair<T>(lo, hi);
#endif
}

/// movmatrix.sync.aligned.m8n8.trans.b16: an 8x8 matrix of 16-bit values
/// held as an mma fragment (lane g * 4 + t holds row g, columns 2t and
/// 2t + 1) comes back transposed in the same layout. Every lane of the warp
/// must call it (sm_75+; the emulator runs it as two shuffles).
__device__ __forceinline__ u32 transposeHalves8x8(u32 fragment) {
#ifdef SITS_EMULATE
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, t = lane % 4;
  // Row g, columns 2t and 2t + 1 of the transpose: column g of rows 2t and
  // 2t + 1, held by lanes 2t * 4 + g / 2 and (2t + 1) * 4 + g / 2.
  const u32 even = __shfl_sync(kFullMask, fragment, 8 * t + g / 2);
  const u32 odd = __shfl_sync(kFullMask, fragment, 8 * t + 4 + g / 2);
  const int shift = 16 * (g % 2);
  return ((even >> shift) & 0xffffu) | (((odd >> shift) & 0xffffu) << 16);
#else
  u32 out;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;"
               : "=r"(out)
               : "r"(fragment));
  return out;
#endif
}

/// Adds `value` to `*counter` at GPU scope with acquire-release order and
/// returns the old value. After a barrier, one thread's call releases the
/// whole block's earlier stores (the barrier orders them before it) and
/// acquires what the blocks that counted before it released.
__device__ __forceinline__ int atomicAddAcqRelGpu(int *counter, int value) {
#ifdef SITS_EMULATE
  return atomicAdd(counter, value);
#else
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(counter), "r"(value)
               : "memory");
  return old;
#endif
}

/// Whether this block is the last of `blocks` to arrive at `counter`, the
/// others' stores before the call then visible to it; the last block resets
/// the counter for the next launch. The barrier orders every thread's
/// stores before thread 0's count, which releases them (and, in the last
/// block, acquires the other blocks') at GPU scope: one fence a block, not
/// one a thread. Called by every thread of the block.
__device__ __forceinline__ bool lastBlockToArrive(int *counter, int blocks) {
  __shared__ int isLast;
  syncTile();
  if (threadIdx.x == 0) {
    isLast = atomicAddAcqRelGpu(counter, 1) == blocks - 1;
    if (isLast)
      *counter = 0; // ready for the next launch
  }
  syncTile();
  return isLast;
}

/// Asks L2 for the 128-byte line that holds `address` (no register and no
/// wait; nothing in the emulator).
__device__ __forceinline__ void prefetchL2(const void *address) {
#ifndef SITS_EMULATE
  asm volatile("prefetch.global.L2 [%0];" : : "l"(address));
#else
  (void)address;
#endif
}

/// D = A * B + D for one warp: mma.m16n8k16, A 16x16 row-major, B 16x8
/// column-major, f32 accumulators. With g = lane / 4, t = lane % 4:
///   a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..2t+1]
///   a2 = A[g][2t+8..+9]   a3 = A[g+8][2t+8..+9]
///   b0 = B[2t..2t+1][g]   b1 = B[2t+8..+9][g]
///   c  = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
/// Every lane of the warp must call it (it is warp-synchronous).
template <class T>
__device__ __forceinline__ void mma16816(float *c, u32 a0, u32 a1, u32 a2,
                                         u32 a3, u32 b0, u32 b1) {
#ifdef SITS_EMULATE
  sits_emu::mma16816(T::kIsBf16, c, a0, a1, a2, a3, b0, b1);
#else
  if constexpr (T::kIsBf16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/// `pointers[index]` for a small array of kernel arguments, selected with
/// constant indices so that the array stays in registers (a dynamic index
/// would put it in local memory).
template <int kCount, class T>
__device__ __forceinline__ T select(T const *pointers, int index) {
  T chosen = pointers[0];
  for (int i = 1; i < kCount; ++i)
    if (index == i)
      chosen = pointers[i];
  return chosen;
}

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane i gives the address of
/// row i % 8 of 8x8 matrix i / 8 (16 bytes in shared memory); every lane
/// gets, from each matrix j, row lane / 4, elements 2 (lane % 4) and
/// 2 (lane % 4) + 1 in r[j] (the lower element in the low half).
__device__ __forceinline__ void loadMatrix4(const void *row, u32 *r) {
#ifdef SITS_EMULATE
  sits_emu::ldmatrix4(row, r);
#else
  unsigned address;
  asm("{\n  .reg .u64 a;\n  cvta.to.shared.u64 a, %1;\n  cvt.u32.u64 %0, a;\n}"
      : "=r"(address)
      : "l"(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
               "{%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

/// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: as loadMatrix4, but each
/// matrix is transposed: lane gets, from matrix j, the elements of rows
/// 2 (lane % 4) and 2 (lane % 4) + 1 in column lane / 4.
__device__ __forceinline__ void loadMatrix4Transposed(const void *row, u32 *r) {
#ifdef SITS_EMULATE
  sits_emu::ldmatrix4(row, r, true);
#else
  unsigned address;
  asm("{\n  .reg .u64 a;\n  cvta.to.shared.u64 a, %1;\n  cvt.u32.u64 %0, a;\n}"
      : "=r"(address)
      : "l"(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
               "{%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float warpSum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warpMax(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

//===----------------------------------------------------------------------===//
// Attention rules every attention kernel shares
//===----------------------------------------------------------------------===//

/// A query-key dot product as a score: scaled, then soft-capped
/// (softcap * tanh(score / softcap)) when the config has a softcap.
template <class Cfg>
__device__ __forceinline__ float attentionScore(float dot) {
  float value = Cfg::kScale * dot;
  if constexpr (Cfg::kSoftcap > 0.0f)
    value = Cfg::kSoftcap * tanhf(value / Cfg::kSoftcap);
  return value;
}

/// Whether the query at `position` sees `key` (bottom-right causal, within
/// the sliding window when the config has one).
template <class Cfg>
__device__ __forceinline__ bool keyIsVisible(int key, int position) {
  return key <= position &&
         (Cfg::kWindow == 0 || key > position - Cfg::kWindow);
}

/// Sum over the block (`kThreads` a multiple of 32); every thread gets it.
/// Safe to call repeatedly: it synchronizes before reusing its scratch.
template <int kThreads> __device__ float blockSum(float value) {
  static_assert(kThreads % kWarpSize == 0, "whole warps only");
  constexpr int kWarps = kThreads / kWarpSize;
  __shared__ float partial[kWarps];
  value = warpSum(value);
  if (kWarps == 1)
    return value;
  syncTile();
  int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0)
    partial[warp] = value;
  syncTile();
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    total += partial[w];
  return total;
}

//===----------------------------------------------------------------------===//
// Activations (the formulas of the reference executor, compiler/reference)
//===----------------------------------------------------------------------===//

enum Activation {
  kSilu = 0,
  kGelu = 1,
  kGeluTanh = 2,
  kRelu = 3,
  kSigmoid = 4
};

template <int kKind> __device__ __forceinline__ float activate(float x) {
  if constexpr (kKind == kSilu) {
    return x * (1.0f / (1.0f + expf(-x)));
  } else if constexpr (kKind == kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (kKind == kGeluTanh) {
    constexpr float kScale = 0.79788456080286536f; // sqrt(2 / pi)
    return 0.5f * x * (1.0f + tanhf(kScale * (x + 0.044715f * x * x * x)));
  } else if constexpr (kKind == kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else {
    return 1.0f / (1.0f + expf(-x));
  }
}

} // namespace sits

// Where a step's tokens and a sequence's cache rows lie.
#include "sits/rows.cuh"

// Persistent mode: tile.cuh's wait for the preceding kernels is the walk's
// wait for a tile's dependencies, which every kernel of the translation
// unit calls.
#ifdef SITS_PERSISTENT_DECODE
#include "sits/persistent.cuh"
#endif

#endif // SITS_KERNELS_COMMON_CUH
