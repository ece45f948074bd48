//===- sits-test-engine.cpp - Writes engines for the runtime tests --------===//
//
//   sits-test-engine KIND -o PATH [--force] [--sm SM] [--dtype f16|f32|bf16]
//                    [--real [--ptx]] [--eos ID]
//
// KIND is `valid`, or a broken engine for the --check tests: `truncated`,
// `flipped-byte`, `wrong-magic`, `newer-major`, `newer-minor`,
// `section-out-of-bounds`, `bad-plan`; or a well-formed file (its content
// hash right) whose contents are wrong: `huge-weight-dims` (a weight of
// shape [2^64-1, h]), `zero-weight-dim` ([0, h]), `huge-activation-dim`,
// `huge-activation` (2^62 bytes), `bad-utf8-metadata`. `--sm` sets the target
// (a wrong target is a valid engine for another SM). `--real` compiles the toy
// kernels with NVRTC so that the engine runs on a GPU; without it the kernel
// image is a placeholder (enough for --check and --inspect); `--ptx` adds PTX.
// `--sm native` targets the GPU at hand, `--sm other` an SM whose cubin cannot
// run on it.
//
//===----------------------------------------------------------------------===//

#include "TestEngines.h"
#if SITS_TEST_HAS_NVRTC
#include "ToyCompile.h"
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

using namespace sits;

[[noreturn]] static void die(const std::string &message) {
  std::fprintf(stderr, "sits-test-engine: error: %s\n", message.c_str());
  std::exit(1);
}

/// Applies a contents-level edit named `kind`; false if `kind` names none.
static bool editContents(const std::string &kind,
                         format::EngineContents &contents) {
  auto find = [&](const char *name) -> format::BufferDesc & {
    for (format::BufferDesc &buffer : contents.buffers)
      if (buffer.name == name)
        return buffer;
    die(std::string("the toy engine has no buffer ") + name);
  };
  format::BufferDesc &weight = find("lm_head.weight");
  if (kind == "huge-weight-dims")
    weight.shape = {UINT64_MAX, weight.shape[1]};
  else if (kind == "zero-weight-dim")
    weight.shape = {0, weight.shape[1]};
  else if (kind == "huge-activation-dim")
    find("x").shape[0] = UINT64_MAX;
  else if (kind == "huge-activation")
    find("x").bytes = uint64_t(1) << 62;
  else if (kind == "bad-utf8-metadata")
    contents.metadataJson.insert(1, "\"note\": \"caf\xe9\", ");
  else
    return false;
  return true;
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
  test::Corruption corruption = test::Corruption::None;
  static const char *kEdits[] = {"huge-weight-dims", "zero-weight-dim",
                                 "huge-activation-dim", "huge-activation",
                                 "bad-utf8-metadata"};
  bool edit =
      std::find(std::begin(kEdits), std::end(kEdits), kind) != std::end(kEdits);
  if (kind.empty() || output.empty() ||
      (!edit && !test::parseCorruption(kind, &corruption)))
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
  if (edit)
    editContents(kind, contents);
  if (corruption == test::Corruption::None && !edit) {
    format::WriteOptions options;
    options.force = force;
    if (!format::writeEngine(contents, output, options, &error))
      die(error);
    return 0;
  }
  // Serialized as is (writeEngine would refuse it), the hash right unless
  // the corruption breaks it.
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
