//===- sits-test-engine.cpp - Writes engines for the runtime tests --------===//
//
//   sits-test-engine KIND -o PATH [--force] [--sm SM] [--dtype f16|f32|bf16]
//                    [--real [--ptx]] [--eos ID]
//
// KIND is `valid`, or a broken engine for the --check tests: `truncated`,
// `flipped-byte`, `wrong-magic`, `newer-major`, `newer-minor`,
// `section-out-of-bounds`, `bad-plan`. `--sm` sets the target (a wrong target
// is a valid engine for another SM). `--real` compiles the toy kernels with
// NVRTC so that the engine runs on a GPU; without it the kernel image is a
// placeholder (enough for --check and --inspect); `--ptx` adds PTX. `--sm
// native` targets the GPU at hand, `--sm other` an SM whose cubin cannot run on
// it.
//
//===----------------------------------------------------------------------===//

#include "TestEngines.h"
#if SITS_TEST_HAS_NVRTC
#include "ToyCompile.h"
#include <cuda_runtime_api.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace sits;

[[noreturn]] static void die(const std::string &message) {
  std::fprintf(stderr, "sits-test-engine: error: %s\n", message.c_str());
  std::exit(1);
}

static int run(int argc, char **argv) {
  std::string kind, output, dtype = "f16";
  std::string sm = "90";
  bool force = false, real = false, ptx = false;
  test::ToyConfig config;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(a + " needs a value");
      return argv[++i];
    };
    if (a == "-o")
      output = value();
    else if (a == "--force")
      force = true;
    else if (a == "--real")
      real = true;
    else if (a == "--ptx")
      ptx = true;
    else if (a == "--sm")
      sm = value();
    else if (a == "--dtype")
      dtype = value();
    else if (a == "--eos")
      config.eosTokenIds.push_back(std::stoi(value()));
    else if (kind.empty() && a[0] != '-')
      kind = a;
    else
      die("unknown argument '" + a + "'");
  }
  test::Corruption corruption;
  if (kind.empty() || output.empty() ||
      !test::parseCorruption(kind, &corruption))
    die("usage: sits-test-engine KIND -o PATH [--force] [--sm SM] [--dtype T] "
        "[--real] [--eos ID]");
  if (sm == "native" || sm == "other") {
#if SITS_TEST_HAS_NVRTC
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) !=
            cudaSuccess)
      die("--sm " + sm + " needs a CUDA GPU");
    config.targetSm = static_cast<uint32_t>(major * 10 + minor);
    if (sm == "other")
      config.targetSm = major == 9 ? 100 : 90;
#else
    die("--sm " + sm + " needs the CUDA toolkit");
#endif
  } else if (sm.empty() ||
             sm.find_first_not_of("0123456789") != std::string::npos ||
             sm.size() > 4) {
    die("--sm expects a number, 'native' or 'other'");
  } else {
    config.targetSm = static_cast<uint32_t>(std::stoul(sm));
  }
  if (!format::parseDType(dtype, &config.weightType) ||
      format::dtypeBytes(config.weightType) > 4 ||
      config.weightType == format::DType::I32)
    die("--dtype must be f16, bf16 or f32");

  format::ModuleImage module = test::placeholderModule(config);
  if (real) {
#if SITS_TEST_HAS_NVRTC
    std::string error;
    if (!test::compileToyModule(config, config.targetSm, true, ptx, &module,
                                &error))
      die(error);
#else
    die("--real needs NVRTC (built without the CUDA toolkit)");
#endif
  }
  format::EngineContents contents = test::buildToyEngine(
      config, test::makeToyWeights(config), std::move(module));
  std::string error;
  if (corruption == test::Corruption::None) {
    format::WriteOptions options;
    options.force = force;
    if (!format::writeEngine(contents, output, options, &error))
      die(error);
    return 0;
  }
  std::vector<uint8_t> bytes = test::serializeOrDie(contents);
  test::corrupt(bytes, corruption);
  FILE *f = std::fopen(output.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0)
    die("cannot write '" + output + "'");
  return 0;
}

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) { // a malformed number
    die(std::string("bad argument: ") + e.what());
  }
}
