//===- common.cuh - Types, conversions and reductions of the kernels ------===//
//
// Shared by every kernel family. The kernels are compiled by NVRTC without
// the CUDA headers (the device machine may have none), so the f16/bf16
// conversions are written here. With SITS_EMULATE they compile as host C++
// for the CPU emulator (compiler/codegen/emulator/), which provides the CUDA
// built-ins.
//
// Conventions of every kernel:
// * activations are f32, token-major `[T, width]` with token t = b * S + i;
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
#define SITS_DYNAMIC_SHARED(type, name)                                        \
  extern __shared__ type sitsDynamicShared[];                                  \
  type *name = sitsDynamicShared
#endif
/// Checks (in the CPU emulator) that a vector access is aligned; free on the
/// GPU, where a misaligned access faults anyway.
#ifndef SITS_ASSERT_ALIGNED
#define SITS_ASSERT_ALIGNED(pointer, bytes)
#endif

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
  __device__ static __forceinline__ float load(Storage v) { return v; }
  __device__ static __forceinline__ Storage store(float v) { return v; }
};
struct F16 {
  typedef u16 Storage;
  static constexpr int kBytes = 2;
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

/// Loads 16 bytes (Vec16<T>::kElems elements) at `p`, which must be 16-byte
/// aligned, and widens them to f32. The read goes through the read-only
/// cache: weights and the KV cache are never written by the same kernel.
template <class T>
__device__ __forceinline__ void load16(const typename T::Storage *p,
                                       float *out) {
  uint4 raw = __ldg(reinterpret_cast<const uint4 *>(p));
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

/// Sum over the block (`kThreads` a multiple of 32); every thread gets it.
/// Safe to call repeatedly: it synchronizes before reusing its scratch.
template <int kThreads> __device__ float blockSum(float value) {
  static_assert(kThreads % kWarpSize == 0, "whole warps only");
  constexpr int kWarps = kThreads / kWarpSize;
  __shared__ float partial[kWarps];
  value = warpSum(value);
  if (kWarps == 1)
    return value;
  __syncthreads();
  int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
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

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

/// Position of token `i` of sequence `b`: the tokens it already holds plus i.
__device__ __forceinline__ int positionOf(const int *pastLengths, int b,
                                          int i) {
  return pastLengths[b] + i;
}

} // namespace sits

#endif // SITS_KERNELS_COMMON_CUH
