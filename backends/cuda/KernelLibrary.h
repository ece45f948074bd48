//===- KernelLibrary.h - The device-side kernel library ---------*- C++ -*-===//
//
// The headers in backends/cuda/kernels/, embedded into the compiler at
// build time (EmbedKernels.cmake), so that sitsc needs no files next to it.
// They reach NVRTC as named headers ("sits/gemv.cuh", ...).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_KERNELLIBRARY_H
#define SITS_BACKENDS_CUDA_KERNELLIBRARY_H

#include <cstddef>

namespace sits::codegen {

struct KernelHeader {
  const char *name; ///< as included: "sits/gemv.cuh"
  const char *source;
};

/// Every header of the kernel library.
const KernelHeader *getKernelHeaders(size_t *count);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_KERNELLIBRARY_H
