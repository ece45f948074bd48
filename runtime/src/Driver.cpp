//===- Driver.cpp - The CUDA driver API, resolved at run time -------------===//

#include "src/Driver.h"
#include "src/CudaCheck.h"

#include <cuda_runtime_api.h>
#include <mutex>

namespace sits {
namespace runtime {

namespace {

template <typename Fn>
void resolve(const char *symbol, Fn *out, std::string *missing) {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  // 12000: the ABI of each function as of CUDA 12.0, which every driver
  // that runs CUDA 13 code provides.
  cudaError_t rc = cudaGetDriverEntryPointByVersion(symbol, &fn, 12000,
                                                    cudaEnableDefault, &status);
  if (rc != cudaSuccess || status != cudaDriverEntryPointSuccess || !fn) {
    cudaGetLastError();
    if (missing->empty())
      *missing = symbol;
    return;
  }
  *out = reinterpret_cast<Fn>(fn);
}

} // namespace

const DriverApi &driver() {
  static DriverApi api;
  static std::string missing;
  static std::once_flag once;
  std::call_once(once, [] {
    resolve("cuModuleLoadDataEx", &api.moduleLoadDataEx, &missing);
    resolve("cuModuleUnload", &api.moduleUnload, &missing);
    resolve("cuModuleGetFunction", &api.moduleGetFunction, &missing);
    resolve("cuModuleGetGlobal", &api.moduleGetGlobal, &missing);
    resolve("cuLaunchKernel", &api.launchKernel, &missing);
    resolve("cuFuncSetAttribute", &api.funcSetAttribute, &missing);
    resolve("cuFuncGetAttribute", &api.funcGetAttribute, &missing);
    resolve("cuOccupancyMaxActiveBlocksPerMultiprocessor",
            &api.occupancyMaxActiveBlocksPerMultiprocessor, &missing);
    resolve("cuGetErrorName", &api.getErrorName, &missing);
    resolve("cuGetErrorString", &api.getErrorString, &missing);
    std::string optional;
    resolve("cuLaunchKernelEx", &api.launchKernelEx, &optional);
  });
  if (!missing.empty())
    throw Error(ErrorCode::NoGpu, "the CUDA driver does not provide " +
                                      missing + " (driver too old?)");
  return api;
}

std::string driverErrorText(CUresult result) {
  const char *name = nullptr;
  const char *text = nullptr;
  const DriverApi *api = nullptr;
  try {
    api = &driver();
  } catch (const Error &) {
  }
  if (api) {
    api->getErrorName(result, &name);
    api->getErrorString(result, &text);
  }
  return std::string(name ? name : "CUDA driver error ") +
         (name ? "" : std::to_string(static_cast<int>(result))) + " (" +
         (text ? text : "no description") + ")";
}

} // namespace runtime
} // namespace sits
