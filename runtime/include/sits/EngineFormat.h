//===- EngineFormat.h - The .sits engine file format -----------*- C++ -*-===//
//
// The contract between the compiler's code generator (which writes engines)
// and the runtime (which loads them). Plain C++17: no CUDA, no MLIR, so both
// sides include it. docs/engine-format.md describes the bytes on disk; this
// header describes the in-memory form that the writer takes and the reader
// returns, and the rules that `validateEngine` enforces.
//
// Functions here never throw for bad input: they return false and set
// `*error` to one sentence naming the cause.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_ENGINEFORMAT_H
#define SITS_RUNTIME_ENGINEFORMAT_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sits {
namespace format {

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

/// First bytes of every engine file. The high first byte and the CR LF / ^Z
/// catch text-mode transfers, as PNG's signature does.
constexpr std::array<uint8_t, 8> kMagic = {0x89, 'S',  'I',  'T',
                                           'S',  '\r', '\n', 0x1a};
/// A reader accepts a file of the same major version and a minor version not
/// newer than its own. Minor versions only add optional content.
constexpr uint16_t kFormatMajor = 1;
constexpr uint16_t kFormatMinor = 3;
/// The minor version an engine with a paged KV cache (format 1.2) is written
/// with; other engines keep 1.1, so that their bytes do not change.
constexpr uint16_t kPagedKVCacheMinor = 2;
/// The minor version of an engine with a persistent decode section (1.3).
constexpr uint16_t kPersistentDecodeMinor = 3;

constexpr uint64_t kHeaderBytes = 128;
constexpr uint64_t kSectionEntryBytes = 32;
/// Every section starts at a multiple of this (page-aligned, so the weights
/// can be mapped and copied to the GPU without re-alignment).
constexpr uint64_t kSectionAlignment = 4096;
/// Every weight inside the weights section starts at a multiple of this.
constexpr uint64_t kWeightAlignment = 256;
/// The content hash is a SHA-256 over the SHA-256 digests of chunks of this
/// size, so that large engines verify in parallel.
constexpr uint64_t kHashChunkBytes = 16ull << 20;
/// Byte range of the content-hash field in the header; it reads as zeros
/// while the hash is computed.
constexpr uint64_t kContentHashOffset = 80;
constexpr uint64_t kHashBytes = 32;

/// Limits that keep a hostile file from making the reader allocate or loop
/// without bound. A real engine is far below each of them.
constexpr uint32_t kMaxSections = 64;
constexpr uint32_t kMaxModules = 4096;
constexpr uint32_t kMaxKernels = 65536;
constexpr uint32_t kMaxBuffers = 1u << 20;
constexpr uint32_t kMaxPrograms = 16;
constexpr uint32_t kMaxLaunchesPerProgram = 1u << 20;
constexpr uint32_t kMaxArgsPerLaunch = 256;
constexpr uint32_t kMaxExprOps = 64;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxNameBytes = 4096;
/// The tokenizer section: at most this many files of at most this size
/// (Gemma's tokenizer.json, the largest in use, is about 33 MB).
constexpr uint32_t kMaxTokenizerFiles = 8;
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t(1) << 29;
/// The persistent decode section: buckets, and each bucket's argument table.
constexpr uint32_t kMaxPersistentBuckets = 64;
constexpr uint32_t kMaxPersistentArgBytes = 1u << 20;

using Hash = std::array<uint8_t, kHashBytes>;

//===----------------------------------------------------------------------===//
// Header and sections
//===----------------------------------------------------------------------===//

enum class SectionKind : uint32_t {
  Metadata = 1, ///< UTF-8 JSON: model config, I/O, KV cache, limits, options.
  Kernels = 2,  ///< Kernel images (cubin and/or PTX) and the kernel table.
  Plan = 3,     ///< Buffers and programs (ordered launches).
  Weights = 4,  ///< Raw weight bytes, each weight kWeightAlignment-aligned.
  /// Optional (format 1.1): the model's text files (tokenizer.json,
  /// tokenizer_config.json, ...), verbatim.
  Tokenizer = 5,
  /// Optional (format 1.3): per decode batch bucket, one persistent kernel
  /// that runs the decode program's launches as its tasks.
  PersistentDecode = 6,
};
const char *sectionKindName(uint32_t kind);

struct SectionEntry {
  uint32_t kind = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct Header {
  uint16_t formatMajor = kFormatMajor;
  uint16_t formatMinor = kFormatMinor;
  /// SM the kernel images were compiled for, as major*10+minor (90 = sm_90).
  uint32_t targetSm = 0;
  /// CUDA version of the compiler that built the images (13000 = 13.0).
  uint32_t cudaVersion = 0;
  uint32_t flags = 0;
  uint64_t fileBytes = 0;
  uint64_t sectionTableOffset = 0;
  Hash sourceModelHash{};
  Hash contentHash{};
  std::vector<SectionEntry> sections;
};

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  I32 = 3,
  I64 = 4,
  U8 = 5,
  /// Quantized weights (docs/quantization.md): int8 values, and int4 values
  /// two per byte (the even element in the low nibble); one byte per element
  /// of the stored shape [rows, row bytes].
  I8 = 6,
  I4X2 = 7
};
constexpr uint32_t kNumDTypes = 8;
const char *dtypeName(DType type);
/// Bytes of one element; 0 for a value outside the enum.
uint64_t dtypeBytes(DType type);
/// Parses "f32"/"fp32"/"float32", "f16"/"fp16", "bf16", "i32", "i64", "u8",
/// "i8", "i4x2".
bool parseDType(const std::string &text, DType *type);

/// IEEE binary16 and bfloat16 conversions, round to nearest even; NaN stays
/// NaN and overflow becomes infinity. Used by the compiler for `--dtype`.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

//===----------------------------------------------------------------------===//
// Launch-plan expressions
//===----------------------------------------------------------------------===//

/// Values a step is launched with. The code generator writes grid, block,
/// shared memory and scalar arguments as expressions of these, so one plan
/// serves every batch size and prompt length.
enum class Symbol : uint32_t {
  Batch = 0, ///< B: sequences in the step (a decode step: the graph bucket).
  Seq = 1,   ///< S: new tokens per sequence in the step (1 in decode).
  /// T: the step's token rows, B * S, or fewer in a packed step (the
  /// sum of step_lengths, when the engine has launch.packed_steps).
  Tokens = 2,
  /// M: the device's streaming multiprocessors, for the grids of kernels
  /// that loop over their work (a grid of a few blocks per SM).
  Multiprocessors = 3,
};
constexpr uint32_t kNumSymbols = 4;
/// The range of M a plan is validated at.
constexpr int64_t kMaxMultiprocessors = 1024;
const char *symbolName(uint32_t symbol);

enum class ExprOp : uint32_t {
  Const = 0,  ///< push `value`
  Symbol = 1, ///< push the symbol numbered `value`
  Add = 2,    ///< pop b, pop a, push a + b (likewise below)
  Sub = 3,
  Mul = 4,
  Div = 5,     ///< a / b rounded down (b > 0)
  CeilDiv = 6, ///< (a + b - 1) / b (b > 0)
  Min = 7,
  Max = 8,
};
constexpr uint32_t kNumExprOps = 9;

struct ExprTerm {
  ExprOp op = ExprOp::Const;
  int64_t value = 0;
};

/// An integer expression in postfix form. Evaluation is in int64 with every
/// step overflow-checked; a plan whose expression overflows or divides by
/// zero is rejected at load time (it is evaluated at the limits).
struct Expr {
  std::vector<ExprTerm> terms;

  static Expr constant(int64_t value);
  static Expr symbol(Symbol symbol);
  static Expr batch() { return symbol(Symbol::Batch); }
  static Expr seq() { return symbol(Symbol::Seq); }
  static Expr tokens() { return symbol(Symbol::Tokens); }
  static Expr multiprocessors() { return symbol(Symbol::Multiprocessors); }

  /// Readable infix form, for --inspect and error messages.
  std::string toString() const;
};
Expr operator+(const Expr &lhs, const Expr &rhs);
Expr operator-(const Expr &lhs, const Expr &rhs);
Expr operator*(const Expr &lhs, const Expr &rhs);
Expr floorDiv(const Expr &lhs, const Expr &rhs);
Expr ceilDiv(const Expr &lhs, const Expr &rhs);
Expr min(const Expr &lhs, const Expr &rhs);
Expr max(const Expr &lhs, const Expr &rhs);

using SymbolValues = std::array<int64_t, kNumSymbols>;
/// The symbols of a step of B sequences of S tokens on a device with
/// `multiprocessors` SMs.
SymbolValues makeSymbols(int64_t batch, int64_t seq, int64_t multiprocessors);
/// A packed step: B sequences of at most S tokens, T tokens in all.
SymbolValues makePackedSymbols(int64_t batch, int64_t seq, int64_t tokens,
                               int64_t multiprocessors);

/// Checks that `expr` is well formed (known ops and symbols, balanced stack,
/// at most kMaxExprOps terms).
bool checkExpr(const Expr &expr, std::string *error);
/// Evaluates a well-formed expression; false on overflow or division by zero.
bool evalExpr(const Expr &expr, const SymbolValues &symbols, int64_t *result,
              std::string *error);

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// One compiled translation unit: a cubin for `sm` and, optionally, its PTX
/// (the runtime JIT-compiles the PTX only when the cubin cannot run on the
/// device). At least one of the two is present.
struct ModuleImage {
  std::string name;
  uint32_t sm = 0;
  std::vector<uint8_t> cubin;
  std::string ptx;
};

/// A `__global__` function (extern "C" name) of a module.
struct KernelRef {
  uint32_t module = 0;
  std::string function;
};

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// What a buffer holds and who owns its contents. The runtime allocates
/// every buffer once, when a session is created, never during a step.
enum class BufferRole : uint32_t {
  /// Bytes [offset, offset + bytes) of the weights section, copied to the GPU
  /// once per engine and shared by sessions.
  Weight = 0,
  /// Intermediate values or scratch, `bytes` sized for the largest step
  /// (max_batch x max_prefill_tokens); zeroed at allocation.
  Activation = 1,
  /// The KV cache's key and value buffers; `bytes` equals the size the
  /// metadata's kv_cache config gives (layout in docs/engine-format.md).
  KeyCache = 2,
  ValueCache = 3,
  /// int32 [B, S]: the step's token ids, row-major, rows of length S.
  TokenIds = 4,
  /// int32 [max_batch]: tokens each sequence already holds in the KV cache
  /// (its past length, hence the position of its first new token).
  PastLengths = 5,
  /// int32 [max_batch]: new tokens of each sequence in this step (<= S;
  /// a shorter prompt in a batched prefill is padded on the right).
  StepLengths = 6,
  /// f32 [max_batch, vocab]: logits of each sequence's last new token.
  Logits = 7,
};
constexpr uint32_t kNumBufferRoles = 8;
const char *bufferRoleName(uint32_t role);

struct BufferDesc {
  std::string name;
  BufferRole role = BufferRole::Activation;
  DType dtype = DType::F32;
  /// Weight: offset in the weights section (kWeightAlignment-aligned).
  uint64_t offset = 0;
  uint64_t bytes = 0;
  /// Informative shape (at the maximum sizes); not used for allocation.
  std::vector<uint64_t> shape;
};

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

enum class ArgKind : uint32_t {
  /// Device address of `buffer` plus `offset` bytes (a pointer argument).
  BufferAddress = 0,
  /// `expr` evaluated for the step, passed as int32 (checked to fit).
  Int32 = 1,
  /// `expr` evaluated for the step, passed as int64.
  Int64 = 2,
  /// `f32` passed as a float.
  Float32 = 3,
};
constexpr uint32_t kNumArgKinds = 4;

struct LaunchArg {
  ArgKind kind = ArgKind::Int32;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  Expr expr;
  float f32 = 0.0f;

  static LaunchArg bufferAddress(uint32_t buffer, uint64_t offset = 0);
  static LaunchArg int32(Expr expr);
  static LaunchArg int64(Expr expr);
  static LaunchArg float32(float value);
};

struct Launch {
  uint32_t kernel = 0;
  std::array<Expr, 3> grid;
  std::array<Expr, 3> block;
  Expr sharedBytes;
  std::vector<LaunchArg> args;
};

/// Program names the runtime runs: `prefill` and `decode` are required;
/// `init` (optional) runs once after a session's buffers are allocated, with
/// B = max_batch and S = 1, e.g. to fill tables in activation buffers;
/// `prefill_few` (optional, with "launch.few_rows_max_tokens") runs the
/// prefill steps of at most that many tokens in place of `prefill`.
constexpr const char *kPrefillProgram = "prefill";
constexpr const char *kDecodeProgram = "decode";
constexpr const char *kFewRowPrefillProgram = "prefill_few";
constexpr const char *kInitProgram = "init";

struct Program {
  std::string name;
  std::vector<Launch> launches;
};

//===----------------------------------------------------------------------===//
// The persistent decode kernels (format 1.3, optional)
//===----------------------------------------------------------------------===//

/// A decode batch bucket's persistent kernel: `blocks` blocks of `threads`
/// threads, all resident at once, that run the decode program's launches as
/// tasks, launch t as task t (docs/codegen.md). Its one parameter is a
/// device table of `argBytes` bytes: launch t's arguments at
/// `argOffsets[t]`, laid out by getArgumentBlockLayout, evaluated for a
/// step of B = `batch` (S = 1, T = B) with M = the section's `blocks`.
struct PersistentBucket {
  uint32_t batch = 0;
  uint32_t kernel = 0; ///< index into EngineContents::kernels
  uint32_t threads = 0;
  uint32_t sharedBytes = 0; ///< dynamic shared memory of the launch
  uint32_t argBytes = 0;
  std::vector<uint32_t> argOffsets; ///< one per decode launch
};

struct PersistentDecode {
  /// Blocks of every bucket's kernel (the schedule's); 0: no section.
  uint32_t blocks = 0;
  std::vector<PersistentBucket> buckets; ///< by increasing batch
  bool empty() const { return blocks == 0; }
  /// The bucket of this batch, or nullptr.
  const PersistentBucket *find(uint32_t batch) const;
};

/// Argument blocks start at multiples of this in a bucket's table.
constexpr uint32_t kPersistentArgAlignment = 16;

/// Words (64-bit) of a tile's record in a persistent kernel's trace (sitsc
/// --persistent-trace): task << 32 | tile, then the times it was entered,
/// had its dependencies and was left. The generated source asserts that
/// the kernels' sits::kPersistentTraceWords is this.
constexpr uint32_t kPersistentTraceWords = 4;

/// Where a launch's arguments lie in its argument block: in order, each at
/// its natural alignment (pointers and int64 8 bytes, int32 and float32 4),
/// the size rounded up to the largest alignment: the struct the generated
/// kernel declares. Returns the block's size.
uint64_t getArgumentBlockLayout(const Launch &launch,
                                std::vector<uint32_t> *offsets);

//===----------------------------------------------------------------------===//
// Metadata the runtime relies on (parsed from the metadata JSON)
//===----------------------------------------------------------------------===//

struct KVCacheConfig {
  uint32_t layers = 0;
  uint32_t maxBatch = 0;
  uint32_t kvHeads = 0;
  uint32_t capacity = 0;
  uint32_t headDim = 0;
  DType dtype = DType::F16;
  std::string layout = "contiguous";
  /// A paged cache (layout "paged", format 1.2): each layer's buffer is a
  /// pool of `blocks` blocks of `blockTokens` rows, `[blocks, kv_heads,
  /// block_tokens, head_dim]`, and row r of sequence b lives in block
  /// `table[b * maxBlocksPerSeq() + r / blockTokens]` of the activation
  /// buffer named `blockTable` (int32 [max_batch, maxBlocksPerSeq()]),
  /// which the runtime writes. 0 for a contiguous cache.
  uint32_t blockTokens = 0;
  uint32_t blocks = 0;
  std::string blockTable;
  bool paged() const { return blockTokens != 0; }
  /// The block sizes a paged cache may have: a power of two from 16 to
  /// 1024 (the code generator and the validator share this rule).
  static bool validBlockTokens(uint64_t tokens) {
    return tokens >= 16 && tokens <= 1024 && (tokens & (tokens - 1)) == 0;
  }
  /// Blocks one sequence of the capacity spans (0 when not paged).
  uint32_t maxBlocksPerSeq() const {
    return blockTokens ? (capacity + blockTokens - 1) / blockTokens : 0;
  }
  /// A quantized cache (metadata "kv_cache.quant"; coldBits 0: none). Each
  /// buffer then holds, per layer, a hot ring of `hotRows` FP16/BF16 rows
  /// per (sequence, kv head), the int8/int4 cold rows and their f16 scales
  /// (docs/engine-format.md).
  uint32_t coldBits = 0;
  uint32_t hotWindow = 0;
  uint32_t hotRows = 0;
  uint32_t groupSize = 0;
  bool perChannelKeys = false;
  uint32_t channelBlock = 1;
  /// Byte offsets inside one layer's slice of a quantized buffer.
  struct QuantLayout {
    uint64_t hotBytes = 0;   ///< [max_batch, kv_heads, hot_rows, head_dim]
    uint64_t coldOffset = 0; ///< int8/int4 rows [.., capacity, rowBytes]
    uint64_t coldBytes = 0;
    uint64_t scaleOffset = 0; ///< f16 scales
    uint64_t scaleBytes = 0;
    uint64_t layerBytes = 0; ///< one layer's slice, 256-byte aligned
  };
  /// The layout of the key (`keys`) or value buffer; all zero when the
  /// sizes overflow.
  QuantLayout quantLayout(bool keys) const;
  /// Bytes of the key (`keys`) or value buffer, overflow-checked (0 when it
  /// overflows).
  uint64_t bufferBytes(bool keys = true) const;
  /// Bytes one more token of context takes, every layer, K and V: the
  /// element type's, or a quantized cache's cold values and scales
  /// (per-channel key scales spread over their block).
  double bytesPerToken() const;
};

/// What turns text into the engine's token ids: nothing (ids only), the
/// bytes of the text (a 256-token byte vocabulary), or the model's own
/// tokenizer files in the tokenizer section (metadata kind "huggingface").
enum class TokenizerKind { None, Bytes, HuggingFace };

struct RuntimeConfig {
  std::string modelName;
  uint32_t vocabSize = 0;
  uint32_t maxBatch = 0;
  uint32_t maxPrefillTokens = 0;
  uint32_t maxSeqLen = 0;
  KVCacheConfig kvCache;
  TokenizerKind tokenizer = TokenizerKind::None;
  std::vector<int32_t> eosTokenIds;
  std::vector<uint32_t> batchBuckets;
  /// Every kernel waits for the previous one itself, so that the runtime
  /// may launch them with programmatic dependent launch
  /// (metadata "launch.programmatic_dependent").
  bool programmaticLaunch = false;
  /// The programs take packed steps: sequence b's tokens in the rows right
  /// after b - 1's, no padding, T below B * S (metadata
  /// "launch.packed_steps"; kernels/common.cuh's StepRows).
  bool packedSteps = false;
  /// Prefill steps of at most this many token rows run the program
  /// `prefill_few` (metadata "launch.few_rows_max_tokens"); 0: none.
  uint32_t fewRowsMaxTokens = 0;
  /// Whether a prefill step of `rows` token rows runs `prefill_few`.
  bool isFewRowStep(uint64_t rows) const { return rows <= fewRowsMaxTokens; }
  /// The program a prefill step of `rows` token rows runs.
  const char *prefillProgramFor(uint64_t rows) const {
    return isFewRowStep(rows) ? kFewRowPrefillProgram : kPrefillProgram;
  }
};

/// The decode batch sizes an engine captures CUDA graphs for when its
/// metadata names none: 1, 2, 4, 8, then every multiple of 8 below
/// `maxBatch`, and `maxBatch`. The decode GEMV multiplies tokens in groups
/// of 8 (docs/codegen.md), so a step pads its batch by at most 7 rows: a
/// bucket of 64 for a batch of 32 would pass over the weights twice.
std::vector<uint32_t> getDefaultBatchBuckets(uint32_t maxBatch);

/// Reads the fields above from the metadata JSON and checks them against
/// each other (see docs/engine-format.md for the keys).
bool parseRuntimeConfig(const std::string &json, RuntimeConfig *config,
                        std::string *error);

//===----------------------------------------------------------------------===//
// Whole engines
//===----------------------------------------------------------------------===//

/// A named text file stored in the engine (the tokenizer section).
struct TextFile {
  std::string name;
  std::string content;
};

/// Everything an engine holds. The writer takes it; the reader fills it
/// (weights then point into the file's mapping rather than owning bytes).
struct EngineContents {
  /// The header's minor version: the oldest that has everything the engine
  /// uses (1.1, kPagedKVCacheMinor with a paged KV cache,
  /// kPersistentDecodeMinor with persistent decode kernels).
  uint16_t formatMinor = 1;
  uint32_t targetSm = 0;
  uint32_t cudaVersion = 0;
  Hash sourceModelHash{};
  std::string metadataJson;
  std::vector<ModuleImage> modules;
  std::vector<KernelRef> kernels;
  std::vector<BufferDesc> buffers;
  std::vector<Program> programs;
  /// The weights section. The writer reads `weightsData` if set (it need not
  /// be owned), else `weights`.
  std::vector<uint8_t> weights;
  const uint8_t *weightsData = nullptr;
  uint64_t weightsBytes = 0;

  const uint8_t *weightBytes() const {
    return weightsData ? weightsData : weights.data();
  }
  uint64_t weightSize() const {
    return weightsData ? weightsBytes : weights.size();
  }
  /// The tokenizer section's files (name, content); empty: no section.
  std::vector<TextFile> tokenizerFiles;
  /// The persistent decode section (format 1.3); empty: none.
  PersistentDecode persistentDecode;

  /// Index of the program with this name, or -1.
  int findProgram(const std::string &name) const;
  /// The tokenizer file of this name, or nullptr.
  const TextFile *findTokenizerFile(const std::string &name) const;
};

/// Fills `bucket`'s argument table (argBytes bytes, zero padding) from the
/// decode program's launches, evaluated for a step of the bucket with M =
/// the section's blocks; buffer b is at `addresses[b]` (device addresses,
/// fixed for a session). False with an error naming the task and argument
/// when a value does not fit its type. Contents must have been validated.
bool fillPersistentArguments(const EngineContents &contents,
                             const PersistentBucket &bucket,
                             const std::vector<uint64_t> &addresses,
                             std::vector<uint8_t> *table, std::string *error);

/// Appends tensors to a weights section at kWeightAlignment boundaries.
class WeightPacker {
public:
  /// Appends `bytes` and returns the offset where they start.
  uint64_t add(const void *data, uint64_t bytes);
  std::vector<uint8_t> &bytes() { return data; }

private:
  std::vector<uint8_t> data;
};

/// Checks everything that does not need a GPU: the buffers, kernels and
/// programs refer to what exists; weights lie in the weights section; the
/// I/O buffers exist once each with their minimum sizes; the KV buffers
/// match the KV config; every launch expression evaluates, at the smallest
/// and the largest step, to a valid grid (>= 1), block (<= 1024 threads)
/// and shared-memory size.
bool validateContents(const EngineContents &contents,
                      const RuntimeConfig &config, std::string *error);

struct WriteOptions {
  /// Replace an existing file. Without it, an existing file is an error.
  bool force = false;
};

/// Serializes `contents` and writes it atomically: to a temporary file in the
/// same folder, then renamed (or hard-linked when not forcing, so that a file
/// created meanwhile is never replaced). On failure nothing is left behind.
bool writeEngine(const EngineContents &contents, const std::string &path,
                 const WriteOptions &options, std::string *error);

/// Serializes to memory (the same bytes writeEngine writes).
bool serializeEngine(const EngineContents &contents,
                     std::vector<uint8_t> *bytes, std::string *error);

/// A read-only view of a whole engine file, memory-mapped when possible.
class EngineFile {
public:
  ~EngineFile();
  EngineFile(const EngineFile &) = delete;
  EngineFile &operator=(const EngineFile &) = delete;

  static std::unique_ptr<EngineFile> open(const std::string &path,
                                          std::string *error);
  static std::unique_ptr<EngineFile> fromBytes(std::vector<uint8_t> bytes);

  const uint8_t *data() const { return base; }
  uint64_t size() const { return length; }

private:
  EngineFile() = default;
  const uint8_t *base = nullptr;
  uint64_t length = 0;
  void *mapping = nullptr;
  std::vector<uint8_t> owned;
};

struct ReadOptions {
  /// Verify the content hash (parallel SHA-256). Off only for tools that
  /// already verified the same bytes.
  bool verifyContentHash = true;
};

/// Parses and validates an engine: magic; version (same major, minor not
/// newer); sizes; every section's bounds and alignment; the content hash;
/// then the sections themselves and validateContents. The target SM is
/// checked by the runtime against the device (see checkTargetSm).
bool readEngine(const EngineFile &file, const ReadOptions &options,
                Header *header, EngineContents *contents, RuntimeConfig *config,
                std::string *error);

/// Whether images built for `targetSm` run on a device of `deviceSm`:
/// true with `usePtx` false when a cubin runs there (same major, device
/// minor at least the target's); true with `usePtx` true when only PTX JIT
/// can (a newer device and every module has PTX); else false and an error.
bool checkTargetSm(uint32_t targetSm, uint32_t deviceSm, bool havePtx,
                   bool *usePtx, std::string *error);

/// Computes the content hash of a complete engine image (the hash field is
/// read as zeros). Uses up to `threads` threads (0: hardware concurrency).
Hash computeContentHash(const uint8_t *data, uint64_t size,
                        unsigned threads = 0);

/// SHA-256 of a byte range (for the source-model hash).
Hash sha256(const void *data, uint64_t size);
std::string hashToHex(const Hash &hash);

/// A human-readable summary: header, sections, metadata keys, buffers,
/// kernels and programs (for `sitsc --inspect` and `sits-run --inspect`).
std::string describeEngine(const Header &header, const EngineContents &contents,
                           const RuntimeConfig &config, bool verbose);

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_ENGINEFORMAT_H
