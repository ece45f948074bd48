//===- PersistentDecode.h - sits-emulate's persistent decode ----*- C++ -*-===//
//
// sits-emulate --persistent-decode runs each decode step as the persistent
// kernel of its batch bucket (sitsc --decode-kernels=persistent): the
// engine's decode launches give each task its arguments, as they would be
// passed to the launch, and the kernel (the source compiled once more with
// SITS_PERSISTENT_DECODE) runs all their tiles on blocks that are all
// resident at once.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_EMULATOR_PERSISTENTDECODE_H
#define SITS_BACKENDS_CUDA_EMULATOR_PERSISTENTDECODE_H

#include <cstdint>
#include <string>
#include <vector>

namespace sits::emulate {

class PersistentDecode {
public:
  /// Loads the persistent kernels' shared object (compileKernels).
  explicit PersistentDecode(const std::string &object);

  /// The step's tasks, one per decode launch in order: the launch's kernel
  /// (its graph-mode entry) and its arguments as cuLaunchKernel takes them.
  struct Task {
    std::string kernel;
    std::vector<uint64_t> slots;
    std::vector<void *> args; ///< into `slots`
  };

  /// Runs the decode step of `bucket` sequences; dies naming `what` on an
  /// error (a task the kernel does not expect, a deadlock).
  void run(uint32_t bucket, std::vector<Task> &tasks, int64_t multiprocessors,
           const std::string &what);

private:
  void *library = nullptr;
};

} // namespace sits::emulate

#endif // SITS_BACKENDS_CUDA_EMULATOR_PERSISTENTDECODE_H
