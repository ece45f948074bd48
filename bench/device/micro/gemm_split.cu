// A/B timing of gemm.cuh's gemmTensorCore with kSplitK on and off, on the
// Llama-3-8B o_proj shape (K = N = 4096, residual epilogue), for a range
// of token counts and K splits. Built and run by bench/device/split-k.sh.
#include "sits/common.cuh"
#include "sits/gemm.cuh"

#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

template <bool Split> struct Cfg8b {
  typedef sits::F16 Weight;
  static constexpr int kK = 4096;
  static constexpr int kSegments = 1;
  static constexpr int kTotalRows = 4096;
  __host__ __device__ static constexpr int rows(int) { return 4096; }
  __host__ __device__ static constexpr bool hasBias(int) { return false; }
  static constexpr int kEpilogue = 1;
  static constexpr int kActivation = 0;
  __host__ __device__ static constexpr int tiles(int) { return 32; }
  static constexpr int kTotalTiles = 32;
  static constexpr int kStages = 3;
  static constexpr bool kSplitK = Split;
};

template <bool Split>
__global__ void __launch_bounds__(128, 2)
run(const float *x, const unsigned short *w0, float *out0, const float *res,
    int tokens, float *partial, int *counters) {
  const unsigned short *weights[] = {w0};
  const float *biases[] = {nullptr};
  float *outs[] = {out0};
  sits::gemmTensorCore<Cfg8b<Split>>(x, weights, biases, outs, res, tokens,
                                     partial, counters);
}

template <bool Split> float timeIt(int tokens, int splits, void **args) {
  dim3 grid((tokens + 127) / 128, 32, splits);
  const int shared = sits::gemmTensorCoreSharedBytes(3);
  cudaFuncSetAttribute(run<Split>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       shared);
  for (int i = 0; i < 5; ++i)
    cudaLaunchKernel((void *)run<Split>, grid, dim3(128), args, shared, 0);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  const int reps = 50;
  for (int i = 0; i < reps; ++i)
    cudaLaunchKernel((void *)run<Split>, grid, dim3(128), args, shared, 0);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    std::printf("error %s\n", cudaGetErrorString(e));
  return ms * 1000 / reps;
}

int main() {
  const int maxTokens = 4096;
  float *x, *out, *res, *partial;
  unsigned short *w;
  int *counters;
  cudaMalloc(&x, size_t(maxTokens) * 4096 * 4);
  cudaMalloc(&out, size_t(maxTokens) * 4096 * 4);
  cudaMalloc(&res, size_t(maxTokens) * 4096 * 4);
  cudaMalloc(&partial, size_t(8) * 128 * 4096 * 4);
  cudaMalloc(&w, size_t(4096) * 4096 * 2);
  cudaMalloc(&counters, 4096 * 4);
  cudaMemset(x, 0, size_t(maxTokens) * 4096 * 4);
  cudaMemset(w, 0, size_t(4096) * 4096 * 2);
  cudaMemset(res, 0, size_t(maxTokens) * 4096 * 4);
  cudaMemset(counters, 0, 4096 * 4);
  std::printf("tokens splits  whole_us  splitk_us\n");
  for (int tokens : {16, 64, 128, 256, 512, 1024, 4096}) {
    int tiles = (tokens + 127) / 128;
    for (int splits : {1, 2, 4, 8}) {
      if (splits * tiles > 8 && splits > 1)
        continue;
      void *args[] = {&x, &w, &out, &res, &tokens, &partial, &counters};
      float whole = splits == 1 ? timeIt<false>(tokens, 1, args) : 0;
      float split = timeIt<true>(tokens, splits, args);
      std::printf("%6d %6d %9.1f %10.1f\n", tokens, splits, whole, split);
    }
  }
  return 0;
}
