//===- RowKernels.cpp - The block size of the one-kernel launches ---------===//
//
// The embedding, the norms, RoPE, the KV-cache append and the elementwise
// ops have one kernel each; what is chosen is its block size. The pass
// kernel-configure-launches records the choice in the IR as a
// #kernel.config (the dialect checks that it is whole warps, 32 to 1024:
// every one of these kernels strides over its row or elements by the block
// and reduces over whole warps), and the planner launches it.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"

#include <algorithm>

namespace sits::codegen {

using format::DType;
using kernel::KernelKind;

int64_t vectorWidth(int64_t width, DType type) {
  int64_t bytes = static_cast<int64_t>(format::dtypeBytes(type));
  return (width * bytes) % 16 == 0 ? 16 / bytes : 1;
}

namespace {

/// Whole warps of about `perThread` elements of a row each, at most
/// `maxThreads`.
RowKernelChoice threadsFor(int64_t width, int64_t perThread, int64_t maxThreads,
                           const std::string &what) {
  int64_t threads = (width + perThread - 1) / perThread;
  threads = std::clamp<int64_t>((threads + 31) / 32 * 32, 32, maxThreads);
  return {threads, std::to_string(width) + " " + what + " a row: " +
                       std::to_string(threads) + " threads, about " +
                       std::to_string(perThread) + " each (at most " +
                       std::to_string(maxThreads) + " threads)"};
}

} // namespace

RowKernelChoice selectRowThreads(KernelKind kernel, int64_t width) {
  switch (kernel) {
  case KernelKind::Embedding:
    return threadsFor(width, 1, 256, "16-byte pieces");
  case KernelKind::RMSNorm:
  case KernelKind::LayerNorm:
    return threadsFor(width, 8, 512, "elements");
  case KernelKind::Rope:
  case KernelKind::AppendKV:
    return threadsFor(width, 4, 256, "elements");
  default:
    return {256, "four elements a thread"};
  }
}

} // namespace sits::codegen
