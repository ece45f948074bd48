//===- TestEngines.cpp - The toy engine and broken engines ----------------===//

#include "TestEngines.h"

#include "sits/Json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace sits {
namespace test {

using format::BufferDesc;
using format::BufferRole;
using format::DType;
using format::Expr;
using format::Launch;
using format::LaunchArg;

namespace {

float roundTo(DType type, float v) {
  switch (type) {
  case DType::F16:
    return format::halfToFloat(format::floatToHalf(v));
  case DType::BF16:
    return format::bfloat16ToFloat(format::floatToBFloat16(v));
  default:
    return v;
  }
}

std::vector<float> randomMatrix(std::mt19937_64 &rng, size_t count, float scale,
                                DType type) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(count);
  for (float &v : out)
    v = roundTo(type, normal(rng));
  return out;
}

/// The stored bytes of `values` in `type`.
std::vector<uint8_t> encode(const std::vector<float> &values, DType type) {
  std::vector<uint8_t> out(values.size() * format::dtypeBytes(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == DType::F32) {
      std::memcpy(&out[4 * i], &values[i], 4);
    } else {
      uint16_t bits = type == DType::F16 ? format::floatToHalf(values[i])
                                         : format::floatToBFloat16(values[i]);
      std::memcpy(&out[2 * i], &bits, 2);
    }
  }
  return out;
}

Expr c(int64_t v) { return Expr::constant(v); }

} // namespace

ToyWeights makeToyWeights(const ToyConfig &config) {
  std::mt19937_64 rng(config.weightSeed);
  size_t h = config.hidden, v = config.vocab;
  float projection = 1.0f / std::sqrt(static_cast<float>(h));
  ToyWeights w;
  w.emb = randomMatrix(rng, v * h, 1.0f, config.weightType);
  w.wq = randomMatrix(rng, h * h, projection, config.weightType);
  w.wk = randomMatrix(rng, h * h, projection, config.weightType);
  w.wv = randomMatrix(rng, h * h, projection, config.weightType);
  w.lm = randomMatrix(rng, v * h, projection, config.weightType);
  return w;
}

std::string toyKernelSource(const ToyConfig &config) {
  int kind = config.weightType == DType::F32   ? 0
             : config.weightType == DType::F16 ? 1
                                               : 2;
  std::string src =
      "#define HIDDEN " + std::to_string(config.hidden) +
      "\n#define WEIGHT_KIND " + std::to_string(kind) +
      "\n#define BLOCK_TOKENS " + std::to_string(config.blockTokens) +
      "\n#define MAX_BLOCKS " + std::to_string(config.maxBlocks()) + "\n";
  src += R"(
typedef unsigned short u16;
__device__ __forceinline__ float h2f(u16 h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ u16 f2h(float f) {
  u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
// Programmatic dependent launch, as the generated kernels do it: let the
// next kernel start, then wait for the previous one before touching memory.
__device__ __forceinline__ void overlapWithNeighbours() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#if WEIGHT_KIND == 0
typedef float W;
__device__ __forceinline__ float wload(const W *p, long i) { return p[i]; }
#elif WEIGHT_KIND == 1
typedef u16 W;
__device__ __forceinline__ float wload(const W *p, long i) { return h2f(p[i]); }
#else
typedef u16 W;
__device__ __forceinline__ float wload(const W *p, long i) {
  return __uint_as_float(((unsigned)p[i]) << 16);
}
#endif

// Row `pos` of sequence b: contiguous [B, capacity, HIDDEN], or paged
// [blocks, BLOCK_TOKENS, HIDDEN] through the block table.
#if BLOCK_TOKENS > 0
#define TABLE_PARAM , const int *table
#define TABLE_ARG table
__device__ __forceinline__ long rowOf(const int *table, int b, int pos,
                                      int capacity) {
  return ((long)table[b * MAX_BLOCKS + pos / BLOCK_TOKENS] * BLOCK_TOKENS +
          pos % BLOCK_TOKENS) * HIDDEN;
}
#else
#define TABLE_PARAM
#define TABLE_ARG nullptr
__device__ __forceinline__ long rowOf(const int *, int b, int pos,
                                      int capacity) {
  return ((long)b * capacity + pos) * HIDDEN;
}
#endif

// Where token row t lies (kernels/common.cuh's StepRows): padded, b owns
// rows [b * S, b * S + S); packed, b owns stepLen[b] rows after b - 1's.
__device__ __forceinline__ int toyLocate(const int *len, int S, int packed,
                                         int t, int *i) {
  if (!packed) { *i = t % S; return t / S; }
  int b = 0;
  while (t >= len[b]) t -= len[b++];
  *i = t;
  return b;
}
__device__ __forceinline__ long toyFirst(const int *len, int S, int packed,
                                         int b) {
  if (!packed) return (long)b * S;
  long row = 0;
  for (int j = 0; j < b; ++j) row += len[j];
  return row;
}

extern "C" __global__ void toy_init(float *consts, float scale) {
  overlapWithNeighbours();
  if (blockIdx.x == 0 && threadIdx.x == 0) consts[0] = scale;
}

// One block of HIDDEN threads per token (b, i) of the [B, S] step.
extern "C" __global__ void toy_embed_qkv(
    const int *ids, const int *past, const int *stepLen, int S, int packed,
    int vocab, const W *emb, const W *wq, const W *wk, const W *wv, float *x,
    float *q, u16 *kc, u16 *vc, int capacity TABLE_PARAM) {
  overlapWithNeighbours();
  int t = blockIdx.x, i, d = threadIdx.x;
  int b = toyLocate(stepLen, S, packed, t, &i);
  if (i >= stepLen[b]) return;            // padding of a shorter sequence
  int pos = past[b] + i;
  if (pos >= capacity) return;             // the runtime never lets this happen
  int id = ids[t];
  if (id < 0 || id >= vocab) id = 0;       // never read outside the table
  __shared__ float xs[HIDDEN];
  float xv = wload(emb, (long)id * HIDDEN + d);
  xs[d] = xv;
  x[(long)t * HIDDEN + d] = xv;
  __syncthreads();
  float qa = 0.f, ka = 0.f, va = 0.f;
  for (int k = 0; k < HIDDEN; ++k) {
    qa += wload(wq, d * HIDDEN + k) * xs[k];
    ka += wload(wk, d * HIDDEN + k) * xs[k];
    va += wload(wv, d * HIDDEN + k) * xs[k];
  }
  q[(long)t * HIDDEN + d] = qa;
  long row = rowOf(TABLE_ARG, b, pos, capacity) + d;
  kc[row] = f2h(ka);
  vc[row] = f2h(va);
}

// Causal attention of each new token over the cache rows 0..pos.
extern "C" __global__ void toy_attention(
    const int *past, const int *stepLen, int S, int packed,
    const float *consts, const float *x, const float *q, const u16 *kc,
    const u16 *vc, float *h, int capacity TABLE_PARAM) {
  overlapWithNeighbours();
  int t = blockIdx.x, i, d = threadIdx.x;
  int b = toyLocate(stepLen, S, packed, t, &i);
  if (i >= stepLen[b]) return;
  int pos = past[b] + i;
  if (pos >= capacity) return;
  float scale = consts[0];
  float qd = q[(long)t * HIDDEN + d];
  float m = -1e30f, l = 0.f, acc = 0.f;
  for (int j = 0; j <= pos; ++j) {
    long row = rowOf(TABLE_ARG, b, j, capacity) + d;
    float p = qd * h2f(kc[row]);
    for (int off = 16; off; off >>= 1) p += __shfl_xor_sync(0xffffffffu, p, off);
    float s = p * scale;
    float mNew = fmaxf(m, s);
    float corr = expf(m - mNew), e = expf(s - mNew);
    l = l * corr + e;
    acc = acc * corr + e * h2f(vc[row]);
    m = mNew;
  }
  h[(long)t * HIDDEN + d] = x[(long)t * HIDDEN + d] + acc / l;
}

// Logits of the last new token of each sequence.
extern "C" __global__ void toy_lm_head(const int *stepLen, int S, int packed,
                                       const float *h, const W *lm,
                                       float *logits, int vocab) {
  overlapWithNeighbours();
  int b = blockIdx.x, last = stepLen[b] - 1;
  if (last < 0) return;
  __shared__ float hs[HIDDEN];
  if (threadIdx.x < HIDDEN)
    hs[threadIdx.x] =
        h[(toyFirst(stepLen, S, packed, b) + last) * HIDDEN + threadIdx.x];
  __syncthreads();
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    float sum = 0.f;
    for (int k = 0; k < HIDDEN; ++k) sum += wload(lm, (long)v * HIDDEN + k) * hs[k];
    logits[(long)b * vocab + v] = sum;
  }
}
)";
  return src;
}

format::ModuleImage placeholderModule(const ToyConfig &config) {
  format::ModuleImage module;
  module.name = "toy";
  module.sm = config.targetSm;
  const char text[] = "placeholder image: the CPU tests never load it";
  module.cubin.assign(text, text + sizeof(text));
  return module;
}

format::EngineContents buildToyEngine(const ToyConfig &config,
                                      const ToyWeights &weights,
                                      format::ModuleImage module) {
  format::EngineContents e;
  e.targetSm = config.targetSm;
  e.cudaVersion = 13000;
  e.sourceModelHash = format::sha256("toy model", 9);
  e.modules.push_back(std::move(module));
  for (const char *name :
       {"toy_init", "toy_embed_qkv", "toy_attention", "toy_lm_head"})
    e.kernels.push_back({0, name});

  const uint64_t h = config.hidden, v = config.vocab, mb = config.maxBatch;
  const uint64_t cap = config.capacity, mp = config.maxPrefill;
  format::WeightPacker packer;
  auto weight = [&](const char *name, const std::vector<float> &values,
                    std::vector<uint64_t> shape) {
    std::vector<uint8_t> bytes = encode(values, config.weightType);
    BufferDesc b;
    b.name = name;
    b.role = BufferRole::Weight;
    b.dtype = config.weightType;
    b.offset = packer.add(bytes.data(), bytes.size());
    b.bytes = bytes.size();
    b.shape = std::move(shape);
    e.buffers.push_back(b);
    return static_cast<uint32_t>(e.buffers.size() - 1);
  };
  auto buffer = [&](const char *name, BufferRole role, DType type,
                    std::vector<uint64_t> shape) {
    BufferDesc b;
    b.name = name;
    b.role = role;
    b.dtype = type;
    b.bytes = format::dtypeBytes(type);
    for (uint64_t d : shape)
      b.bytes *= d;
    b.shape = std::move(shape);
    e.buffers.push_back(b);
    return static_cast<uint32_t>(e.buffers.size() - 1);
  };
  uint32_t emb = weight("model.embed_tokens.weight", weights.emb, {v, h});
  uint32_t wq =
      weight("model.layers.0.self_attn.q_proj.weight", weights.wq, {h, h});
  uint32_t wk =
      weight("model.layers.0.self_attn.k_proj.weight", weights.wk, {h, h});
  uint32_t wv =
      weight("model.layers.0.self_attn.v_proj.weight", weights.wv, {h, h});
  uint32_t lm = weight("lm_head.weight", weights.lm, {v, h});
  e.weights = std::move(packer.bytes());
  uint32_t ids =
      buffer("input_ids", BufferRole::TokenIds, DType::I32, {mb, mp});
  uint32_t past =
      buffer("past_lengths", BufferRole::PastLengths, DType::I32, {mb});
  uint32_t step =
      buffer("step_lengths", BufferRole::StepLengths, DType::I32, {mb});
  uint32_t logits = buffer("logits", BufferRole::Logits, DType::F32, {mb, v});
  // A paged pool: poolBlocks blocks of blockTokens rows (1 KV head).
  const bool paged = config.blockTokens != 0;
  const uint64_t seqs = paged ? config.poolBlocks : mb;
  const uint64_t rows = paged ? config.blockTokens : cap;
  uint32_t kc =
      buffer("kv.key", BufferRole::KeyCache, DType::F16, {1, seqs, 1, rows, h});
  uint32_t vc = buffer("kv.value", BufferRole::ValueCache, DType::F16,
                       {1, seqs, 1, rows, h});
  uint32_t table = paged ? buffer("kv.block_table", BufferRole::Activation,
                                  DType::I32, {mb, config.maxBlocks()})
                         : 0;
  uint32_t x = buffer("x", BufferRole::Activation, DType::F32, {mb, mp, h});
  uint32_t q = buffer("q", BufferRole::Activation, DType::F32, {mb, mp, h});
  uint32_t hid = buffer("h", BufferRole::Activation, DType::F32, {mb, mp, h});
  uint32_t consts = buffer("consts", BufferRole::Activation, DType::F32, {4});

  auto launch = [&](uint32_t kernel, Expr grid, Expr block,
                    std::vector<LaunchArg> args) {
    Launch l;
    l.kernel = kernel;
    l.grid = {grid, c(1), c(1)};
    l.block = {block, c(1), c(1)};
    l.sharedBytes = c(0);
    l.args = std::move(args);
    return l;
  };
  using A = LaunchArg;
  // 1 in a packed step (T < B * S), as the generated kernels get it.
  const Expr packedRows =
      format::min(c(1), Expr::batch() * Expr::seq() - Expr::tokens());
  format::Program init{
      format::kInitProgram,
      {launch(0, c(1), c(32),
              {A::bufferAddress(consts), A::float32(config.attentionScale)})}};
  std::vector<Launch> step_launches = {
      launch(1, Expr::tokens(), c(h),
             {A::bufferAddress(ids), A::bufferAddress(past),
              A::bufferAddress(step), A::int32(Expr::seq()),
              A::int32(packedRows), A::int32(c(v)), A::bufferAddress(emb),
              A::bufferAddress(wq), A::bufferAddress(wk), A::bufferAddress(wv),
              A::bufferAddress(x), A::bufferAddress(q), A::bufferAddress(kc),
              A::bufferAddress(vc), A::int32(c(cap))}),
      launch(2, Expr::tokens(), c(h),
             {A::bufferAddress(past), A::bufferAddress(step),
              A::int32(Expr::seq()), A::int32(packedRows),
              A::bufferAddress(consts), A::bufferAddress(x),
              A::bufferAddress(q), A::bufferAddress(kc), A::bufferAddress(vc),
              A::bufferAddress(hid), A::int32(c(cap))}),
      launch(3, Expr::batch(), c(256),
             {A::bufferAddress(step), A::int32(Expr::seq()),
              A::int32(packedRows), A::bufferAddress(hid), A::bufferAddress(lm),
              A::bufferAddress(logits), A::int32(c(v))})};
  if (paged)
    for (size_t i = 0; i < 2; ++i)
      step_launches[i].args.push_back(A::bufferAddress(table));
  e.programs = {init,
                {format::kPrefillProgram, step_launches},
                {format::kDecodeProgram, step_launches}};
  e.formatMinor = paged ? format::kPagedKVCacheMinor : uint16_t(1);

  json::Value meta = json::Value::object();
  meta.set("format", "sits-engine");
  json::Value &model = meta.set("model", json::Value::object());
  model.set("name", "toy-attention");
  model.set("architecture", "toy");
  model.set("vocab_size", config.vocab);
  model.set("hidden_size", config.hidden);
  model.set("num_layers", 1);
  json::Value &limits = meta.set("limits", json::Value::object());
  limits.set("max_batch", config.maxBatch);
  limits.set("max_prefill_tokens", config.maxPrefill);
  limits.set("max_seq_len", config.capacity);
  json::Value &kv = meta.set("kv_cache", json::Value::object());
  kv.set("layers", 1);
  kv.set("max_batch", config.maxBatch);
  kv.set("kv_heads", 1);
  kv.set("capacity", config.capacity);
  kv.set("head_dim", config.hidden);
  kv.set("dtype", "f16");
  kv.set("layout", paged ? "paged" : "contiguous");
  if (paged) {
    kv.set("block_tokens", config.blockTokens);
    kv.set("blocks", config.poolBlocks);
    kv.set("block_table", "kv.block_table");
  }
  json::Value &tok = meta.set("tokenizer", json::Value::object());
  tok.set("kind", "bytes");
  json::Value &eos = tok.set("eos_token_ids", json::Value::array());
  for (int32_t id : config.eosTokenIds)
    eos.push(id);
  json::Value &inputs = meta.set("inputs", json::Value::array());
  json::Value &input = inputs.push(json::Value::object());
  input.set("name", "input_ids");
  input.set("dtype", "i32");
  json::Value &outputs = meta.set("outputs", json::Value::array());
  json::Value &output = outputs.push(json::Value::object());
  output.set("name", "logits");
  output.set("dtype", "f32");
  json::Value &options = meta.set("options", json::Value::object());
  options.set("dtype", format::dtypeName(config.weightType));
  json::Value &launchMeta = meta.set("launch", json::Value::object());
  launchMeta.set("programmatic_dependent", true);
  if (config.packedSteps)
    launchMeta.set("packed_steps", true);
  e.metadataJson = meta.write();
  return e;
}

std::vector<float> toyReferenceLogits(const ToyConfig &config,
                                      const ToyWeights &w,
                                      const std::vector<int32_t> &tokens) {
  const size_t h = config.hidden, n = tokens.size();
  std::vector<float> xs(n * h), qs(n * h), ks(n * h), vs(n * h), hs(h);
  for (size_t t = 0; t < n; ++t) {
    const float *x = &w.emb[size_t(tokens[t]) * h];
    std::copy(x, x + h, &xs[t * h]);
    for (size_t d = 0; d < h; ++d) {
      float qa = 0, ka = 0, va = 0;
      for (size_t k = 0; k < h; ++k) {
        qa += w.wq[d * h + k] * x[k];
        ka += w.wk[d * h + k] * x[k];
        va += w.wv[d * h + k] * x[k];
      }
      qs[t * h + d] = qa;
      ks[t * h + d] = format::halfToFloat(format::floatToHalf(ka));
      vs[t * h + d] = format::halfToFloat(format::floatToHalf(va));
    }
  }
  size_t last = n - 1;
  std::vector<float> scores(n);
  float maxScore = -1e30f;
  for (size_t j = 0; j < n; ++j) {
    float dot = 0;
    for (size_t d = 0; d < h; ++d)
      dot += qs[last * h + d] * ks[j * h + d];
    scores[j] = dot * config.attentionScale;
    maxScore = std::max(maxScore, scores[j]);
  }
  float sum = 0;
  for (float &s : scores) {
    s = std::exp(s - maxScore);
    sum += s;
  }
  for (size_t d = 0; d < h; ++d) {
    float acc = 0;
    for (size_t j = 0; j < n; ++j)
      acc += scores[j] * vs[j * h + d];
    hs[d] = xs[last * h + d] + acc / sum;
  }
  std::vector<float> logits(config.vocab);
  for (size_t v = 0; v < config.vocab; ++v) {
    float s = 0;
    for (size_t k = 0; k < h; ++k)
      s += w.lm[v * h + k] * hs[k];
    logits[v] = s;
  }
  return logits;
}

std::vector<uint8_t> serializeOrDie(const format::EngineContents &contents) {
  std::vector<uint8_t> bytes;
  std::string error;
  if (!format::serializeEngine(contents, &bytes, &error)) {
    std::fprintf(stderr, "cannot serialize the test engine: %s\n",
                 error.c_str());
    std::abort();
  }
  return bytes;
}

void rehash(std::vector<uint8_t> &bytes) {
  format::Hash hash = format::computeContentHash(bytes.data(), bytes.size());
  std::memcpy(bytes.data() + format::kContentHashOffset, hash.data(),
              format::kHashBytes);
}

static uint64_t readU64(const std::vector<uint8_t> &bytes, uint64_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(bytes[at + i]) << (8 * i);
  return v;
}

static uint64_t sectionEntry(const std::vector<uint8_t> &bytes,
                             format::SectionKind kind) {
  uint64_t table = readU64(bytes, 40);
  for (uint64_t entry = table; entry + 32 <= bytes.size(); entry += 32)
    if (bytes[entry] == static_cast<uint8_t>(kind))
      return entry;
  std::fprintf(stderr, "test engine has no section %u\n", unsigned(kind));
  std::abort();
}

uint64_t sectionOffset(const std::vector<uint8_t> &bytes,
                       format::SectionKind kind) {
  return readU64(bytes, sectionEntry(bytes, kind) + 8);
}

void corrupt(std::vector<uint8_t> &bytes, Corruption corruption) {
  switch (corruption) {
  case Corruption::None:
    return;
  case Corruption::Truncated:
    bytes.resize(bytes.size() - 100);
    return;
  case Corruption::FlippedByte:
    bytes[sectionOffset(bytes, format::SectionKind::Weights) + 7] ^= 0x10;
    return;
  case Corruption::WrongMagic:
    std::memcpy(bytes.data(), "GGUF\0\0\0\0", 8);
    return;
  case Corruption::NewerMajor:
    bytes[8] = static_cast<uint8_t>(format::kFormatMajor + 1);
    rehash(bytes);
    return;
  case Corruption::NewerMinor:
    bytes[10] = static_cast<uint8_t>(format::kFormatMinor + 1);
    rehash(bytes);
    return;
  case Corruption::SectionOutOfBounds: {
    uint64_t entry = sectionEntry(bytes, format::SectionKind::Weights);
    uint64_t size = readU64(bytes, entry + 16) + 4096;
    for (int i = 0; i < 8; ++i)
      bytes[entry + 16 + i] = static_cast<uint8_t>(size >> (8 * i));
    rehash(bytes);
    return;
  }
  case Corruption::BadPlan: {
    // The plan starts with its buffer count; a count far beyond what the
    // section holds must be rejected before any allocation.
    uint64_t plan = sectionOffset(bytes, format::SectionKind::Plan);
    bytes[plan + 1] = 0x7f;
    rehash(bytes);
    return;
  }
  }
}

bool parseCorruption(const std::string &name, Corruption *corruption) {
  static const struct {
    const char *name;
    Corruption value;
  } kNames[] = {{"valid", Corruption::None},
                {"truncated", Corruption::Truncated},
                {"flipped-byte", Corruption::FlippedByte},
                {"wrong-magic", Corruption::WrongMagic},
                {"newer-major", Corruption::NewerMajor},
                {"newer-minor", Corruption::NewerMinor},
                {"section-out-of-bounds", Corruption::SectionOutOfBounds},
                {"bad-plan", Corruption::BadPlan}};
  for (const auto &entry : kNames) {
    if (name == entry.name) {
      *corruption = entry.value;
      return true;
    }
  }
  return false;
}

} // namespace test
} // namespace sits
