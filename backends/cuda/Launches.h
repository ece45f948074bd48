//===- Launches.h - One launch of each kernel family ------------*- C++ -*-===//
//
// Each function describes one launch of a kernel-library family: the
// specialized entry point (config constants, parameters) and the launch
// (grid, block, shared memory, argument bindings). The planner decides what
// to launch; these functions know how each family is launched. The launch
// configurations here and the kernels in kernels/*.cuh change together.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_LAUNCHES_H
#define SITS_BACKENDS_CUDA_LAUNCHES_H

#include "backends/cuda/Plan.h"
#include "dialects/kernel/KernelDialect.h"

#include <optional>

namespace sits::codegen {

/// A kernel and its launch, before the kernel is deduplicated.
struct PlannedLaunch {
  KernelSpec spec;
  LaunchPlan launch;
};

/// Largest dynamic shared memory a kernel may ask for (H100/H200 allow
/// 227 KiB per block; the format's validator allows the same).
constexpr int64_t kMaxSharedBytes = 227 * 1024;

//===- The one-kernel launches' block size (RowKernels.cpp) --------------===//

/// Elements per 16-byte load when rows of `width` elements of `type` stay
/// 16-byte aligned; otherwise 1 (scalar loads).
int64_t vectorWidth(int64_t width, format::DType type);

/// The block size a one-kernel launch (embedding, norms, RoPE, the append,
/// elementwise) takes when the IR does not say (--kernel-configure-launches
/// records it): whole warps of about a row's elements each for the kernels
/// with a block per row of `width` elements (the embedding's in 16-byte
/// pieces), 256 for the elementwise kernels.
struct RowKernelChoice {
  int64_t threads = 0;
  std::string reason;
};
RowKernelChoice selectRowThreads(kernel::KernelKind kernel, int64_t width);

//===- Embedding, norms ---------------------------------------------------===//

struct EmbeddingLaunch {
  int64_t vocab = 0, hidden = 0;
  int64_t threads = 0; ///< the block (its #kernel.config)
  float scale = 1.0f;
  format::DType weightType = format::DType::F32;
  unsigned table = 0; ///< weight index
  ArgBinding out;
};
PlannedLaunch planEmbedding(const EmbeddingLaunch &desc);

struct NormLaunch {
  bool isLayerNorm = false;
  int64_t hidden = 0;
  int64_t threads = 0; ///< the block (its #kernel.config)
  float epsilon = 0.0f;
  float weightOffset = 0.0f; ///< RMSNorm
  /// RMSNorm writing the operands of quantized GEMVs of these level bits
  /// (common.cuh's operandHalfIndex) in `operandType`; 0: f32 rows.
  int operandBits = 0;
  format::DType operandType = format::DType::F16;
  ArgBinding input;
  unsigned weight = 0;
  std::optional<unsigned> bias; ///< LayerNorm
  ArgBinding out;
};
PlannedLaunch planNorm(const NormLaunch &desc);

//===- Linear layers and the LM head --------------------------------------===//

enum class LinearEpilogue { Plain = 0, Residual = 1, Glu = 2 };

struct LinearSegment {
  unsigned weight = 0; ///< the matrix, or its int8/int4 data when quantized
  std::optional<unsigned> bias;
  int64_t rows = 0;
  ArgBinding out; ///< unused for the second (up) segment of a GLU
  /// Quantized weights: the f16 scales [rows, groups].
  std::optional<unsigned> scales;
  /// Where the matrix is instead of `weight` (prefill: dequantized into
  /// the workspace).
  std::optional<ArgBinding> weightArg;
};

/// Weights read through sits.dequantize (bits 0: not quantized): data
/// [rows, rowBytes] of int8 or packed int4 levels, f16 scales per group of
/// `group` inputs.
struct LinearQuant {
  int bits = 0;
  int64_t group = 0;
  int64_t rowBytes = 0;
  /// The levels are stored with interleaved chunks (QuantLayout.h).
  bool interleaved = false;
  int64_t groups(int64_t k) const { return (k + group - 1) / group; }
};

struct LinearLaunch {
  bool decode = false;      ///< GEMV (decode, LM head) or tiled GEMM
  bool gatherLast = false;  ///< LM head: each sequence's last new token
  bool tensorCores = false; ///< the target has mma.sync for f16/bf16 (sm_80+)
  int64_t k = 0;
  format::DType weightType = format::DType::F32;
  std::vector<LinearSegment> segments; ///< 1..4; exactly 2 for Glu
  LinearEpilogue epilogue = LinearEpilogue::Plain;
  int activation = 0; ///< Glu: sits::Activation
  ArgBinding input;
  std::optional<ArgBinding> residual;
  /// Decode GEMVs read quantized weights directly (gemv_quant.cuh); the
  /// prefill GEMM reads them dequantized (planDequantize), so bits is 0.
  LinearQuant quant;
  /// Nonzero: the input is f16 (bf16) operand rows (common.cuh's
  /// operandHalfIndex) in the order of weights of these bits, written by an
  /// rms_norm (NormLaunch::operandBits) or a gate/up GEMV
  /// (outputOperandBits): read by the 16-bit tensor-core GEMV (16) and the
  /// quantized one over interleaved rows (8, 4; quantGemvReadsHalfOperands).
  int inputOperandBits = 0;
  bool halfInput() const { return inputOperandBits != 0; }
  /// Glu on tensor cores: act(gate) * up goes out as the f16 (bf16) operand
  /// rows of the tensor-core GEMVs over weights of these bits that read it
  /// (16, 8 or 4); 0: f32.
  int outputOperandBits = 0;
  /// The kernel and its 16-row tiles per block, as the launch's
  /// #kernel.config says (selectLinearKernel chose them).
  kernel::KernelKind kernel = kernel::KernelKind::Gemv;
  int64_t tiles = 1;
  /// gemv_tc: groups of 8 tokens multiplied per pass over the weights.
  int64_t tokenGroups = 1;
  /// gemm_tc: the most ways K is split (1: never), with the partial sums
  /// (gemmSplitPartialBytes) and the engine's counters when more than 1.
  int64_t kSplits = 1;
  ArgBinding partial, counters;
  /// The rms_norm that produces `input` (whose input `input` then is),
  /// fused into the GEMV's load of x: decode GEMVs on tensor cores only
  /// (decodeGemvOnTensorCores).
  struct NormPrologue {
    unsigned weight = 0; ///< weight index of the norm's f32 weight [k]
    float epsilon = 0.0f, weightOffset = 0.0f;
  };
  std::optional<NormPrologue> norm;
};
PlannedLaunch planLinear(const LinearLaunch &desc);

//===- Choosing a linear layer's kernel (LinearKernels.cpp) ---------------===//

/// What decides the kernel of one linear launch, all read off the IR.
struct LinearShape {
  /// GEMVs: @decode's and @prefill_few's linear layers, every LM head.
  bool decode = false;
  bool fewRowPrefill = false; ///< of @prefill_few (for the reason)
  bool gatherLast = false;    ///< the LM head
  bool gated = false;         ///< a gate/up pair with its GLU epilogue
  bool tensorCores = false;   ///< the target has mma.sync (sm_80+)
  format::DType weightType = format::DType::F16;
  int64_t k = 0;
  std::vector<int64_t> segmentRows; ///< output rows of each weight
  int quantBits = 0;                ///< int8/int4 levels (0: none)
  int64_t quantGroup = 0;
  int64_t quantTilesAsked = 1; ///< --gemv-quant-tiles
  /// The most rows a GEMV multiplies in one step (max_batch: a decode
  /// step's tokens, the LM head's sequences); 0 when unknown.
  int64_t maxTokens = 0;
  /// --gemv-token-groups (0: as many as maxTokens needs).
  int64_t tokenGroupsAsked = 0;
  /// --gemm-k-splits (0: chosen by the column tiles).
  int64_t kSplitsAsked = 0;
};

/// The kernel, its tiles per block, and why (for the audit).
struct LinearKernelChoice {
  kernel::KernelKind kernel = kernel::KernelKind::Gemv;
  int64_t tiles = 1;
  int64_t tokenGroups = 1;
  int64_t kSplits = 1;
  std::string reason;
};

/// The fastest kernel that can run `shape`: tensor cores where the weights,
/// K and the target allow, the quantized GEMV for int8/int4 decode weights
/// (prefill dequantizes them for the GEMM), more tiles per block where
/// that reads the input fewer times and fits in shared memory.
LinearKernelChoice selectLinearKernel(const LinearShape &shape);

/// Why `kernel` with `tiles`, `tokenGroups` and `kSplits` cannot run `shape`
/// (empty when it can).
std::string checkLinearKernel(const LinearShape &shape,
                              kernel::KernelKind kernel, int64_t tiles,
                              int64_t tokenGroups, int64_t kSplits = 1);

/// Whether a decode linear with unquantized weights of this type and input
/// width can run on tensor cores (gemv.cuh's gemvTensorCore).
bool decodeGemvOnTensorCores(bool tensorCores, format::DType weightType,
                             int64_t k);
/// Inputs of one chunk of the quantized tensor-core GEMV (4 lanes' 16-byte
/// pieces): 64 int8 or 128 int4 levels.
inline int64_t quantChunkInputs(int64_t bits) { return bits == 8 ? 64 : 128; }
/// Whether a decode linear over `bits`-bit levels in groups of `group`
/// with K inputs (a gate/up pair when `gated`) can run on tensor cores
/// (gemv_quant.cuh's gemvQuantTensorCore), given decodeGemvOnTensorCores.
bool quantGemvOnTensorCores(int64_t bits, int64_t group, int64_t k, bool gated);
/// Whether every decode GEMV over such levels (gated or not) reads
/// interleaved rows on tensor cores, and so can take its input as f16
/// (bf16) operands (tensor cores and a 16-bit engine are the caller's to
/// check).
bool quantGemvReadsHalfOperands(int64_t bits, int64_t group, int64_t k);

/// Whether the rows of a quantized weight [rows, k] in groups of `group`
/// are stored interleaved (QuantLayout.h) for the tensor-core GEMV: on
/// sm_80+ in a 16-bit engine, for rows and groups of whole chunks.
bool interleaveQuantRows(bool tensorCores, format::DType weightType,
                         int64_t bits, int64_t group, int64_t k);
/// Why rows of such a weight cannot be stored interleaved (empty when they
/// can).
std::string checkInterleavedRows(int64_t bits, int64_t group, int64_t k);

/// The prefill tensor-core GEMM (gemm.cuh's gemmTensorCore): its threads
/// (kTcGemmThreads) and the stages of its cp.async ring, two blocks of
/// which fit an SM's shared memory.
constexpr int64_t kGemmTensorCoreThreads = 128;
constexpr int64_t kGemmTensorCoreStages = 3;
/// Its blocks resident per SM (8 warps to hide latency), which a split over
/// K aims to fill.
constexpr int64_t kGemmTensorCoreBlocksPerSM = 2;
/// gemm.cuh's gemmTensorCoreSharedBytes: f32 input rows, or (halfInput)
/// 16-bit operand rows.
int64_t gemmTensorCoreSharedBytes(int64_t stages, bool halfInput);
/// Its column tiles: 128 output rows, or 64 gate and 64 up rows with a GLU.
int64_t gemmTensorCoreColumnTiles(const std::vector<int64_t> &segmentRows,
                                  bool gated);
/// The partial sums of a launch split up to `kSplits` ways over
/// `columnTiles`: at most kSplits slabs of one 128-token tile (a launch
/// splits less the more token tiles it has: Launches.cpp), as floats.
inline int64_t gemmSplitPartialBytes(int64_t kSplits, int64_t columnTiles) {
  return kSplits * 128 * columnTiles * 128 * 4;
}

/// cp.async stages of the tensor-core GEMVs' rings (one token group).
constexpr int64_t kGemvTensorCoreStages = 3;
/// A tensor-core GEMV's ring: the chunks of K a warp copies per step
/// (kUnroll) and the steps it holds (kStages). A lane keeps 16 pieces of
/// 16 bytes in flight, two steps of 8; with more token groups, whose
/// inputs for a step's chunks share the registers, a step has fewer
/// chunks and the ring more steps.
struct GemvRing {
  int64_t unroll = 1, stages = kGemvTensorCoreStages;
};
GemvRing gemvTensorCoreRing(int64_t mats, int64_t tilesPerBlock,
                            int64_t tokenGroups);
/// The dynamic shared memory of a tensor-core GEMV launch: the larger of
/// its rings (one group, and `tokenGroups` when more; the kernel takes the
/// one-group ring for steps of at most 8 tokens) with the partial sums, and
/// with `quantGroups` (gemv_quant) the scale tables.
int64_t gemvTensorCoreLaunchBytes(int64_t mats, int64_t tilesPerBlock,
                                  int64_t tokenGroups, int64_t quantGroups);
/// gemv.cuh's gemvTensorCoreSharedBytes.
int64_t gemvTensorCoreSharedBytes(int64_t mats, int64_t tilesPerBlock,
                                  int64_t unroll, int64_t stages);
/// gemv_quant.cuh's gemvQuantTensorCoreSharedBytes.
int64_t gemvQuantSharedBytes(int64_t mats, int64_t tilesPerBlock,
                             int64_t unroll, int64_t stages, int64_t groups);

/// Dequantizes a whole weight [rows, k] into `out` in `weightType`, the
/// layout of a stored weight (gemv_quant.cuh's dequantize).
struct DequantizeLaunch {
  LinearQuant quant;
  int64_t rows = 0, k = 0;
  format::DType weightType = format::DType::F16;
  unsigned data = 0, scales = 0; ///< weight indices
  ArgBinding out;
};
PlannedLaunch planDequantize(const DequantizeLaunch &desc);

//===- RoPE, KV cache, attention ------------------------------------------===//

struct RopeConfig {
  int64_t heads = 0, headDim = 0, rotaryDim = 0, tableRows = 0;
  bool interleaved = false;
  unsigned table = 0; ///< weight index
};

struct RopeLaunch {
  RopeConfig rope;
  int64_t threads = 0; ///< the block (its #kernel.config)
  ArgBinding input, out;
};
PlannedLaunch planRope(const RopeLaunch &desc);

/// A paged KV cache as its kernels address it (KVRows in common.cuh);
/// blockTokens 0: the contiguous layout.
struct KVPaging {
  int64_t blockTokens = 0;
  int64_t maxBlocks = 0; ///< blocks a sequence of the capacity spans
  int64_t blocks = 0;    ///< in the pool (each layer's slice)
  bool operator==(const KVPaging &other) const {
    return blockTokens == other.blockTokens && maxBlocks == other.maxBlocks &&
           blocks == other.blocks;
  }
};

class LaunchBuilder;
/// A paged cache's constants (kBlockTokens, kMaxBlocks) and block table
/// parameter (nothing for a contiguous one, whose kernels stay as they
/// were); returns the argument the kernel's call appends.
std::string addPaging(LaunchBuilder &b, const KVPaging &paging);
/// `call` with the block table argument `paged` before its closing
/// parenthesis.
std::string withPaging(std::string call, const std::string &paged);

struct AppendLaunch {
  int64_t layer = 0, kvHeads = 0, headDim = 0, capacity = 0;
  KVPaging paging;
  int64_t threads = 0; ///< the block (its #kernel.config)
  int64_t hotRows = 0; ///< a quantized cache's hot ring rows (0: none)
  format::DType cacheType = format::DType::F16;
  uint64_t layerByteOffset = 0;
  ArgBinding key, value;
  std::optional<RopeConfig> keyRope;
  std::optional<RopeConfig> queryRope;
  ArgBinding query, queryOut; ///< with queryRope
};
PlannedLaunch planAppend(const AppendLaunch &desc);

struct AttentionLaunch {
  bool decode = false;
  int64_t layer = 0, heads = 0, kvHeads = 0, headDim = 0, capacity = 0;
  KVPaging paging;
  format::DType cacheType = format::DType::F16;
  uint64_t layerByteOffset = 0;
  float scale = 1.0f;
  float softcap = 0.0f;
  int64_t window = 0;
  bool tensorCores = false; ///< sm_80+: cp.async for the split decode kernel
  /// The engine computes in 16 bits (f16/bf16 weights and cache): attention
  /// may round its queries and probabilities to the cache's type, as the
  /// tensor-core kernels do. An f32 engine keeps f32 products.
  bool sixteenBitMath = false;
  /// Keys per block of the split decode kernels (the launch's
  /// #kernel.config, or --decode-split-keys when choosing it); 0:
  /// decodeSplitOf's own choice.
  int64_t splitKeys = 0;
  /// The kernel, as the launch's #kernel.config says
  /// (selectAttentionKernel chose it).
  kernel::KernelKind kernel = kernel::KernelKind::Attention;
  ArgBinding query, out;
  /// Split decode (attention_decode.cuh): partial results and counters.
  std::optional<ArgBinding> partial;
  ArgBinding counters;
};

/// How split-K decode attention divides a sequence's keys.
struct DecodeSplit {
  int64_t splitKeys = 0;    ///< keys per block
  int64_t splits = 0;       ///< blocks per (sequence, KV head)
  int64_t partialWidth = 0; ///< floats of partial results per sequence
};
/// The split of `desc` when the split decode kernel handles it (2-byte
/// cache, head_dim a power of two from 8 to 256, at most 8 query heads per
/// KV head, sm_80+); otherwise the one-block-per-head kernel runs.
std::optional<DecodeSplit> decodeSplitOf(const AttentionLaunch &desc);

/// attention_decode.cuh's combineSharedBytes: the shared memory of the
/// split decode kernels' combine, for blocks of `threads`.
int64_t decodeCombineSharedBytes(int64_t threads, int64_t group,
                                 int64_t headDim);

/// attention_decode.cuh's attentionDecodeSharedBytes: the split-K decode
/// kernels' dynamic shared memory (128 threads).
int64_t attentionDecodeSharedBytes(int64_t headDim, int64_t group,
                                   int64_t unroll, int64_t stages);

/// Whether the tensor-core prefill kernel (attention_prefill.cuh) takes
/// `desc`: a 16-bit cache, head_dim a multiple of 16 up to 128, sm_80+.
bool flashPrefillFits(const AttentionLaunch &desc);

/// The launch of `desc.kernel` over a plain cache. Fails (with the reason
/// in `error`) when no tile fits in shared memory.
std::optional<PlannedLaunch> planAttention(const AttentionLaunch &desc,
                                           std::string *error);

//===- Choosing attention's kernel (AttentionKernels.cpp) -----------------===//

/// The kernel, its keys per block when split, and why (for the audit).
struct AttentionKernelChoice {
  kernel::KernelKind kernel = kernel::KernelKind::Attention;
  int64_t splitKeys = 0;
  std::string reason;
};

/// The kernel for attention of `desc`'s shape (its `splitKeys` is what
/// --decode-split-keys asks) over a cache of `kv` (quantized when
/// kv.coldBits is set): at decode the split kernels where they take the
/// shape, the tensor-core one over a quantized cache where it fits; at
/// prefill the tensor-core kernel where it takes the shape; the tiled
/// kernels otherwise.
AttentionKernelChoice selectAttentionKernel(const AttentionLaunch &desc,
                                            const format::KVCacheConfig &kv);

/// Why `kernel` with `splitKeys` keys a split cannot run attention of
/// `desc` over `kv` (empty when it can).
std::string checkAttentionKernel(const AttentionLaunch &desc,
                                 const format::KVCacheConfig &kv,
                                 kernel::KernelKind kernel, int64_t splitKeys);

//===- Elementwise --------------------------------------------------------===//

enum class ElementwiseKind { Add, Activation, Glu };

struct ElementwiseLaunch {
  ElementwiseKind kind = ElementwiseKind::Add;
  int64_t width = 0;
  int64_t threads = 0; ///< the block (its #kernel.config)
  int activation = 0;
  ArgBinding lhs, rhs, out; ///< rhs unused for Activation
};
PlannedLaunch planElementwise(const ElementwiseLaunch &desc);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_LAUNCHES_H
