//===- gemm.cuh - Prefill linear layers: tiled shared-memory GEMM ---------===//
//
// `out[T, N] = x[T, K] . W[N, K]^T` for the T = B * S tokens of a prefill
// chunk. A block computes a 64 x 64 tile of the output with 256 threads, each
// thread 4 x 4 outputs (rows ty + 16 i, columns tx + 16 j, so that the
// shared-memory reads of a warp are broadcasts or consecutive). K advances in
// steps of 32: x and W tiles are staged transposed in shared memory, W
// widened to f32 as it is stored; sums are in f32.
//
// Segments, the residual and the gated (GLU) epilogues are those of
// gemv.cuh. Launch: grid = (ceil(T / 64), tiles of all segments), block 256.
// With f16/bf16 weights on sm_80 and newer, gemmTensorCore (below) runs
// instead; this kernel stays for f32 weights and unaligned rows.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMM_CUH
#define SITS_KERNELS_GEMM_CUH

#include "sits/common.cuh"
#include "sits/gemv.cuh"

namespace sits {

constexpr int kGemmTileM = 64;
constexpr int kGemmTileN = 64;
constexpr int kGemmTileK = 32;
constexpr int kGemmThreads = 256;

/// Loads 8 consecutive weights of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void
gemmLoadWeights(const typename Cfg::Weight::Storage *__restrict__ row, int k,
                float *out) {
  typedef typename Cfg::Weight W;
  if (Cfg::kVecW && k + 8 <= Cfg::kK) {
    for (int e = 0; e < 8; e += Vec16<W>::kElems)
      load16<W>(row + k + e, out + e);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? W::load(row[k + e]) : 0.0f;
  }
}

/// Loads 8 consecutive inputs of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void gemmLoadInputs(const float *__restrict__ row,
                                               int k, float *out) {
  if (Cfg::kVecX && k + 8 <= Cfg::kK) {
    loadFloats<8>(row + k, out);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? row[k + e] : 0.0f;
  }
}

/// Config: as gemv (Weight, kK, kSegments, rows(s), hasBias(s), kEpilogue,
/// kActivation) plus tiles(s) (column tiles of segment s), kVecW (weight
/// rows are 16-byte aligned), kVecX (input rows are).
template <class Cfg>
__device__ void gemm(const float *__restrict__ x,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *__restrict__ residual, int tokens) {
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kMats = kGated ? 2 : 1;
  __shared__ float xs[kGemmTileK][kGemmTileM];
  __shared__ float ws[kMats][kGemmTileK][kGemmTileN];

  // Which segment and which column tile of it this block computes.
  int tile = blockIdx.y, segment = 0;
  if constexpr (!kGated) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (tile < Cfg::tiles(segment))
        break;
      tile -= Cfg::tiles(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const int m0 = blockIdx.x * kGemmTileM, n0 = tile * kGemmTileN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  // Loader mapping: consecutive threads take consecutive rows, so the
  // transposed shared-memory stores of a warp hit consecutive banks.
  const int loadRow = tid % 64, loadK = (tid / 64) * 8;

  float acc[kMats][4][4];
  for (int g = 0; g < kMats; ++g)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        acc[g][i][j] = 0.0f;

  const int m = m0 + loadRow, n = n0 + loadRow;
  const float *xRow = x + static_cast<long>(m < tokens ? m : 0) * Cfg::kK;
  const typename Cfg::Weight::Storage *wRow[kMats];
  for (int g = 0; g < kMats; ++g)
    wRow[g] = select<Cfg::kSegments>(weights, kGated ? g : segment) +
              static_cast<long>(n < width ? n : 0) * Cfg::kK;
  for (int k0 = 0; k0 < Cfg::kK; k0 += kGemmTileK) {
    float values[8];
    if (m < tokens) {
      gemmLoadInputs<Cfg>(xRow, k0 + loadK, values);
    } else {
      for (int e = 0; e < 8; ++e)
        values[e] = 0.0f;
    }
    for (int e = 0; e < 8; ++e)
      xs[loadK + e][loadRow] = values[e];
    for (int g = 0; g < kMats; ++g) {
      if (n < width) {
        gemmLoadWeights<Cfg>(wRow[g], k0 + loadK, values);
      } else {
        for (int e = 0; e < 8; ++e)
          values[e] = 0.0f;
      }
      for (int e = 0; e < 8; ++e)
        ws[g][loadK + e][loadRow] = values[e];
    }
    __syncthreads();
    for (int kk = 0; kk < kGemmTileK; ++kk) {
      float a[4];
      for (int i = 0; i < 4; ++i)
        a[i] = xs[kk][ty + 16 * i];
      for (int g = 0; g < kMats; ++g) {
        float b[4];
        for (int j = 0; j < 4; ++j)
          b[j] = ws[g][kk][tx + 16 * j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            acc[g][i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty + 16 * i;
    if (row >= tokens)
      continue;
    for (int j = 0; j < 4; ++j) {
      const int column = n0 + tx + 16 * j;
      if (column >= width)
        continue;
      const long index = static_cast<long>(row) * width + column;
      if constexpr (kGated) {
        float gate = acc[0][i][j], up = acc[kMats - 1][i][j];
        if (Cfg::hasBias(0))
          gate += biases[0][column];
        if (Cfg::hasBias(1))
          up += biases[1][column];
        outs[0][index] = activate<Cfg::kActivation>(gate) * up;
      } else {
        float value = acc[0][i][j];
        if (Cfg::hasBias(segment))
          value += select<Cfg::kSegments>(biases, segment)[column];
        if constexpr (Cfg::kEpilogue == kResidual)
          value += residual[index];
        select<Cfg::kSegments>(outs, segment)[index] = value;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Tensor-core GEMM
//===----------------------------------------------------------------------===//
//
// A block computes 128 tokens x 128 weight rows with mma.m16n8k16 (f32
// accumulators), 8 warps of 64 x 32 each. K advances in steps of 32: the
// weights come by cp.async, the activations are loaded as f32, rounded to
// the weights' type (as the decode GEMV does) and stored; both tiles are
// double-buffered in shared memory (rows padded to 80 bytes, so that the
// ldmatrix rows of a warp fall in distinct banks), with one barrier per
// step. With kGlu the 128 rows are 64 gate rows and the same 64 up rows,
// interleaved by 16, so that a thread holds gate and up of the same output.
//
// Launch: grid = (ceil(T / 128), kTotalTiles), block 256.

constexpr int kTcGemmM = 128;
constexpr int kTcGemmN = 128;
constexpr int kTcGemmK = 32;
constexpr int kTcGemmStride = kTcGemmK + 8; ///< halves per shared row

/// Config: Weight (F16/BF16), kK (a multiple of 8), kSegments, rows(s),
/// hasBias(s), tiles(s) (ceil(rows(s) / 128), or / 64 with kGlu),
/// kTotalTiles, kEpilogue, kActivation. Arguments as for gemm.
template <class Cfg>
__device__ void
gemmTensorCore(const float *__restrict__ x,
               const typename Cfg::Weight::Storage *const *weights,
               const float *const *biases, float *const *outs,
               const float *__restrict__ residual, int tokens) {
  typedef typename Cfg::Weight W;
  typedef typename W::Storage Storage;
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kSteps = (Cfg::kK + kTcGemmK - 1) / kTcGemmK;
  static_assert(Cfg::kK % 8 == 0, "rows must be 16-byte aligned");
  __shared__ __align__(16) u16 xs[2][kTcGemmM * kTcGemmStride];
  __shared__ __align__(16) u16 ws[2][kTcGemmN * kTcGemmStride];

  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int wm = warp / 4, wn = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.x * kTcGemmM;

  // Which segment and rows this block's column tile covers.
  int tile = blockIdx.y, segment = 0;
  if constexpr (!kGated) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (tile < Cfg::tiles(segment))
        break;
      tile -= Cfg::tiles(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const int n0 = tile * (kGated ? kTcGemmN / 2 : kTcGemmN);

  // Loader: rows of the weight tile this thread copies (2 x 16 bytes), and
  // its token row and half of the activation tile (16 floats).
  const Storage *wRow[2];
  int wK[2];
  for (int j = 0; j < 2; ++j) {
    const int c = tid + j * 256, r = c / 4;
    wK[j] = (c % 4) * 8;
    int matrix = segment, row = n0 + r;
    if constexpr (kGated) {
      matrix = (r % 32) < 16 ? 0 : 1;
      row = n0 + (r / 32) * 16 + r % 16;
    }
    wRow[j] = row < Cfg::rows(matrix)
                  ? select<Cfg::kSegments>(weights, matrix) +
                        static_cast<long>(row) * Cfg::kK
                  : nullptr;
  }
  const int xRowIndex = tid / 2, xK = (tid % 2) * 16;
  const float *xRow = m0 + xRowIndex < tokens
                          ? x + static_cast<long>(m0 + xRowIndex) * Cfg::kK
                          : nullptr;

  auto copyWeights = [&](int step, int buffer) {
    const int k0 = step * kTcGemmK;
    for (int j = 0; j < 2; ++j) {
      const int r = (tid + j * 256) / 4;
      const bool valid = wRow[j] && k0 + wK[j] < Cfg::kK;
      copyAsync16<false>(&ws[buffer][r * kTcGemmStride + wK[j]],
                         valid ? wRow[j] + k0 + wK[j] : weights[0], valid);
    }
    copyAsyncCommit();
  };
  uint4 staged[4];
  auto loadInputs = [&](int step) {
    const int k0 = step * kTcGemmK + xK;
    for (int q = 0; q < 4; ++q)
      staged[q] = load16If<false>(xRow && k0 + 4 * q < Cfg::kK,
                                  xRow + k0 + 4 * q);
  };
  auto storeInputs = [&](int buffer) {
    u32 packed[8];
    for (int q = 0; q < 4; ++q) {
      packed[2 * q] = packPair<W>(__uint_as_float(staged[q].x),
                                  __uint_as_float(staged[q].y));
      packed[2 * q + 1] = packPair<W>(__uint_as_float(staged[q].z),
                                      __uint_as_float(staged[q].w));
    }
    uint4 *target =
        reinterpret_cast<uint4 *>(&xs[buffer][xRowIndex * kTcGemmStride + xK]);
    target[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    target[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  };

  float acc[4][4][4];
  for (int mi = 0; mi < 4; ++mi)
    for (int ni = 0; ni < 4; ++ni)
      for (int i = 0; i < 4; ++i)
        acc[mi][ni][i] = 0.0f;

  copyWeights(0, 0);
  loadInputs(0);
  storeInputs(0);
  for (int step = 0; step < kSteps; ++step) {
    const int buffer = step % 2;
    copyAsyncWait<0>();
    __syncthreads(); // both tiles of `step` are in place; step - 1 is done
    const bool more = step + 1 < kSteps;
    if (more) {
      copyWeights(step + 1, 1 - buffer);
      loadInputs(step + 1);
    }
    for (int kk = 0; kk < kTcGemmK; kk += 16) {
      u32 a[4][4], b[2][4];
      for (int mi = 0; mi < 4; ++mi) {
        const int row = wm * 64 + mi * 16 + lane % 8 + 8 * ((lane / 8) % 2);
        loadMatrix4(&xs[buffer][row * kTcGemmStride + kk + 8 * (lane / 16)],
                    a[mi]);
      }
      for (int nj = 0; nj < 2; ++nj) {
        const int row = wn * 32 + nj * 16 + lane % 8 + 8 * (lane / 16);
        loadMatrix4(
            &ws[buffer][row * kTcGemmStride + kk + 8 * ((lane / 8) % 2)],
            b[nj]);
      }
      for (int mi = 0; mi < 4; ++mi)
        for (int ni = 0; ni < 4; ++ni)
          mma16816<W>(acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3],
                      b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
    }
    if (more)
      storeInputs(1 - buffer);
  }

  for (int mi = 0; mi < 4; ++mi)
    for (int i = 0; i < 4; ++i) {
      const int token = m0 + wm * 64 + mi * 16 + g + (i >= 2 ? 8 : 0);
      if (token >= tokens)
        continue;
      if constexpr (kGated) {
        for (int ni = 0; ni < 2; ++ni) {
          const int row = n0 + wn * 16 + ni * 8 + 2 * t + (i % 2);
          if (row >= width)
            continue;
          float gate = acc[mi][ni][i], up = acc[mi][ni + 2][i];
          if (Cfg::hasBias(0))
            gate += biases[0][row];
          if (Cfg::hasBias(1))
            up += biases[1][row];
          outs[0][static_cast<long>(token) * width + row] =
              activate<Cfg::kActivation>(gate) * up;
        }
      } else {
        for (int ni = 0; ni < 4; ++ni) {
          const int row = n0 + wn * 32 + ni * 8 + 2 * t + (i % 2);
          if (row >= width)
            continue;
          float value = acc[mi][ni][i];
          if (Cfg::hasBias(segment))
            value += select<Cfg::kSegments>(biases, segment)[row];
          const long index = static_cast<long>(token) * width + row;
          if constexpr (Cfg::kEpilogue == kResidual)
            value += residual[index];
          select<Cfg::kSegments>(outs, segment)[index] = value;
        }
      }
    }
}

} // namespace sits

#endif // SITS_KERNELS_GEMM_CUH
