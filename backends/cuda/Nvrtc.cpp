//===- Nvrtc.cpp - Compiling the generated CUDA with NVRTC ----------------===//

#include "backends/cuda/Nvrtc.h"
#include "backends/cuda/KernelLibrary.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

namespace sits::codegen {

namespace {

/// Runs NVRTC in the root directory and goes back after: -lineinfo records
/// the working directory in the cubins' line tables, and an engine's bytes
/// must not depend on where sitsc ran (the generated source exists nowhere
/// on disk, so no path is lost).
class InRootDirectory {
public:
  InRootDirectory() : saved(::open(".", O_RDONLY | O_CLOEXEC)) {
    if (saved >= 0 && ::chdir("/") != 0) {
      ::close(saved);
      saved = -1;
    }
  }
  ~InRootDirectory() {
    if (saved < 0)
      return;
    // Going back cannot fail short of the directory being unreadable now;
    // nothing here could repair that.
    (void)::fchdir(saved);
    ::close(saved);
  }
  InRootDirectory(const InRootDirectory &) = delete;
  InRootDirectory &operator=(const InRootDirectory &) = delete;

private:
  int saved;
};

// The few NVRTC entry points sitsc uses, declared here so that building the
// compiler needs no CUDA headers. nvrtcResult is an int enum, nvrtcProgram a
// pointer (nvrtc.h).
using Program = void *;
struct NvrtcApi {
  int (*version)(int *, int *) = nullptr;
  const char *(*getErrorString)(int) = nullptr;
  int (*createProgram)(Program *, const char *, const char *, int,
                       const char *const *, const char *const *) = nullptr;
  int (*destroyProgram)(Program *) = nullptr;
  int (*compileProgram)(Program, int, const char *const *) = nullptr;
  int (*getProgramLogSize)(Program, size_t *) = nullptr;
  int (*getProgramLog)(Program, char *) = nullptr;
  int (*getCUBINSize)(Program, size_t *) = nullptr;
  int (*getCUBIN)(Program, char *) = nullptr;
  int (*getPTXSize)(Program, size_t *) = nullptr;
  int (*getPTX)(Program, char *) = nullptr;
};

struct Loaded {
  NvrtcApi api;
  std::string path;
  std::string error;
};

/// Folders to look for libnvrtc in, most specific first.
std::vector<std::string> candidateFolders() {
  std::vector<std::string> folders;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var); root && *root)
      folders.push_back(std::string(root) + "/lib64");
  folders.push_back("/usr/local/cuda/lib64");
  return folders;
}

/// Loads libnvrtc-builtins from `folder` (any 13.x version there), so that
/// libnvrtc finds it already loaded.
void preloadBuiltins(const std::string &folder) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(folder, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.starts_with("libnvrtc-builtins.so.13") && !name.contains(".alt."))
      dlopen(it->path().c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
}

Loaded load() {
  Loaded loaded;
  void *handle = nullptr;
  std::string tried;
  const char *explicitPath = std::getenv("SITS_NVRTC_PATH");
  bool explicitOnly = explicitPath && *explicitPath;
  if (explicitOnly) {
    preloadBuiltins(llvm::sys::path::parent_path(explicitPath).str());
    handle = dlopen(explicitPath, RTLD_NOW | RTLD_LOCAL);
    if (handle)
      loaded.path = explicitPath;
    else
      tried += std::string(" ") + explicitPath + " (" + dlerror() + ")";
  }
  // An explicit path is the only one tried: a test (or a user) that names a
  // library must not silently get another.
  for (const std::string &folder : candidateFolders()) {
    if (handle || explicitOnly)
      break;
    std::string path = folder + "/libnvrtc.so.13";
    if (!llvm::sys::fs::exists(path)) {
      tried += " " + path;
      continue;
    }
    preloadBuiltins(folder);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle)
      loaded.path = path;
    else
      tried += " " + path + " (" + dlerror() + ")";
  }
  if (!handle && !explicitOnly) {
    handle = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (handle)
      loaded.path = "libnvrtc.so.13 (default library path)";
    else
      tried += " libnvrtc.so.13 on the default library path";
  }
  if (!handle) {
    loaded.error = "cannot load NVRTC (libnvrtc.so.13 from CUDA 13), needed "
                   "to compile the kernels; tried:" +
                   tried +
                   ". Install the CUDA toolkit or set CUDA_HOME or "
                   "SITS_NVRTC_PATH";
    return loaded;
  }
  NvrtcApi &api = loaded.api;
  bool complete = true;
  auto resolve = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(handle, name));
    complete &= fn != nullptr;
  };
  resolve(api.version, "nvrtcVersion");
  resolve(api.getErrorString, "nvrtcGetErrorString");
  resolve(api.createProgram, "nvrtcCreateProgram");
  resolve(api.destroyProgram, "nvrtcDestroyProgram");
  resolve(api.compileProgram, "nvrtcCompileProgram");
  resolve(api.getProgramLogSize, "nvrtcGetProgramLogSize");
  resolve(api.getProgramLog, "nvrtcGetProgramLog");
  resolve(api.getCUBINSize, "nvrtcGetCUBINSize");
  resolve(api.getCUBIN, "nvrtcGetCUBIN");
  resolve(api.getPTXSize, "nvrtcGetPTXSize");
  resolve(api.getPTX, "nvrtcGetPTX");
  if (!complete)
    loaded.error = loaded.path + " lacks NVRTC functions sitsc needs (an "
                                 "NVRTC older than CUDA 11.1?)";
  return loaded;
}

const Loaded &nvrtc() {
  static Loaded loaded = load();
  return loaded;
}

llvm::Error nvrtcError(const std::string &what, int result) {
  return llvm::createStringError(
      "NVRTC " + what + " failed: " + nvrtc().api.getErrorString(result));
}

} // namespace

bool isNvrtcAvailable() { return nvrtc().error.empty(); }

std::string getNvrtcPath() { return nvrtc().path; }

llvm::Expected<uint32_t> getNvrtcVersion() {
  const Loaded &loaded = nvrtc();
  if (!loaded.error.empty())
    return llvm::createStringError(loaded.error);
  int major = 0, minor = 0;
  if (int rc = loaded.api.version(&major, &minor))
    return nvrtcError("nvrtcVersion", rc);
  return static_cast<uint32_t>(major * 1000 + minor * 10);
}

llvm::Expected<CompiledModule>
compileWithNvrtc(const std::string &source, const std::string &fileName,
                 const Target &target,
                 const std::vector<std::string> &defines) {
  const Loaded &loaded = nvrtc();
  if (!loaded.error.empty())
    return llvm::createStringError(loaded.error);
  const NvrtcApi &api = loaded.api;

  size_t headerCount = 0;
  const KernelHeader *headers = getKernelHeaders(&headerCount);
  std::vector<const char *> names, sources;
  for (size_t i = 0; i < headerCount; ++i) {
    names.push_back(headers[i].name);
    sources.push_back(headers[i].source);
  }
  Program program = nullptr;
  if (int rc = api.createProgram(&program, source.c_str(), fileName.c_str(),
                                 static_cast<int>(headerCount), sources.data(),
                                 names.data()))
    return nvrtcError("nvrtcCreateProgram", rc);
  struct Destroy {
    const NvrtcApi &api;
    Program *program;
    ~Destroy() { api.destroyProgram(program); }
  } destroy{api, &program};

  // -arch=sm_XX gives both the cubin and the PTX of one compilation.
  std::string arch = "-arch=" + target.getName();
  std::vector<const char *> options = {arch.c_str(), "--std=c++17", "-lineinfo",
                                       "-DNDEBUG"};
  for (const std::string &define : defines)
    options.push_back(define.c_str());
  int compiled;
  {
    InRootDirectory root;
    compiled = api.compileProgram(program, static_cast<int>(options.size()),
                                  options.data());
  }
  CompiledModule module;
  size_t logSize = 0;
  if (api.getProgramLogSize(program, &logSize) == 0 && logSize > 1) {
    module.log.resize(logSize);
    api.getProgramLog(program, module.log.data());
    while (!module.log.empty() &&
           (module.log.back() == '\0' || module.log.back() == '\n'))
      module.log.pop_back();
  }
  if (compiled)
    return llvm::createStringError(
        "NVRTC could not compile the generated kernels for " +
        target.getName() + " (" + api.getErrorString(compiled) + "):\n" +
        module.log);

  size_t size = 0;
  if (int rc = api.getCUBINSize(program, &size))
    return nvrtcError("nvrtcGetCUBINSize", rc);
  module.cubin.resize(size);
  if (size)
    if (int rc = api.getCUBIN(program,
                              reinterpret_cast<char *>(module.cubin.data())))
      return nvrtcError("nvrtcGetCUBIN", rc);
  if (int rc = api.getPTXSize(program, &size))
    return nvrtcError("nvrtcGetPTXSize", rc);
  module.ptx.resize(size);
  if (size)
    if (int rc = api.getPTX(program, module.ptx.data()))
      return nvrtcError("nvrtcGetPTX", rc);
  while (!module.ptx.empty() && module.ptx.back() == '\0')
    module.ptx.pop_back();
  if (module.cubin.empty())
    return llvm::createStringError("NVRTC produced no cubin for " +
                                   target.getName());
  return module;
}

} // namespace sits::codegen
