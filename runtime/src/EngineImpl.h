//===- EngineImpl.h - A loaded engine's state ------------------*- C++ -*-===//

#ifndef SITS_RUNTIME_SRC_ENGINEIMPL_H
#define SITS_RUNTIME_SRC_ENGINEIMPL_H

#include "sits/Runtime.h"

#include <cuda.h>
#include <memory>
#include <vector>

namespace sits {

struct Engine::Impl {
  ~Impl();

  std::unique_ptr<format::EngineFile> file;
  format::Header header;
  format::EngineContents contents;
  format::RuntimeConfig config;
  /// Text in and out; null for an engine of ids only.
  std::shared_ptr<const ModelTokenizer> tokenizer;

  int device = 0;
  std::string deviceName;
  uint32_t deviceSm = 0;
  /// Streaming multiprocessors: the plan's symbol M.
  int64_t multiprocessors = 1;
  bool usePtx = false;
  /// Largest dynamic shared memory a block may opt into on this device.
  uint64_t maxSharedOptin = 0;

  /// Loaded modules, but for the persistent decode kernels' (null here:
  /// each session loads its own copy, for counters of its own).
  std::vector<CUmodule> modules;
  std::vector<CUfunction> functions; ///< one per contents.kernels entry
  /// The persistent decode kernels' module, or -1.
  int persistentModule = -1;
  /// Dynamic shared memory each function has been opted into (> 48 KiB).
  std::vector<uint64_t> sharedOptedIn;

  void *weights = nullptr; ///< the weights section, on the device
  uint64_t weightBytes = 0;

  /// Loads one of the engine's modules (its cubin, or its PTX by JIT with
  /// usePtx or no cubin); an engine whose module does not load is invalid.
  CUmodule loadModule(const format::ModuleImage &image) const;
};

} // namespace sits

#endif // SITS_RUNTIME_SRC_ENGINEIMPL_H
