//===- TestEngines.h - Engines built by the runtime tests ------*- C++ -*-===//
//
// Until the compiler's code generator exists, the runtime is tested with a
// toy "model" written by hand against the engine format:
//
//   x = emb[id]                       (embedding)
//   q, k, v = Wq x, Wk x, Wv x        (k, v appended to the KV cache)
//   h = x + softmax(scale q.K[0..pos]) V[0..pos]  (causal attention over the
//                                      cache: depends on the KV length)
//   logits = Wlm h                    (LM head, last token of each sequence)
//
// with a byte vocabulary, so that the whole load -> prefill -> decode ->
// sample -> graph replay path runs on the GPU, and a CPU reference of the
// same math checks its tokens. The corruption helpers make the engines the
// `--check` tests reject.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_RUNTIME_TESTENGINES_H
#define SITS_TEST_UNIT_RUNTIME_TESTENGINES_H

#include "sits/EngineFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits {
namespace test {

struct ToyConfig {
  uint32_t vocab = 256;
  uint32_t hidden = 32; ///< one warp per token in the kernels
  uint32_t maxBatch = 8;
  uint32_t capacity = 64;
  uint32_t maxPrefill = 16;
  format::DType weightType = format::DType::F16;
  uint32_t targetSm = 90;
  uint64_t weightSeed = 1;
  float attentionScale = 0.25f;
  std::vector<int32_t> eosTokenIds;
  /// A paged KV cache: blocks of blockTokens rows (0: contiguous), a pool
  /// of poolBlocks, read through the block table as the generated kernels
  /// do (docs/engine-format.md).
  uint32_t blockTokens = 0;
  uint32_t poolBlocks = 0;
  /// The programs take packed steps (metadata launch.packed_steps): false
  /// gives an engine as sitsc wrote them before, whose steps are padded.
  bool packedSteps = true;
  uint32_t maxBlocks() const {
    return blockTokens ? (capacity + blockTokens - 1) / blockTokens : 0;
  }
};

/// The toy's weights as floats, already rounded to `weightType`.
struct ToyWeights {
  std::vector<float> emb, wq, wk, wv, lm;
};

ToyWeights makeToyWeights(const ToyConfig &config);

/// CUDA C++ source of the toy's kernels (for NVRTC).
std::string toyKernelSource(const ToyConfig &config);

/// A module that is not a real cubin: enough for every check that needs no
/// GPU (the format and plan are complete and valid).
format::ModuleImage placeholderModule(const ToyConfig &config);

/// The whole toy engine around `module` (which must define the toy kernels
/// to run on a GPU).
format::EngineContents buildToyEngine(const ToyConfig &config,
                                      const ToyWeights &weights,
                                      format::ModuleImage module);

/// The toy's logits after `tokens` (one sequence), computed on the CPU with
/// the GPU's storage types (f16 KV cache).
std::vector<float> toyReferenceLogits(const ToyConfig &config,
                                      const ToyWeights &weights,
                                      const std::vector<int32_t> &tokens);

/// Serializes or fails the test.
std::vector<uint8_t> serializeOrDie(const format::EngineContents &contents);

/// Recomputes and stores the content hash of a complete engine image.
void rehash(std::vector<uint8_t> &bytes);

/// Offset of section `kind` in a serialized engine (reads its table).
uint64_t sectionOffset(const std::vector<uint8_t> &bytes,
                       format::SectionKind kind);

/// Kinds of broken engines for the --check tests.
enum class Corruption {
  None,
  Truncated,          ///< the last 100 bytes are cut
  FlippedByte,        ///< a weight byte flipped: content hash mismatch
  WrongMagic,         ///< first bytes replaced
  NewerMajor,         ///< format major + 1
  NewerMinor,         ///< format minor + 1
  SectionOutOfBounds, ///< the weights section runs past the end (rehashed)
  BadPlan,            ///< the plan claims more buffers than it holds (rehashed)
};

/// Applies `corruption` to a serialized engine.
void corrupt(std::vector<uint8_t> &bytes, Corruption corruption);

/// Parses a corruption name as used by sits-test-engine; false if unknown.
bool parseCorruption(const std::string &name, Corruption *corruption);

} // namespace test
} // namespace sits

#endif // SITS_TEST_UNIT_RUNTIME_TESTENGINES_H
