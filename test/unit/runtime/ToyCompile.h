//===- ToyCompile.h - Compiling the toy kernels with NVRTC -----*- C++ -*-===//
//
// Test-only: the runtime itself never uses NVRTC.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_RUNTIME_TOYCOMPILE_H
#define SITS_TEST_UNIT_RUNTIME_TOYCOMPILE_H

#include "TestEngines.h"

namespace sits {
namespace test {

/// Compiles the toy kernels to a cubin for sm_`sm` (and, with `withPtx`, to
/// PTX for compute_`sm`). False with the NVRTC log on failure.
bool compileToyModule(const ToyConfig &config, uint32_t sm, bool withCubin,
                      bool withPtx, format::ModuleImage *module,
                      std::string *error);

} // namespace test
} // namespace sits

#endif // SITS_TEST_UNIT_RUNTIME_TOYCOMPILE_H
