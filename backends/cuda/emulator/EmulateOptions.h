//===- EmulateOptions.h - sits-emulate's command line -----------*- C++ -*-===//

#ifndef SITS_BACKENDS_CUDA_EMULATOR_EMULATEOPTIONS_H
#define SITS_BACKENDS_CUDA_EMULATOR_EMULATEOPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace sits::emulate {

struct Options {
  std::string engine, cuda, mode, out, calibrationLog;
  std::vector<std::vector<int32_t>> tokens;
  int64_t prefill = 1, maxNewTokens = 16, hit = 0, stagger = -1, chunk = 0;
  bool padded = false;
  /// Every prefill step runs `prefill`, none `prefill_few`.
  bool gemmPrefill = false;
  /// After generate, print how many steps each program ran.
  bool countPrograms = false;
  bool poison = false;
  bool reverse = false;
  int64_t multiprocessors = 2;
  bool shuffleBlocks = true;
  /// Decode steps run the persistent decode kernel of their bucket.
  bool persistentDecode = false;
};

/// Prints "sits-emulate: error: MESSAGE" and exits 1.
[[noreturn]] void die(const std::string &message);

/// The options of `argv`; dies with the usage on a bad one.
Options parseArgs(int argc, char **argv);

/// Compiles `cudaPath` (from sitsc --emit=cuda) into a shared object with
/// the emulation headers and returns its path; with `persistent`, as the
/// persistent decode kernels' translation unit (SITS_PERSISTENT_DECODE).
/// The object is kept next to the source, named after a hash of the source,
/// the kernel library, the emulation headers and the compiler, and reused:
/// compiling takes seconds, a test runs the same kernels many times.
/// `dir` is a scratch folder for the headers.
std::string compileKernels(const std::string &cudaPath, const std::string &dir,
                           bool persistent);

} // namespace sits::emulate

#endif // SITS_BACKENDS_CUDA_EMULATOR_EMULATEOPTIONS_H
