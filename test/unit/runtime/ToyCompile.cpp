//===- ToyCompile.cpp - Compiling the toy kernels with NVRTC --------------===//

#include "ToyCompile.h"

#include <nvrtc.h>

namespace sits {
namespace test {

static bool compile(const std::string &source, const std::string &arch,
                    bool cubin, std::vector<uint8_t> *out, std::string *error) {
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source.c_str(), "toy.cu", 0, nullptr,
                         nullptr) != NVRTC_SUCCESS) {
    *error = "nvrtcCreateProgram failed";
    return false;
  }
  std::string archOption = "--gpu-architecture=" + arch;
  const char *options[] = {archOption.c_str(), "--std=c++17"};
  nvrtcResult rc = nvrtcCompileProgram(program, 2, options);
  if (rc != NVRTC_SUCCESS) {
    size_t logSize = 0;
    nvrtcGetProgramLogSize(program, &logSize);
    std::string log(logSize, '\0');
    nvrtcGetProgramLog(program, log.data());
    *error = std::string("NVRTC: ") + nvrtcGetErrorString(rc) + "\n" + log;
    nvrtcDestroyProgram(&program);
    return false;
  }
  size_t size = 0;
  rc = cubin ? nvrtcGetCUBINSize(program, &size)
             : nvrtcGetPTXSize(program, &size);
  if (rc == NVRTC_SUCCESS) {
    out->resize(size);
    char *data = reinterpret_cast<char *>(out->data());
    rc = cubin ? nvrtcGetCUBIN(program, data) : nvrtcGetPTX(program, data);
  }
  nvrtcDestroyProgram(&program);
  if (rc != NVRTC_SUCCESS) {
    *error = std::string("NVRTC: ") + nvrtcGetErrorString(rc);
    return false;
  }
  return true;
}

bool compileToyModule(const ToyConfig &config, uint32_t sm, bool withCubin,
                      bool withPtx, format::ModuleImage *module,
                      std::string *error) {
  std::string source = toyKernelSource(config);
  module->name = "toy";
  module->sm = sm;
  module->cubin.clear();
  module->ptx.clear();
  std::string digits = std::to_string(sm);
  if (withCubin &&
      !compile(source, "sm_" + digits, true, &module->cubin, error))
    return false;
  if (withPtx) {
    std::vector<uint8_t> ptx;
    if (!compile(source, "compute_" + digits, false, &ptx, error))
      return false;
    // NVRTC's PTX size includes the terminating NUL; the format stores text.
    while (!ptx.empty() && ptx.back() == 0)
      ptx.pop_back();
    module->ptx.assign(ptx.begin(), ptx.end());
  }
  return true;
}

} // namespace test
} // namespace sits
