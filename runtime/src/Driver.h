//===- Driver.h - The CUDA driver API, resolved at run time ----*- C++ -*-===//
//
// The runtime does not link libcuda (a binary that does fails to start on a
// machine without a driver, where `sits-run --check` must still work). The
// few driver functions it needs are looked up through cudart's
// cudaGetDriverEntryPointByVersion once a GPU is in use.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_DRIVER_H
#define SITS_RUNTIME_SRC_DRIVER_H

#include <cuda.h>
#include <string>

namespace sits {
namespace runtime {

struct DriverApi {
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  /// For the persistent decode kernels' traces (a module's `__device__`
  /// array by name).
  decltype(&::cuModuleGetGlobal) moduleGetGlobal = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  /// Optional (null when the driver lacks it): launches with attributes,
  /// for programmatic dependent launch.
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) funcGetAttribute = nullptr;
  /// For the persistent decode kernels' residency check.
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor)
      occupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
};

/// The driver functions; throws Error(NoGpu) when the driver lacks one.
/// Call after the CUDA runtime has found a device.
const DriverApi &driver();

/// "CUDA_ERROR_X (description)" for a driver result.
std::string driverErrorText(CUresult result);

} // namespace runtime
} // namespace sits

#endif // SITS_RUNTIME_SRC_DRIVER_H
