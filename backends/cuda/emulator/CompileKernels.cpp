//===- CompileKernels.cpp - The generated CUDA source as host code --------===//

#include "backends/cuda/KernelLibrary.h"
#include "backends/cuda/emulator/EmulateOptions.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace sits::codegen {
/// The emulation headers, embedded like the kernel library
/// (EmulationHeader.cpp).
const KernelHeader *getEmulationHeaders(size_t *count);
} // namespace sits::codegen

namespace sits::emulate {

namespace {

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    die("cannot write " + path);
}

/// FNV-1a, to name a compiled object after everything that went into it.
uint64_t hashText(uint64_t hash, const std::string &text) {
  for (unsigned char c : text)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    die("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

std::string compileKernels(const std::string &cudaPath, const std::string &dir,
                           bool persistent) {
  const char *cxx = std::getenv("SITS_EMULATE_CXX");
  if (!cxx || !*cxx)
    cxx = "c++";
  size_t count = 0, emulationCount = 0;
  const codegen::KernelHeader *headers = codegen::getKernelHeaders(&count);
  const codegen::KernelHeader *emulation =
      codegen::getEmulationHeaders(&emulationCount);
  uint64_t hash = hashText(0xcbf29ce484222325ull, readFile(cudaPath));
  for (size_t i = 0; i < count; ++i)
    hash = hashText(hashText(hash, headers[i].name), headers[i].source);
  for (size_t i = 0; i < emulationCount; ++i)
    hash = hashText(hashText(hash, emulation[i].name), emulation[i].source);
  hash = hashText(hashText(hash, cxx), persistent ? "persistent" : "");
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), ".%016llx.%semulate.so",
                static_cast<unsigned long long>(hash),
                persistent ? "persistent." : "");
  // dlopen searches the library path for a name without a '/'.
  std::string cached =
      (cudaPath.find('/') == std::string::npos ? "./" : "") + cudaPath + suffix;
  if (access(cached.c_str(), R_OK) == 0)
    return cached;

  mkdir((dir + "/sits").c_str(), 0700);
  for (size_t i = 0; i < count; ++i)
    writeFile(dir + "/" + headers[i].name, headers[i].source);
  for (size_t i = 0; i < emulationCount; ++i)
    writeFile(dir + "/" + emulation[i].name, emulation[i].source);
  std::string object =
      dir + (persistent ? "/kernels.persistent.so" : "/kernels.so");
  std::vector<std::string> command = {cxx,
                                      "-std=c++17",
                                      "-O2",
                                      "-fPIC",
                                      "-shared",
                                      "-w",
                                      "-DSITS_EMULATE",
                                      "-include",
                                      dir + "/sits/emulation.h",
                                      "-I",
                                      dir,
                                      "-x",
                                      "c++",
                                      cudaPath,
                                      "-o",
                                      object};
  // The persistent decode kernels' translation unit (tile.cuh's persistent
  // mode): the same source, compiled once more.
  if (persistent)
    command.insert(command.begin() + 7, "-DSITS_PERSISTENT_DECODE");
  std::vector<char *> argv;
  for (std::string &part : command)
    argv.push_back(part.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, cxx, nullptr, nullptr, argv.data(), environ) != 0)
    die(std::string("cannot run the host compiler '") + cxx + "'");
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die("the host compiler could not compile " + cudaPath +
        (persistent ? " with SITS_PERSISTENT_DECODE" : ""));
  // Keep it for the next run when the source's folder is writable.
  if (std::rename(object.c_str(), cached.c_str()) == 0)
    return cached;
  return object;
}

} // namespace sits::emulate
