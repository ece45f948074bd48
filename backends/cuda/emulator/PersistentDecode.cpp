//===- PersistentDecode.cpp - sits-emulate's persistent decode ------------===//

#include "backends/cuda/emulator/PersistentDecode.h"
#include "backends/cuda/emulator/EmulateOptions.h"

#include <dlfcn.h>

namespace sits::emulate {

/// What CudaEmitter.cpp generates under SITS_EMULATE for each bucket B,
/// `sits_decode_bB__emulate`: checks the tasks against the kernel's table,
/// packs their arguments and runs the kernel. Returns 0, or 1 with the
/// reason in `error`.
using PersistentStepFn = int (*)(void *const *const *taskArgs,
                                 const char *const *kernels, unsigned count,
                                 unsigned multiprocessors, char *error,
                                 unsigned errorBytes);

PersistentDecode::PersistentDecode(const std::string &object) {
  library = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    die(std::string("cannot load the persistent decode kernels: ") + dlerror());
}

void PersistentDecode::run(uint32_t bucket, std::vector<Task> &tasks,
                           int64_t multiprocessors, const std::string &what) {
  const std::string symbol =
      "sits_decode_b" + std::to_string(bucket) + "__emulate";
  auto step =
      reinterpret_cast<PersistentStepFn>(dlsym(library, symbol.c_str()));
  if (!step)
    die(what + ": the CUDA source has no persistent decode kernel for batch " +
        std::to_string(bucket) +
        " (generate it with --decode-kernels=persistent and the engine's "
        "other options)");
  std::vector<void *const *> args;
  std::vector<const char *> kernels;
  for (Task &task : tasks) {
    args.push_back(task.args.data());
    kernels.push_back(task.kernel.c_str());
  }
  char message[4096] = {0};
  if (step(args.data(), kernels.data(), static_cast<unsigned>(tasks.size()),
           static_cast<unsigned>(multiprocessors), message, sizeof(message)))
    die(what + ": " + message);
}

} // namespace sits::emulate
