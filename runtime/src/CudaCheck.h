//===- CudaCheck.h - Checking every CUDA call ------------------*- C++ -*-===//

#ifndef SITS_RUNTIME_SRC_CUDACHECK_H
#define SITS_RUNTIME_SRC_CUDACHECK_H

#include "sits/Runtime.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string>

namespace sits {
namespace runtime {

/// Whether the error leaves the context unusable (every later call fails).
bool isStickyError(int code);

/// Throws Error(Cuda) naming `what`, or calls the fatal handler when the
/// error is sticky. Returns normally on success.
void checkCuda(cudaError_t result, const char *what);
void checkDriver(CUresult result, const char *what);

/// Calls the fatal-error handler (never returns).
[[noreturn]] void fatal(const std::string &message);

} // namespace runtime
} // namespace sits

#endif // SITS_RUNTIME_SRC_CUDACHECK_H
