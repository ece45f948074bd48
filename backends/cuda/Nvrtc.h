//===- Nvrtc.h - Compiling the generated CUDA with NVRTC --------*- C++ -*-===//
//
// sitsc is a static binary and NVRTC has no static library, so libnvrtc is
// loaded at run time with dlopen: from $SITS_NVRTC_PATH (a file) if set,
// and then from there only; else from $CUDA_HOME/lib64, $CUDA_PATH/lib64,
// /usr/local/cuda/lib64, then the default library search. libnvrtc-builtins is
// loaded from the same folder first, so that NVRTC finds it without
// LD_LIBRARY_PATH.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_NVRTC_H
#define SITS_BACKENDS_CUDA_NVRTC_H

#include "backends/cuda/Target.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits::codegen {

struct CompiledModule {
  std::vector<uint8_t> cubin; ///< SASS for the target
  std::string ptx;            ///< PTX of the same compilation (no NUL)
  std::string log;            ///< NVRTC's warnings, if any
};

/// The NVRTC version as the engine header stores it (13000 for 13.0).
llvm::Expected<uint32_t> getNvrtcVersion();

/// The library that was loaded (for messages), or "" before loading.
std::string getNvrtcPath();

/// Whether libnvrtc can be loaded (for tests that need it).
bool isNvrtcAvailable();

/// Compiles `source` (with the kernel library as named headers) for
/// `target`, keeping both the cubin and the PTX. A compile error returns
/// NVRTC's log. `defines` are more options (`-DNAME`), such as the
/// persistent decode kernels' translation unit's SITS_PERSISTENT_DECODE.
llvm::Expected<CompiledModule>
compileWithNvrtc(const std::string &source, const std::string &fileName,
                 const Target &target,
                 const std::vector<std::string> &defines = {});

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_NVRTC_H
