//===- CudaCheck.cpp - Checking every CUDA call ---------------------------===//

#include "src/CudaCheck.h"
#include "src/Driver.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace sits {

namespace {

[[noreturn]] void defaultFatalHandler(const char *message) {
  std::fflush(stdout);
  std::fprintf(stderr, "sits: fatal: %s\n", message);
  std::fflush(stderr);
  // _Exit: destructors would call into a dead CUDA context.
  std::_Exit(3);
}

std::atomic<FatalErrorHandler> fatalHandler{&defaultFatalHandler};

} // namespace

void setFatalErrorHandler(FatalErrorHandler handler) {
  fatalHandler = handler ? handler : &defaultFatalHandler;
}

int countGpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the non-sticky error
    return 0;
  }
  return count;
}

namespace runtime {

bool isStickyError(int code) {
  switch (code) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorECCUncorrectable:
  case cudaErrorContextIsDestroyed:
    return true;
  default:
    return false;
  }
}

[[noreturn]] void fatal(const std::string &message) {
  fatalHandler.load()(message.c_str());
  std::_Exit(3); // a handler that returns is a bug; end anyway
}

void checkCuda(cudaError_t result, const char *what) {
  if (result == cudaSuccess)
    return;
  std::string message = std::string(what) +
                        " failed: " + cudaGetErrorName(result) + " (" +
                        cudaGetErrorString(result) + ")";
  if (isStickyError(result))
    fatal(message + "; the GPU context is unusable, ending the process");
  cudaGetLastError(); // a non-sticky error must not fail the next call
  if (result == cudaErrorNoDevice || result == cudaErrorInsufficientDriver)
    throw Error(ErrorCode::NoGpu, "no usable CUDA GPU: " + message);
  throw Error(ErrorCode::Cuda, message);
}

void checkDriver(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return;
  std::string message =
      std::string(what) + " failed: " + driverErrorText(result);
  if (isStickyError(static_cast<int>(result)))
    fatal(message + "; the GPU context is unusable, ending the process");
  throw Error(ErrorCode::Cuda, message);
}

} // namespace runtime
} // namespace sits
