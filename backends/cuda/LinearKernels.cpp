//===- LinearKernels.cpp - Which kernel runs a linear layer ---------------===//
//
// The kernel selection of the linear launches (GEMV at decode, GEMM at
// prefill; plain or tensor-core; plain or quantized weights) and the tiles
// per block of the tensor-core GEMVs. The pass kernel-select-linear-kernels
// records the choice in the IR; the planner checks the IR's choice here and
// launches it (Launches.cpp's planLinear), so the two cannot disagree.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"

#include <algorithm>
#include <numeric>

namespace sits::codegen {

using format::DType;
using kernel::KernelKind;

int64_t gemvTensorCoreSharedBytes(int64_t mats, int64_t tilesPerBlock,
                                  int64_t unroll, int64_t stages) {
  constexpr int64_t kThreads = 256, kWarps = 8;
  return 16 * (stages * unroll * mats * tilesPerBlock * 2 * kThreads +
               kWarps * mats * tilesPerBlock * 32);
}

int64_t gemmTensorCoreSharedBytes(int64_t stages, bool halfInput) {
  // A stage: 128 token rows of 40 floats (or halves) and 128 weight rows of
  // 40 halves.
  constexpr int64_t kRows = 128, kStride = 32 + 8;
  return stages * kRows * kStride * ((halfInput ? 2 : 4) + 2);
}

int64_t gemmTensorCoreColumnTiles(const std::vector<int64_t> &segmentRows,
                                  bool gated) {
  if (gated)
    return (segmentRows.front() + 63) / 64;
  int64_t tiles = 0;
  for (int64_t rows : segmentRows)
    tiles += (rows + 127) / 128;
  return tiles;
}

GemvRing gemvTensorCoreRing(int64_t mats, int64_t tilesPerBlock,
                            int64_t tokenGroups) {
  GemvRing ring;
  const int64_t pieces = 4 / (mats * tilesPerBlock); // chunks of 8 pieces
  ring.unroll = std::max<int64_t>(1, pieces / tokenGroups);
  ring.stages = 1 + (kGemvTensorCoreStages - 1) * pieces / ring.unroll;
  return ring;
}

int64_t gemvTensorCoreLaunchBytes(int64_t mats, int64_t tilesPerBlock,
                                  int64_t tokenGroups, int64_t quantGroups) {
  int64_t bytes = 0;
  for (int64_t groups : {int64_t{1}, tokenGroups}) {
    const GemvRing ring = gemvTensorCoreRing(mats, tilesPerBlock, groups);
    bytes = std::max(
        bytes, quantGroups
                   ? gemvQuantSharedBytes(mats, tilesPerBlock, ring.unroll,
                                          ring.stages, quantGroups)
                   : gemvTensorCoreSharedBytes(mats, tilesPerBlock, ring.unroll,
                                               ring.stages));
  }
  return bytes;
}

int64_t gemvQuantSharedBytes(int64_t mats, int64_t tilesPerBlock,
                             int64_t unroll, int64_t stages, int64_t groups) {
  const int64_t table = (2 * mats * tilesPerBlock * 16 * groups + 15) / 16 * 16;
  return gemvTensorCoreSharedBytes(mats, tilesPerBlock, unroll, stages) +
         2 * table;
}

bool quantGemvOnTensorCores(int64_t bits, int64_t group, int64_t k,
                            bool gated) {
  if (bits != 8 && bits != 4)
    return false;
  // A chunk lies in one group, and the per-block scale table fits beside
  // the ring at two tiles a block.
  const int64_t mats = gated ? 2 : 1;
  return group % quantChunkInputs(bits) == 0 &&
         gemvQuantSharedBytes(mats, 2, std::max<int64_t>(1, 2 / mats),
                              kGemvTensorCoreStages,
                              (k + group - 1) / group) <= kMaxSharedBytes;
}

bool quantGemvReadsHalfOperands(int64_t bits, int64_t group, int64_t k) {
  // Interleaved rows (PlanQuant.cpp) are whole chunks; a gated pair's
  // shared memory bounds every other reader's.
  return k % quantChunkInputs(bits) == 0 &&
         quantGemvOnTensorCores(bits, group, k, /*gated=*/true);
}

bool decodeGemvOnTensorCores(bool tensorCores, DType weightType, int64_t k) {
  return tensorCores && weightType != DType::F32 && k % 8 == 0;
}

std::string checkInterleavedRows(int64_t bits, int64_t group, int64_t k) {
  const int64_t chunk = quantChunkInputs(bits);
  if (k % chunk != 0)
    return "rows of " + std::to_string(k) + " inputs are not whole chunks of " +
           std::to_string(chunk) + " int" + std::to_string(bits) + " levels";
  if (group % chunk != 0)
    return "groups of " + std::to_string(group) +
           " inputs are not whole chunks of " + std::to_string(chunk) + " int" +
           std::to_string(bits) + " levels";
  return "";
}

bool interleaveQuantRows(bool tensorCores, DType weightType, int64_t bits,
                         int64_t group, int64_t k) {
  return tensorCores && weightType != DType::F32 &&
         checkInterleavedRows(bits, group, k).empty();
}

namespace {

bool isTensorCoreGemv(KernelKind kernel) {
  return kernel == KernelKind::GemvTensorCore ||
         kernel == KernelKind::GemvQuantTensorCore;
}

/// Why unquantized weights of this shape cannot use tensor cores (empty
/// when they can).
std::string whyNoTensorCores(const LinearShape &shape) {
  if (!shape.tensorCores)
    return "the target has no mma.sync (before sm_80)";
  if (shape.weightType == DType::F32)
    return "fp32 weights";
  if (shape.k % 8 != 0)
    return "K = " + std::to_string(shape.k) + " is not a multiple of 8";
  return "";
}

int64_t mats(const LinearShape &shape) { return shape.gated ? 2 : 1; }

int64_t quantGroups(const LinearShape &shape) {
  return (shape.k + shape.quantGroup - 1) / shape.quantGroup;
}

/// 16-row tiles of the tensor-core GEMV: a gated pair's tiles hold both
/// projections' rows.
int64_t tensorCoreTiles(const LinearShape &shape) {
  auto tiles = [](int64_t rows) { return (rows + 15) / 16; };
  if (shape.gated)
    return tiles(shape.segmentRows.front());
  int64_t total = 0;
  for (int64_t rows : shape.segmentRows)
    total += tiles(rows);
  return total;
}

bool tilesFit(const LinearShape &shape, int64_t tiles,
              int64_t tokenGroups = 1) {
  const int64_t m = mats(shape);
  if (m * tiles > 4)
    return false;
  return gemvTensorCoreLaunchBytes(m, tiles, tokenGroups,
                                   shape.decode && shape.quantBits
                                       ? quantGroups(shape)
                                       : 0) <= kMaxSharedBytes;
}

std::string weightsPhrase(const LinearShape &shape) {
  if (shape.quantBits)
    return "int" + std::to_string(shape.quantBits) + " weights in groups of " +
           std::to_string(shape.quantGroup);
  return std::string(shape.weightType == DType::F32    ? "fp32"
                     : shape.weightType == DType::BF16 ? "bf16"
                                                       : "fp16") +
         " weights";
}

/// K steps of the tensor-core GEMM (32 inputs each).
int64_t gemmSteps(const LinearShape &shape) { return (shape.k + 31) / 32; }

/// The most ways the tensor-core GEMM splits K. A step of one token tile
/// runs as many blocks as column tiles: a 4096-wide output has 32, which
/// leave most of an H100's 132 SMs idle while each streams a long row of
/// K (measured: about 25 ms for the 8B shape's linear layers at up to 128
/// tokens, against 7 ms for the decode GEMVs). Split so that one token
/// tile gives two blocks an SM of a 132-SM GPU (the launch asks again for
/// the GPU it runs on and the tokens of the step), each split keeping at
/// least 8 steps of K for its copy ring.
void chooseGemmKSplits(const LinearShape &shape, LinearKernelChoice &choice) {
  // An H100's or H200's 132 SMs (the launch asks the GPU it runs on).
  constexpr int64_t kBlocksWanted = kGemmTensorCoreBlocksPerSM * 132;
  constexpr int64_t kMinStepsPerSplit = 8;
  const int64_t columnTiles =
      gemmTensorCoreColumnTiles(shape.segmentRows, shape.gated);
  const int64_t steps = gemmSteps(shape);
  if (shape.kSplitsAsked) {
    choice.kSplits = std::min(shape.kSplitsAsked, steps);
    if (choice.kSplits > 1)
      choice.reason += "; K split up to " + std::to_string(choice.kSplits) +
                       " ways (--gemm-k-splits)";
    return;
  }
  if (columnTiles >= kBlocksWanted)
    return;
  choice.kSplits = std::min({kernel::KernelDialect::kMaxKSplits,
                             (kBlocksWanted + columnTiles - 1) / columnTiles,
                             steps / kMinStepsPerSplit});
  if (choice.kSplits <= 1) {
    choice.kSplits = 1;
    return;
  }
  choice.reason += "; K split up to " + std::to_string(choice.kSplits) +
                   " ways for steps of few tokens (" +
                   std::to_string(columnTiles) + " column tiles)";
}

} // namespace

LinearKernelChoice selectLinearKernel(const LinearShape &shape) {
  LinearKernelChoice choice;
  if (!shape.decode) {
    std::string why = whyNoTensorCores(shape);
    choice.kernel = why.empty() ? KernelKind::GemmTensorCore : KernelKind::Gemm;
    choice.reason =
        "prefill, " + weightsPhrase(shape) +
        (shape.quantBits ? " (dequantized for the GEMM)" : "") +
        (why.empty() ? ": tensor cores" : ": no tensor cores, " + why);
    if (why.empty())
      chooseGemmKSplits(shape, choice);
    return choice;
  }
  const bool quantized = shape.quantBits != 0;
  std::string why = whyNoTensorCores(shape);
  if (why.empty() && quantized &&
      !quantGemvOnTensorCores(shape.quantBits, shape.quantGroup, shape.k,
                              shape.gated)) {
    const int64_t chunk = quantChunkInputs(shape.quantBits);
    why = shape.quantGroup % chunk != 0
              ? "groups of " + std::to_string(shape.quantGroup) +
                    " are not whole chunks of " + std::to_string(chunk) +
                    " levels"
              : "the scales of " + std::to_string(quantGroups(shape)) +
                    " groups a row do not fit in shared memory";
  }
  const bool tensorCores = why.empty();
  choice.kernel =
      quantized ? (tensorCores ? KernelKind::GemvQuantTensorCore
                               : KernelKind::GemvQuant)
                : (tensorCores ? KernelKind::GemvTensorCore : KernelKind::Gemv);
  choice.reason =
      std::string(shape.gatherLast      ? "LM head"
                  : shape.fewRowPrefill ? "few-row prefill"
                                        : "decode") +
      ", " + weightsPhrase(shape) +
      (tensorCores ? ": tensor cores" : ": no tensor cores, " + why);
  if (!tensorCores)
    return choice;
  // Two tiles per block only when there are plenty of blocks either way
  // (the LM head): each block reads x once, so fewer, larger blocks read
  // less of it.
  constexpr int64_t kManyBlocks = 4 * 2 * 132;
  const int64_t tiles = tensorCoreTiles(shape);
  if (!shape.gated && tiles >= 2 * kManyBlocks) {
    choice.tiles = 2;
    choice.reason += "; 2 tiles per block (" + std::to_string(tiles) +
                     " tiles: plenty of blocks either way)";
  }
  // Quantized GEMVs other than the LM head: the tiles asked for, at most
  // 4 / mats (a step's copies stay 8 pieces a lane) and what fits.
  if (quantized && !shape.gatherLast)
    for (int64_t asked =
             std::min<int64_t>(shape.quantTilesAsked, 4 / mats(shape));
         asked > 1; asked /= 2)
      if (tilesFit(shape, asked)) {
        choice.tiles = asked;
        choice.reason += "; " + std::to_string(asked) +
                         " tiles per block (--gemv-quant-tiles)";
        break;
      }
  // A pass over the weights multiplies each group of 8 tokens: a step of
  // more tokens reads every weight once instead of once per 8.
  const int64_t groups =
      shape.tokenGroupsAsked
          ? shape.tokenGroupsAsked
          : std::min<int64_t>(kernel::KernelDialect::kMaxTokenGroups,
                              (shape.maxTokens + 7) / 8);
  if (!quantized && groups > 1 && tilesFit(shape, choice.tiles, groups)) {
    choice.tokenGroups = groups;
    choice.reason +=
        "; " + std::to_string(groups) +
        " groups of 8 tokens per pass over the weights (" +
        (shape.tokenGroupsAsked
             ? std::string("--gemv-token-groups")
             : "up to " + std::to_string(shape.maxTokens) + " tokens a step") +
        ")";
  }
  return choice;
}

std::string checkLinearKernel(const LinearShape &shape, KernelKind kernel,
                              int64_t tiles, int64_t tokenGroups,
                              int64_t kSplits) {
  const std::string name = kernel::stringifyKernelKind(kernel).str();
  const bool gemm =
      kernel == KernelKind::Gemm || kernel == KernelKind::GemmTensorCore;
  if (shape.decode && gemm)
    return name + " is a prefill GEMM; a decode step, a few-row prefill and "
                  "the LM head run GEMVs";
  if (!shape.decode && !gemm)
    return name + " is a GEMV; prefill runs the tiled GEMM";
  const bool quantKernel = kernel == KernelKind::GemvQuant ||
                           kernel == KernelKind::GemvQuantTensorCore;
  if (shape.decode && quantKernel != (shape.quantBits != 0))
    return name + (quantKernel ? " reads int8/int4 levels, and the weights "
                                 "are not quantized"
                               : " cannot read quantized weights (" +
                                     weightsPhrase(shape) + ")");
  if (isTensorCoreGemv(kernel) || kernel == KernelKind::GemmTensorCore) {
    if (std::string why = whyNoTensorCores(shape); !why.empty())
      return name + " needs tensor cores: " + why;
    if (kernel == KernelKind::GemvQuantTensorCore &&
        !quantGemvOnTensorCores(shape.quantBits, shape.quantGroup, shape.k,
                                shape.gated))
      return name + " cannot take groups of " +
             std::to_string(shape.quantGroup) +
             " over K = " + std::to_string(shape.k);
  }
  if (tiles != 1 && (!isTensorCoreGemv(kernel) || !tilesFit(shape, tiles)))
    return std::to_string(tiles) + " tiles per block do not fit " + name +
           (shape.gated ? " over a gate/up pair" : "");
  if (tokenGroups != 1 && kernel != KernelKind::GemvTensorCore)
    return name + " multiplies 8 tokens per pass over the weights (" +
           std::to_string(tokenGroups) + " token groups asked)";
  if (tokenGroups != 1 && !tilesFit(shape, tiles, tokenGroups))
    return std::to_string(tokenGroups) + " token groups with " +
           std::to_string(tiles) + " tiles per block do not fit " + name;
  if (kSplits != 1 && kernel != KernelKind::GemmTensorCore)
    return name + " does not split K (k_splits = " + std::to_string(kSplits) +
           "; only gemm_tc does)";
  if (kSplits < 1 || kSplits > kernel::KernelDialect::kMaxKSplits)
    return "k_splits must be from 1 to " +
           std::to_string(kernel::KernelDialect::kMaxKSplits) + ", got " +
           std::to_string(kSplits);
  if (kSplits > gemmSteps(shape))
    return std::to_string(kSplits) +
           " splits of K = " + std::to_string(shape.k) +
           " leave some without a step of " + "32 inputs";
  return "";
}

} // namespace sits::codegen
