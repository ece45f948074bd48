//===- Launches.cpp - One launch of each kernel family --------------------===//

#include "backends/cuda/LaunchBuilder.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cstdio>

namespace sits::codegen {

using format::DType;
using format::Expr;

namespace {

const char *storageStruct(DType type) {
  switch (type) {
  case DType::F16:
    return "sits::F16";
  case DType::BF16:
    return "sits::BF16";
  default:
    return "sits::F32";
  }
}

/// The C type of a pointer to elements stored as `type`.
std::string pointerType(DType type, bool isConst) {
  std::string element = type == DType::F32 ? "float" : "unsigned short";
  return (isConst ? "const " : "") + element + " *";
}

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

ArgBinding tokensArg() { return ArgBinding::int32(Expr::tokens()); }
ArgBinding weightArg(unsigned index) {
  return ArgBinding::bufferArg(BufferKind::Weight, index);
}

/// `static constexpr` lookup functions of per-segment values, usable in
/// device code at run time and in constant expressions.
std::string segmentFunction(const std::string &type, const std::string &name,
                            const std::vector<std::string> &values) {
  std::string text = "__host__ __device__ static constexpr " + type + " " +
                     name + "(int s) { return ";
  for (size_t s = 0; s + 1 < values.size(); ++s)
    text += "s == " + std::to_string(s) + " ? " + values[s] + " : ";
  return text + values.back() + "; }";
}

void addRopeConstants(LaunchBuilder &b, const std::string &structName,
                      const RopeConfig &rope) {
  // Members of a nested struct (the fused kernel's key or query RoPE) are
  // indented one level more.
  std::string indent = structName.empty() ? "" : "  ";
  if (!structName.empty())
    b.constant("struct " + structName + " {");
  b.constant(indent + "static constexpr int kHeads = " +
             std::to_string(rope.heads) + ";");
  b.constant(indent + "static constexpr int kHeadDim = " +
             std::to_string(rope.headDim) + ";");
  b.constant(indent + "static constexpr int kRotary = " +
             std::to_string(rope.rotaryDim) + ";");
  b.constant(indent + "static constexpr int kTableRows = " +
             std::to_string(rope.tableRows) + ";");
  b.constant(indent + "static constexpr bool kInterleaved = " +
             (rope.interleaved ? "true;" : "false;"));
  if (!structName.empty())
    b.constant("};");
}

} // namespace

std::string addPaging(LaunchBuilder &b, const KVPaging &paging) {
  if (!paging.blockTokens)
    return "";
  b.intConstant("kBlockTokens", paging.blockTokens);
  b.intConstant("kMaxBlocks", paging.maxBlocks);
  b.param("const int *", "block_table",
          ArgBinding::bufferArg(BufferKind::BlockTable));
  return ", block_table";
}

std::string withPaging(std::string call, const std::string &paged) {
  return call.substr(0, call.size() - 1) + paged + ")";
}

//===----------------------------------------------------------------------===//
// Families
//===----------------------------------------------------------------------===//

PlannedLaunch planEmbedding(const EmbeddingLaunch &desc) {
  int64_t vec = vectorWidth(desc.hidden, desc.weightType);
  int64_t threads = desc.threads;
  LaunchBuilder b("embedding", "sits/embedding.cuh", static_cast<int>(threads));
  b.typeConstant("Weight", storageStruct(desc.weightType));
  b.intConstant("kVocab", desc.vocab);
  b.intConstant("kHidden", desc.hidden);
  b.intConstant("kThreads", threads);
  b.intConstant("kVec", vec);
  b.floatConstant("kScale", desc.scale);
  b.param("const int *", "token_ids",
          ArgBinding::bufferArg(BufferKind::TokenIds));
  b.param(pointerType(desc.weightType, true), "table", weightArg(desc.table));
  b.param("float *", "out", desc.out);
  b.call("sits::embedding<Cfg>(token_ids, table, out)");
  b.setGrid(Expr::tokens());
  return b.take();
}

PlannedLaunch planNorm(const NormLaunch &desc) {
  int64_t threads = desc.threads;
  LaunchBuilder b(desc.isLayerNorm ? "layer_norm" : "rms_norm", "sits/norm.cuh",
                  static_cast<int>(threads));
  b.intConstant("kHidden", desc.hidden);
  b.intConstant("kThreads", threads);
  b.floatConstant("kEpsilon", desc.epsilon);
  b.param("const float *", "input", desc.input);
  b.param("const float *", "weight", weightArg(desc.weight));
  if (desc.isLayerNorm) {
    b.boolConstant("kHasBias", desc.bias.has_value());
    if (desc.bias)
      b.param("const float *", "bias", weightArg(*desc.bias));
    b.param("float *", "out", desc.out);
    b.call(std::string("sits::layerNorm<Cfg>(input, weight, ") +
           (desc.bias ? "bias" : "nullptr") + ", out)");
  } else {
    b.floatConstant("kWeightOffset", desc.weightOffset);
    b.intConstant("kOperandBits", desc.operandBits);
    b.typeConstant("Operand", storageStruct(desc.operandType));
    b.param(desc.operandBits ? "unsigned short *" : "float *", "out", desc.out);
    b.call("sits::rmsNorm<Cfg>(input, weight, out)");
  }
  b.setGrid(Expr::tokens());
  return b.take();
}

PlannedLaunch planLinear(const LinearLaunch &desc) {
  constexpr int64_t kGemvWarps = 4, kTokenTile = 8;
  constexpr int64_t kTile = 64; // gemm.cuh's kGemmTileM and kGemmTileN
  // Quantized weights (decode only; gemv_quant.cuh).
  const LinearQuant &quant = desc.quant;
  const bool quantized = desc.decode && quant.bits != 0;
  const int64_t quantGroups = quantized ? quant.groups(desc.k) : 0;
  const bool gated = desc.epilogue == LinearEpilogue::Glu;
  // The kernel the selection pass chose and the planner checked
  // (checkLinearKernel).
  const bool tensorGemv =
      desc.kernel == kernel::KernelKind::GemvTensorCore ||
      desc.kernel == kernel::KernelKind::GemvQuantTensorCore;
  constexpr int64_t kTcRows = 16, kTcThreads = 256;
  // Prefill on tensor cores (gemm.cuh's gemmTensorCore): 128 x 128 tiles
  // (64 gate and 64 up rows with a GLU).
  const bool tensorGemm = desc.kernel == kernel::KernelKind::GemmTensorCore;
  constexpr int64_t kTcTileM = 128;
  const int64_t tcGemmRows = gated ? 64 : 128;
  std::string family = desc.gatherLast ? "lm_head"
                       : desc.decode   ? "gemv"
                                       : "gemm";
  if (quantized)
    family += "_q" + std::to_string(quant.bits);
  if (desc.norm)
    family += "_rmsnorm";
  if (gated)
    family += "_glu";
  else if (desc.epilogue == LinearEpilogue::Residual)
    family += "_residual";
  const int64_t mats = gated ? 2 : 1;
  int threads = tensorGemv    ? static_cast<int>(kTcThreads)
                : desc.decode ? static_cast<int>(kGemvWarps * 32)
                : tensorGemm  ? static_cast<int>(kGemmTensorCoreThreads)
                              : 256;
  LaunchBuilder b(family,
                  quantized     ? "sits/gemv_quant.cuh"
                  : desc.decode ? "sits/gemv.cuh"
                                : "sits/gemm.cuh",
                  threads);

  int64_t segments = static_cast<int64_t>(desc.segments.size());
  int64_t totalRows = 0, totalTiles = 0, totalTcTiles = 0;
  std::vector<std::string> rows, biases, tiles, tcTiles;
  // Column tiles of the prefill GEMM in use (64 rows, or 128 on tensor
  // cores).
  const int64_t gemmTile = tensorGemm ? tcGemmRows : kTile;
  for (const LinearSegment &segment : desc.segments) {
    rows.push_back(std::to_string(segment.rows));
    biases.push_back(segment.bias ? "true" : "false");
    tiles.push_back(std::to_string((segment.rows + gemmTile - 1) / gemmTile));
    tcTiles.push_back(std::to_string((segment.rows + kTcRows - 1) / kTcRows));
    totalRows += segment.rows;
    totalTiles += (segment.rows + gemmTile - 1) / gemmTile;
    totalTcTiles += (segment.rows + kTcRows - 1) / kTcRows;
  }
  if (gated) {
    totalRows = desc.segments.front().rows;
    totalTiles = (totalRows + gemmTile - 1) / gemmTile;
    totalTcTiles = (totalRows + kTcRows - 1) / kTcRows;
  }
  b.typeConstant("Weight", storageStruct(desc.weightType));
  b.intConstant("kK", desc.k);
  b.intConstant("kSegments", segments);
  b.intConstant("kTotalRows", totalRows);
  b.constant(segmentFunction("int", "rows", rows));
  b.constant(segmentFunction("bool", "hasBias", biases));
  b.constant("static constexpr int kEpilogue = " +
             std::to_string(static_cast<int>(desc.epilogue)) + ";");
  b.intConstant("kActivation", desc.activation);
  if (quantized) {
    b.intConstant("kBits", quant.bits);
    b.intConstant("kGroup", quant.group);
    b.intConstant("kGroups", quantGroups);
    b.intConstant("kRowBytes", quant.rowBytes);
    b.boolConstant("kInterleaved", quant.interleaved);
  }
  if (tensorGemv || tensorGemm)
    b.boolConstant("kHalfX", desc.halfInput());
  // The planner asks for f16 operands only where these hold
  // (kernel-choose-operand-layout, quantGemvReadsHalfOperands).
  if (desc.halfInput() &&
      !((tensorGemv && (!quantized || quant.interleaved) && !desc.norm) ||
        (tensorGemm && desc.inputOperandBits ==
                           kernel::KernelDialect::kInputOrderOperandBits)))
    llvm::report_fatal_error("codegen: a linear layer reads f16 operands that "
                             "only the 16-bit and the interleaved quantized "
                             "tensor-core GEMVs (without a fused norm) and "
                             "the tensor-core GEMM read");
  if (desc.outputOperandBits && !((tensorGemv || tensorGemm) && gated))
    llvm::report_fatal_error("codegen: only a gate/up GEMV or GEMM on tensor "
                             "cores writes f16 operands");
  const int64_t tilesPerBlock = desc.tiles;
  if (tensorGemv) {
    const GemvRing ring = gemvTensorCoreRing(mats, tilesPerBlock, 1);
    b.constant(segmentFunction("int", "tiles", tcTiles));
    b.intConstant("kTotalTiles", totalTcTiles);
    b.intConstant("kTilesPerBlock", tilesPerBlock);
    b.intConstant("kUnroll", ring.unroll);
    b.intConstant("kStages", ring.stages);
    b.boolConstant("kGatherLast", desc.gatherLast);
    b.intConstant("kOutOperandBits", desc.outputOperandBits);
    if (!quantized) {
      b.intConstant("kTokenGroups", desc.tokenGroups);
      if (desc.tokenGroups > 1) {
        const GemvRing groups =
            gemvTensorCoreRing(mats, tilesPerBlock, desc.tokenGroups);
        b.intConstant("kGroupsUnroll", groups.unroll);
        b.intConstant("kGroupsStages", groups.stages);
      }
      b.boolConstant("kNorm", desc.norm.has_value());
      if (desc.norm) {
        b.floatConstant("kNormEpsilon", desc.norm->epsilon);
        b.floatConstant("kNormWeightOffset", desc.norm->weightOffset);
      }
    }
    b.setShared(gemvTensorCoreLaunchBytes(mats, tilesPerBlock, desc.tokenGroups,
                                          quantGroups));
    b.setMinBlocks(2); // two blocks per SM: at most 128 registers
    b.setCallWaits();  // weight copies start before the wait
  } else if (desc.decode) {
    b.intConstant("kWarps", kGemvWarps);
    b.intConstant("kTokenTile", kTokenTile);
    b.intConstant("kVec", vectorWidth(desc.k, desc.weightType));
    b.boolConstant("kGatherLast", desc.gatherLast);
  } else if (tensorGemm) {
    b.constant(segmentFunction("int", "tiles", tiles));
    b.intConstant("kTotalTiles", totalTiles);
    b.intConstant("kStages", kGemmTensorCoreStages);
    b.boolConstant("kSplitK", desc.kSplits > 1);
    b.intConstant("kOutOperandBits", desc.outputOperandBits);
    b.setShared(
        gemmTensorCoreSharedBytes(kGemmTensorCoreStages, desc.halfInput()));
    b.setMinBlocks(kGemmTensorCoreBlocksPerSM);
  } else {
    b.constant(segmentFunction("int", "tiles", tiles));
    b.boolConstant("kVecW", vectorWidth(desc.k, desc.weightType) > 1);
    b.boolConstant("kVecX", desc.k % 4 == 0);
  }

  b.param(desc.halfInput() ? "const unsigned short *" : "const float *", "x",
          desc.input);
  std::string weightList, scaleList, biasList, outList;
  std::string weightType =
      quantized ? "const unsigned char *" : pointerType(desc.weightType, true);
  for (int64_t s = 0; s < segments; ++s) {
    const LinearSegment &segment = desc.segments[s];
    std::string index = std::to_string(s);
    b.param(weightType, (quantized ? "q" : "w") + index,
            segment.weightArg ? *segment.weightArg : weightArg(segment.weight));
    weightList += (s ? ", " : "") + std::string(quantized ? "q" : "w") + index;
    if (quantized) {
      b.param("const unsigned short *", "s" + index,
              weightArg(*segment.scales));
      scaleList += (s ? ", s" : "s") + index;
    }
    if (segment.bias) {
      b.param("const float *", "bias" + index, weightArg(*segment.bias));
      biasList += (s ? ", bias" : "bias") + index;
    } else {
      biasList += s ? ", nullptr" : "nullptr";
    }
    if (!gated || s == 0) {
      const bool halves = desc.outputOperandBits != 0;
      b.param(halves ? "unsigned short *" : "float *", "out" + index,
              segment.out);
      outList += std::string(s ? ", " : "") +
                 (halves ? "reinterpret_cast<float *>(out" + index + ")"
                         : "out" + index);
    }
  }
  bool residual = desc.epilogue == LinearEpilogue::Residual;
  if (residual)
    b.param("const float *", "residual", *desc.residual);
  b.param("int", "tokens",
          ArgBinding::int32(desc.gatherLast ? Expr::batch() : Expr::tokens()));
  const std::string gatherArgs =
      desc.gatherLast ? addStepRows(b) : "sits::StepRows{nullptr, 1, 0}";
  if (desc.norm)
    b.param("const float *", "norm_weight", weightArg(desc.norm->weight));
  if (quantized) {
    b.body(weightType + "data[] = {" + weightList + "};");
    b.body("const unsigned short *scales[] = {" + scaleList + "};");
  } else {
    b.body(weightType + "weights[] = {" + weightList + "};");
  }
  b.body("const float *biases[] = {" + biasList + "};");
  b.body("float *outs[] = {" + outList + "};");
  std::string residualName = residual ? "residual" : "nullptr";
  if (quantized) {
    b.call(std::string("sits::") +
           (tensorGemv ? "gemvQuantTensorCore" : "gemvQuant") +
           "<Cfg>(x, data, scales, biases, outs, " + residualName +
           ", tokens, " + gatherArgs + ")");
    // The tensor-core blocks loop over the items: at most the two resident
    // per SM.
    b.setGrid(
        tensorGemv
            ? format::min(Expr::constant((totalTcTiles + tilesPerBlock - 1) /
                                         tilesPerBlock),
                          Expr::multiprocessors() * Expr::constant(2))
            : Expr::constant((totalRows + kGemvWarps - 1) / kGemvWarps));
  } else if (tensorGemv) {
    b.call("sits::gemvTensorCore<Cfg>(x, weights, biases, outs, " +
           residualName + ", tokens, " + gatherArgs +
           (desc.norm ? ", norm_weight" : "") + ")");
    // The blocks loop over the items: at most the two resident per SM.
    b.setGrid(format::min(
        Expr::constant((totalTcTiles + tilesPerBlock - 1) / tilesPerBlock),
        Expr::multiprocessors() * Expr::constant(2)));
  } else if (desc.decode) {
    b.call("sits::gemv<Cfg>(x, weights, biases, outs, " + residualName +
           ", tokens, " + gatherArgs + ")");
    b.setGrid(Expr::constant((totalRows + kGemvWarps - 1) / kGemvWarps));
  } else if (tensorGemm) {
    const Expr tokenTiles =
        format::ceilDiv(Expr::tokens(), Expr::constant(kTcTileM));
    Expr splits = Expr::constant(1);
    if (desc.kSplits > 1) {
      b.param("float *", "partial", desc.partial);
      b.param("int *", "counters", desc.counters);
      // As many ways as fill two blocks an SM, at most kSplits, and at most
      // kSplits slabs of partial sums in all (gemmSplitPartialBytes).
      const Expr tiles = format::max(tokenTiles, Expr::constant(1));
      const Expr kSplits = Expr::constant(desc.kSplits);
      splits = format::max(
          Expr::constant(1),
          format::min(
              format::floorDiv(kSplits, tiles),
              format::floorDiv(Expr::multiprocessors() *
                                   Expr::constant(kGemmTensorCoreBlocksPerSM),
                               tiles * Expr::constant(totalTiles))));
    }
    b.call("sits::gemmTensorCore<Cfg>(x, weights, biases, outs, " +
           residualName + ", tokens" +
           (desc.kSplits > 1 ? ", partial, counters" : "") + ")");
    b.setGrid(tokenTiles, Expr::constant(totalTiles), splits);
  } else {
    b.call("sits::gemm<Cfg>(x, weights, biases, outs, " + residualName +
           ", tokens)");
    b.setGrid(format::ceilDiv(Expr::tokens(), Expr::constant(kTile)),
              Expr::constant(totalTiles));
  }
  return b.take();
}

PlannedLaunch planDequantize(const DequantizeLaunch &desc) {
  constexpr int64_t kThreads = 256;
  LaunchBuilder b("dequantize_q" + std::to_string(desc.quant.bits),
                  "sits/gemv_quant.cuh", static_cast<int>(kThreads));
  b.typeConstant("Weight", storageStruct(desc.weightType));
  b.intConstant("kBits", desc.quant.bits);
  b.intConstant("kGroup", desc.quant.group);
  b.intConstant("kGroups", desc.quant.groups(desc.k));
  b.intConstant("kRowBytes", desc.quant.rowBytes);
  b.boolConstant("kInterleaved", desc.quant.interleaved);
  b.intConstant("kK", desc.k);
  b.intConstant("kRows", desc.rows);
  b.param("const unsigned char *", "data", weightArg(desc.data));
  b.param("const unsigned short *", "scales", weightArg(desc.scales));
  b.param(pointerType(desc.weightType, false), "out", desc.out);
  b.call("sits::dequantizeWeights<Cfg>(data, scales, out)");
  int64_t pieces = desc.rows * (desc.quant.rowBytes / 16);
  b.setGrid(Expr::constant((pieces + kThreads - 1) / kThreads));
  return b.take();
}

PlannedLaunch planRope(const RopeLaunch &desc) {
  int64_t threads = desc.threads;
  LaunchBuilder b("rope", "sits/rope.cuh", static_cast<int>(threads));
  addRopeConstants(b, "", desc.rope);
  b.intConstant("kThreads", threads);
  b.param("const float *", "input", desc.input);
  b.param("const float *", "table", weightArg(desc.rope.table));
  b.param("float *", "out", desc.out);
  b.param("const int *", "past_lengths", pastArg());
  const std::string steps = addStepRows(b);
  b.call("sits::rope<Cfg>(input, table, out, past_lengths, " + steps + ")");
  b.setGrid(Expr::tokens());
  return b.take();
}

PlannedLaunch planAppend(const AppendLaunch &desc) {
  int64_t width = desc.kvHeads * desc.headDim;
  if (desc.queryRope)
    width = std::max(width, desc.queryRope->heads * desc.queryRope->headDim);
  int64_t threads = desc.threads;
  std::string family = "append_kv";
  if (desc.keyRope)
    family = "rope_append_kv";
  if (desc.queryRope)
    family = "rope_qk_append_kv";
  LaunchBuilder b(family, "sits/kv_cache.cuh", static_cast<int>(threads));
  b.typeConstant("Cache", storageStruct(desc.cacheType));
  b.intConstant("kKvHeads", desc.kvHeads);
  b.intConstant("kHeadDim", desc.headDim);
  b.intConstant("kCapacity", desc.capacity);
  b.intConstant("kHotRows", desc.hotRows);
  b.intConstant("kThreads", threads);
  b.boolConstant("kKeyRope", desc.keyRope.has_value());
  if (desc.keyRope)
    addRopeConstants(b, "KeyRope", *desc.keyRope);
  b.boolConstant("kQueryRope", desc.queryRope.has_value());
  if (desc.queryRope)
    addRopeConstants(b, "QueryRope", *desc.queryRope);

  std::string cache = pointerType(desc.cacheType, false);
  b.param("const float *", "key", desc.key);
  b.param("const float *", "value", desc.value);
  if (desc.keyRope)
    b.param("const float *", "key_table", weightArg(desc.keyRope->table));
  b.param(cache, "key_cache",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, desc.layerByteOffset));
  b.param(
      cache, "value_cache",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, desc.layerByteOffset));
  if (desc.queryRope) {
    b.param("const float *", "query", desc.query);
    b.param("const float *", "query_table", weightArg(desc.queryRope->table));
    b.param("float *", "query_out", desc.queryOut);
  }
  b.param("const int *", "past_lengths", pastArg());
  const std::string steps = addStepRows(b);
  const std::string paged = addPaging(b, desc.paging);
  b.call(std::string("sits::appendKV<Cfg>(key, value, ") +
         (desc.keyRope ? "key_table" : "nullptr") +
         ", key_cache, value_cache, " +
         (desc.queryRope ? "query, query_table, query_out"
                         : "nullptr, nullptr, nullptr") +
         ", past_lengths, " + steps + paged + ")");
  // Blocks of a token share its row (kv_cache.cuh): about one element per
  // thread.
  b.setGrid(Expr::tokens(), Expr::constant((width + threads - 1) / threads));
  return b.take();
}

/// attention.cuh's attentionSharedFloats.
static int64_t attentionSharedFloats(int64_t rows, int64_t headDim,
                                     int64_t keyTile) {
  return rows * headDim + keyTile * (headDim + 1) + keyTile * headDim +
         rows * keyTile + 3 * rows;
}

std::optional<DecodeSplit> decodeSplitOf(const AttentionLaunch &desc) {
  const int64_t group = desc.heads / desc.kvHeads, d = desc.headDim;
  const bool powerOfTwo = d >= 8 && d <= 256 && (d & (d - 1)) == 0;
  if (!desc.decode || !desc.tensorCores || desc.cacheType == DType::F32 ||
      !powerOfTwo || group > 8)
    return std::nullopt;
  DecodeSplit split;
  // 256 keys per block (64 KB of K and V at head_dim 64), fewer for small
  // caches so that even they cross split boundaries; or what was asked.
  split.splitKeys =
      desc.splitKeys > 0
          ? desc.splitKeys
          : std::min<int64_t>(
                256,
                std::max<int64_t>(16, roundUp((desc.capacity + 3) / 4, 16)));
  split.splits = (desc.capacity + split.splitKeys - 1) / split.splitKeys;
  // attention_decode.cuh's decodePartialFloats: values, max, sum, padding.
  split.partialWidth = desc.heads * split.splits * (d + 4);
  return split;
}

int64_t decodeCombineSharedBytes(int64_t threads, int64_t group,
                                 int64_t headDim) {
  const int64_t parts = std::max<int64_t>(1, threads / 32 / group);
  return parts > 1 ? 4 * group * parts * (headDim + 4) : 0;
}

int64_t attentionDecodeSharedBytes(int64_t headDim, int64_t group,
                                   int64_t unroll, int64_t stages) {
  constexpr int64_t kThreads = 128;
  const int64_t ring = stages * unroll * 2 * 16 * kThreads;
  const int64_t merge = 4 * (kThreads / (headDim / 8)) * group * (headDim + 4);
  return std::max(
      {ring, merge, decodeCombineSharedBytes(kThreads, group, headDim)});
}

void addSplitDecodeConfig(LaunchBuilder &b, const AttentionLaunch &desc,
                          const DecodeSplit &split,
                          const std::string &cacheStruct) {
  b.typeConstant("Cache", cacheStruct);
  b.intConstant("kHeads", desc.heads);
  b.intConstant("kKvHeads", desc.kvHeads);
  b.intConstant("kHeadDim", desc.headDim);
  b.intConstant("kCapacity", desc.capacity);
  b.intConstant("kWindow", desc.window);
  b.intConstant("kSplitKeys", split.splitKeys);
  b.intConstant("kSplits", split.splits);
  b.floatConstant("kScale", desc.scale);
  b.floatConstant("kSoftcap", desc.softcap);
}

static PlannedLaunch planSplitDecode(const AttentionLaunch &desc,
                                     const DecodeSplit &split) {
  constexpr int64_t kThreads = 128, kUnroll = 4, kStages = 3;
  const int64_t group = desc.heads / desc.kvHeads;
  LaunchBuilder b("attention_decode", "sits/attention_decode.cuh",
                  static_cast<int>(kThreads));
  addSplitDecodeConfig(b, desc, split, storageStruct(desc.cacheType));
  b.intConstant("kUnroll", kUnroll);
  b.intConstant("kStages", kStages);
  std::string cache = pointerType(desc.cacheType, true);
  b.param("const float *", "query", desc.query);
  b.param(cache, "key_cache",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, desc.layerByteOffset));
  b.param(
      cache, "value_cache",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, desc.layerByteOffset));
  b.param("float *", "out", desc.out);
  b.param("float *", "partial", *desc.partial);
  b.param("int *", "counters", desc.counters);
  b.param("const int *", "past_lengths", pastArg());
  b.param("const int *", "step_lengths", stepArg());
  b.call(withPaging("sits::attentionDecode<Cfg>(query, key_cache, value_cache, "
                    "out, partial, counters, past_lengths, step_lengths)",
                    addPaging(b, desc.paging)));
  b.setGrid(Expr::constant(split.splits), Expr::constant(desc.kvHeads),
            Expr::batch());
  b.setShared(
      attentionDecodeSharedBytes(desc.headDim, group, kUnroll, kStages));
  return b.take();
}

bool flashPrefillFits(const AttentionLaunch &desc) {
  return !desc.decode && desc.tensorCores && desc.cacheType != DType::F32 &&
         desc.headDim % 16 == 0 && desc.headDim <= 128;
}

/// Causal prefill on tensor cores (attention_prefill.cuh).
static PlannedLaunch planFlashPrefill(const AttentionLaunch &desc) {
  const int64_t d = desc.headDim;
  constexpr int64_t kThreads = 128, kRows = 64;
  LaunchBuilder b("attention_prefill", "sits/attention_prefill.cuh",
                  static_cast<int>(kThreads));
  b.typeConstant("Cache", storageStruct(desc.cacheType));
  b.intConstant("kHeads", desc.heads);
  b.intConstant("kKvHeads", desc.kvHeads);
  b.intConstant("kHeadDim", d);
  b.intConstant("kCapacity", desc.capacity);
  b.intConstant("kWindow", desc.window);
  b.floatConstant("kScale", desc.scale);
  b.floatConstant("kSoftcap", desc.softcap);
  std::string cache = pointerType(desc.cacheType, true);
  b.param("const float *", "query", desc.query);
  b.param(cache, "key_cache",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, desc.layerByteOffset));
  b.param(
      cache, "value_cache",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, desc.layerByteOffset));
  b.param("float *", "out", desc.out);
  b.param("const int *", "past_lengths", pastArg());
  const std::string steps = addStepRows(b);
  b.call(withPaging("sits::attentionPrefill<Cfg>(query, key_cache, "
                    "value_cache, out, past_lengths, " +
                        steps + ")",
                    addPaging(b, desc.paging)));
  b.setGrid(format::ceilDiv(Expr::seq(), Expr::constant(kRows)),
            Expr::constant(desc.heads), Expr::batch());
  // attention_prefill.cuh's attentionPrefillSharedBytes: Q and two buffers
  // each of K and V, rows padded by 8 halves.
  b.setShared(2 * (d + 8) * (kRows + 4 * 64));
  return b.take();
}

std::optional<PlannedLaunch> planAttention(const AttentionLaunch &desc,
                                           std::string *error) {
  // The kernel the selection pass chose and the planner checked
  // (checkAttentionKernel).
  if (desc.kernel == kernel::KernelKind::AttentionSplit)
    return planSplitDecode(desc, *decodeSplitOf(desc));
  if (desc.kernel == kernel::KernelKind::AttentionFlash)
    return planFlashPrefill(desc);
  constexpr int64_t kThreads = 128;
  // Rows per block (query tokens x the GQA group): one token in decode; in
  // prefill up to 64 rows, bounded so that the per-thread accumulators
  // (rows * head_dim / threads) stay in registers.
  int64_t group = desc.heads / desc.kvHeads;
  int64_t queryTokens = 1;
  if (!desc.decode) {
    int64_t maxRows =
        std::max<int64_t>(group, std::min<int64_t>(64, 8192 / desc.headDim));
    queryTokens = std::max<int64_t>(1, maxRows / group);
  }
  int64_t keyTile = 64;
  auto bytes = [&]() {
    return 4 *
           attentionSharedFloats(queryTokens * group, desc.headDim, keyTile);
  };
  // Smaller tiles (then fewer tokens per block) until the block fits.
  while (bytes() > kMaxSharedBytes && keyTile > 16)
    keyTile /= 2;
  while (bytes() > kMaxSharedBytes && queryTokens > 1)
    queryTokens /= 2;
  if (bytes() > kMaxSharedBytes) {
    *error = "attention with " + std::to_string(group) +
             " query heads per KV head and head_dim " +
             std::to_string(desc.headDim) + " needs " +
             std::to_string(bytes()) +
             " bytes of shared memory per block, more than the " +
             std::to_string(kMaxSharedBytes) + " a GPU block can have";
    return std::nullopt;
  }
  LaunchBuilder b(desc.decode ? "attention_decode" : "attention_prefill",
                  "sits/attention.cuh", static_cast<int>(kThreads));
  b.typeConstant("Cache", storageStruct(desc.cacheType));
  b.intConstant("kHeads", desc.heads);
  b.intConstant("kKvHeads", desc.kvHeads);
  b.intConstant("kHeadDim", desc.headDim);
  b.intConstant("kQueryTokens", queryTokens);
  b.intConstant("kKeyTile", keyTile);
  b.intConstant("kThreads", kThreads);
  b.intConstant("kCapacity", desc.capacity);
  b.intConstant("kWindow", desc.window);
  b.intConstant("kSharedBytes", bytes());
  b.floatConstant("kScale", desc.scale);
  b.floatConstant("kSoftcap", desc.softcap);
  std::string cache = pointerType(desc.cacheType, true);
  b.param("const float *", "query", desc.query);
  b.param(cache, "key_cache",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, desc.layerByteOffset));
  b.param(
      cache, "value_cache",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, desc.layerByteOffset));
  b.param("float *", "out", desc.out);
  b.param("const int *", "past_lengths", pastArg());
  const std::string steps = addStepRows(b);
  b.call(withPaging("sits::attention<Cfg>(query, key_cache, value_cache, out, "
                    "past_lengths, " +
                        steps + ")",
                    addPaging(b, desc.paging)));
  b.setGrid(format::ceilDiv(Expr::seq(), Expr::constant(queryTokens)),
            Expr::constant(desc.kvHeads), Expr::batch());
  b.setShared(bytes());
  return b.take();
}

PlannedLaunch planElementwise(const ElementwiseLaunch &desc) {
  const int64_t kThreads = desc.threads;
  const char *family = desc.kind == ElementwiseKind::Add          ? "add"
                       : desc.kind == ElementwiseKind::Activation ? "activation"
                                                                  : "glu";
  LaunchBuilder b(family, "sits/elementwise.cuh", static_cast<int>(kThreads));
  b.intConstant("kWidth", desc.width);
  b.intConstant("kThreads", kThreads);
  b.boolConstant("kVec4", desc.width % 4 == 0);
  if (desc.kind != ElementwiseKind::Add)
    b.intConstant("kActivation", desc.activation);
  switch (desc.kind) {
  case ElementwiseKind::Add:
    b.param("const float *", "lhs", desc.lhs);
    b.param("const float *", "rhs", desc.rhs);
    b.param("float *", "out", desc.out);
    b.param("int", "tokens", tokensArg());
    b.call("sits::add<Cfg>(lhs, rhs, out, tokens)");
    break;
  case ElementwiseKind::Activation:
    b.param("const float *", "input", desc.lhs);
    b.param("float *", "out", desc.out);
    b.param("int", "tokens", tokensArg());
    b.call("sits::activation<Cfg>(input, out, tokens)");
    break;
  case ElementwiseKind::Glu:
    b.param("const float *", "gate", desc.lhs);
    b.param("const float *", "up", desc.rhs);
    b.param("float *", "out", desc.out);
    b.param("int", "tokens", tokensArg());
    b.call("sits::glu<Cfg>(gate, up, out, tokens)");
    break;
  }
  b.setGrid(format::ceilDiv(Expr::tokens() * Expr::constant(desc.width),
                            Expr::constant(4 * kThreads)));
  return b.take();
}

} // namespace sits::codegen
