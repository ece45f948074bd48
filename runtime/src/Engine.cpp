//===- Engine.cpp - Loading and validating an engine on a GPU -------------===//

#include "src/CudaCheck.h"
#include "src/Driver.h"
#include "src/EngineImpl.h"
#include "src/Sampling.h"

#include <cuda_runtime_api.h>

namespace sits {

using runtime::checkCuda;
using runtime::checkDriver;
using runtime::driver;

Engine::Impl::~Impl() {
  // Teardown ignores errors: it may run while an exception unwinds.
  if (weights)
    cudaFree(weights);
  if (!modules.empty()) {
    const runtime::DriverApi &api = driver();
    for (CUmodule module : modules)
      if (module)
        api.moduleUnload(module);
  }
  cudaGetLastError();
}

Engine::Engine() : state(new Impl()) {}
Engine::~Engine() = default;

CUmodule Engine::Impl::loadModule(const format::ModuleImage &image) const {
  const bool jit = usePtx || image.cubin.empty();
  const void *data = jit ? static_cast<const void *>(image.ptx.c_str())
                         : static_cast<const void *>(image.cubin.data());
  char log[4096] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log) - 1)};
  CUmodule module = nullptr;
  CUresult rc = driver().moduleLoadDataEx(&module, data, 2, options, values);
  if (rc != CUDA_SUCCESS) {
    if (runtime::isStickyError(rc))
      checkDriver(rc, "loading a kernel module");
    throw Error(
        ErrorCode::InvalidEngine,
        "cannot load kernel module \"" + image.name + "\" (" +
            (jit ? "PTX JIT" : "cubin for sm_" + std::to_string(image.sm)) +
            "): " + runtime::driverErrorText(rc) +
            (log[0] ? std::string(": ") + log : std::string()));
  }
  return module;
}

namespace {

void loadModules(Engine::Impl &e) {
  const runtime::DriverApi &api = driver();
  const format::PersistentDecode &persistent = e.contents.persistentDecode;
  if (!persistent.empty())
    e.persistentModule = static_cast<int>(
        e.contents.kernels[persistent.buckets[0].kernel].module);
  for (const format::ModuleImage &image : e.contents.modules) {
    if (static_cast<int>(e.modules.size()) == e.persistentModule) {
      e.modules.push_back(nullptr); // loaded by each session
      continue;
    }
    e.modules.push_back(e.loadModule(image));
  }
  for (const format::KernelRef &kernel : e.contents.kernels) {
    CUfunction function = nullptr;
    if (static_cast<int>(kernel.module) == e.persistentModule) {
      e.functions.push_back(nullptr);
      continue;
    }
    CUresult rc = api.moduleGetFunction(&function, e.modules[kernel.module],
                                        kernel.function.c_str());
    if (rc != CUDA_SUCCESS) {
      if (runtime::isStickyError(rc))
        checkDriver(rc, "looking up a kernel");
      throw Error(ErrorCode::InvalidEngine,
                  "kernel \"" + kernel.function + "\" is not in module \"" +
                      e.contents.modules[kernel.module].name +
                      "\": " + runtime::driverErrorText(rc));
    }
    e.functions.push_back(function);
  }
  // Nothing opted in yet: a kernel with static shared memory reaches the 48
  // KiB default with less dynamic memory than that, so every launch that
  // asks for dynamic shared memory sets the attribute once.
  e.sharedOptedIn.assign(e.functions.size(), 0);
}

} // namespace

std::shared_ptr<Engine> Engine::load(const std::string &path,
                                     const LoadOptions &options) {
  std::shared_ptr<Engine> engine(new Engine());
  Impl &e = *engine->state;

  std::string error;
  e.file = format::EngineFile::open(path, &error);
  if (!e.file)
    throw Error(ErrorCode::InvalidEngine, error);
  format::ReadOptions readOptions;
  readOptions.verifyContentHash = options.verifyContentHash;
  if (!format::readEngine(*e.file, readOptions, &e.header, &e.contents,
                          &e.config, &error))
    throw Error(ErrorCode::InvalidEngine, path + ": " + error);
  // Before the GPU: a stored tokenizer that does not load is a bad engine on
  // every machine.
  e.tokenizer = ModelTokenizer::fromEngine(e.contents, e.config);

  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(ErrorCode::NoGpu,
                std::string("no CUDA GPU is available") +
                    (rc != cudaSuccess
                         ? std::string(" (") + cudaGetErrorString(rc) + ")"
                         : std::string()));
  }
  if (options.device < 0 || options.device >= count)
    throw Error(ErrorCode::InvalidArgument,
                "device " + std::to_string(options.device) +
                    " does not exist (" + std::to_string(count) +
                    " GPU(s) found)");
  e.device = options.device;
  checkCuda(cudaSetDevice(e.device), "cudaSetDevice");
  cudaDeviceProp props;
  checkCuda(cudaGetDeviceProperties(&props, e.device),
            "cudaGetDeviceProperties");
  e.deviceName = props.name;
  e.deviceSm = static_cast<uint32_t>(props.major * 10 + props.minor);
  e.multiprocessors = std::max(1, props.multiProcessorCount);
  e.maxSharedOptin = props.sharedMemPerBlockOptin;

  bool allHavePtx = !e.contents.modules.empty();
  for (const format::ModuleImage &image : e.contents.modules)
    allHavePtx &= !image.ptx.empty();
  if (!format::checkTargetSm(e.header.targetSm, e.deviceSm, allHavePtx,
                             &e.usePtx, &error))
    throw Error(ErrorCode::WrongGpu,
                path + ": " + error + " (" + e.deviceName + ")");

  checkCuda(cudaFree(nullptr), "creating the CUDA context");
  checkCuda(runtime::preloadSamplingKernels(),
            "loading the runtime's sampling kernels (built for another GPU?)");
  loadModules(e);

  e.weightBytes = e.contents.weightSize();
  if (e.weightBytes) {
    checkCuda(cudaMalloc(&e.weights, e.weightBytes),
              "allocating the weights on the GPU");
    checkCuda(cudaMemcpy(e.weights, e.contents.weightBytes(), e.weightBytes,
                         cudaMemcpyHostToDevice),
              "copying the weights to the GPU");
  }
  return engine;
}

const format::RuntimeConfig &Engine::config() const { return state->config; }
const format::Header &Engine::header() const { return state->header; }
const format::EngineContents &Engine::contents() const {
  return state->contents;
}
int Engine::device() const { return state->device; }
std::string Engine::deviceName() const { return state->deviceName; }
uint32_t Engine::deviceSm() const { return state->deviceSm; }
bool Engine::usesPtx() const { return state->usePtx; }
uint64_t Engine::weightBytes() const { return state->weightBytes; }
const std::shared_ptr<const ModelTokenizer> &Engine::tokenizer() const {
  return state->tokenizer;
}

} // namespace sits
