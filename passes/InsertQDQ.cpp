//===- InsertQDQ.cpp - Explicit quantization of weights and the KV cache -===//
//
// Weights are quantized at compile time (round to nearest, absmax groups):
// the program reads them through sits.dequantize, which a GEMV fuses. The KV
// cache keeps the newest tokens in FP16 and older ones quantized: the program
// quantizes what the cache holds (sits.quantize of sits.kv_cache.read) and
// the attention reads the dequantized copy of a token once it has left the
// hot window. Every change names the dtype, the group size and the window.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/QuantMath.h"
#include "dialects/sits/SitsOps.h"
#include "dialects/sits/WeightView.h"
#include "passes/Audit.h"
#include "passes/Passes.h"
#include "passes/WeightData.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <cmath>
#include <map>

namespace sits {
#define GEN_PASS_DEF_INSERTQDQ
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-insert-qdq";

/// 8 or 4 for "int8"/"int4", 0 for "fp16", nothing for anything else.
std::optional<unsigned> parseBits(StringRef name) {
  if (name == "fp16")
    return 0u;
  if (name == "int8")
    return 8u;
  if (name == "int4")
    return 4u;
  return std::nullopt;
}

/// A weight quantized once (prefill and decode read the same constant).
struct QuantizedWeight {
  DenseElementsAttr data, scales;
  std::string dataName, scalesName;
  quant::QuantStats stats;
  quant::GroupLayout layout;
};

/// Ops whose weight operand is a GEMV/GEMM weight `[out, in]`.
OpOperand *weightOperandOf(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return &linear.getWeightMutable();
  if (auto head = dyn_cast<LMHeadOp>(op))
    return &head.getWeightMutable();
  return nullptr;
}

struct InsertQDQPass : public sits::impl::InsertQDQBase<InsertQDQPass> {
  using InsertQDQBase::InsertQDQBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), kPassName,
                    {"quantize_inserted", "dequantize_inserted",
                     "weights_quantized", "kv_layers_quantized"});
    std::optional<unsigned> weightBits = parseBits(weights);
    std::optional<unsigned> kvBits = parseBits(kvCache);
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      module.emitError() << kPassName << ": " << message;
      signalPassFailure();
    };
    if (!weightBits)
      return fail("weights must be fp16, int8 or int4, got '" + weights + "'");
    if (!kvBits)
      return fail("kv-cache must be fp16, int8 or int4, got '" + kvCache + "'");
    int64_t unit = *weightBits == 4 ? 32 : 16;
    if (*weightBits &&
        (weightGroup < unit || weightGroup > 65536 || weightGroup % unit))
      return fail(llvm::formatv("weight-group must be a multiple of {0} "
                                "between {0} and 65536 for {1} weights (a "
                                "group is whole 16-byte loads), got {2}",
                                unit, weights, weightGroup.getValue())
                      .str());
    if (weightScale != "absmax" && weightScale != "mse")
      return fail("weight-scale must be absmax or mse, got '" + weightScale +
                  "'");
    if (kvHotWindow < 1)
      return fail("kv-hot-window must be >= 1, got " +
                  Twine(kvHotWindow.getValue()));
    if (kvKeys != "auto" && kvKeys != "per-token" && kvKeys != "per-channel")
      return fail("kv-keys must be auto, per-token or per-channel, got '" +
                  kvKeys + "'");
    if (kvChannelBlock < 1 || kvChannelBlock > 4096)
      return fail("kv-channel-block must be between 1 and 4096, got " +
                  Twine(kvChannelBlock.getValue()));

    if (*weightBits)
      for (auto func : module.getOps<func::FuncOp>())
        if (failed(quantizeWeights(func, *weightBits, audit)))
          return signalPassFailure();
    if (*kvBits && failed(quantizeCache(module, *kvBits, audit)))
      return signalPassFailure();
  }

  //===--------------------------------------------------------------------===//
  // Weights
  //===--------------------------------------------------------------------===//

  std::map<std::pair<const void *, unsigned>, QuantizedWeight> quantized;

  /// Reads and quantizes `weight` in blocks of rows on the context's
  /// threads (an 8B model's weights take minutes on one core, and its LM
  /// head is 2 GB as f32); the statistics add up in block order, so the
  /// audit does not depend on the thread count.
  LogicalResult
  quantizeInBlocks(WeightOp weight, const quant::GroupLayout &layout,
                   ArrayRef<float> ratios, std::vector<int8_t> &data,
                   std::vector<float> &scales, quant::QuantStats &stats) {
    constexpr int64_t kBlockSlices = 64;
    const int64_t slices = quant::outerSlices(layout);
    const int64_t sliceValues = slices ? layout.numElements() / slices : 0;
    // Weights without a storage view (rare) are read whole first.
    FailureOr<WeightStorage> storage = getWeightStorage(weight.getValue());
    std::optional<std::vector<float>> whole;
    if (failed(storage)) {
      FailureOr<std::vector<float>> values = readFloatValues(weight.getValue());
      if (failed(values))
        return failure();
      whole = std::move(*values);
    }
    const int64_t blocks = (slices + kBlockSlices - 1) / kBlockSlices;
    std::vector<quant::QuantStats> blockStats(blocks);
    std::atomic<bool> unreadable{false};
    parallelFor(&getContext(), 0, blocks, [&](size_t block) {
      const int64_t begin = static_cast<int64_t>(block) * kBlockSlices;
      const int64_t end = std::min(slices, begin + kBlockSlices);
      std::vector<float> values;
      const float *x = nullptr;
      if (whole) {
        x = whole->data() + begin * sliceValues;
      } else {
        values.resize((end - begin) * sliceValues);
        if (failed(copyWeightValues(*storage, begin * sliceValues,
                                    end * sliceValues, WeightElement::F32,
                                    reinterpret_cast<char *>(values.data())))) {
          unreadable = true;
          return;
        }
        x = values.data();
      }
      quant::quantizeOuter(x, layout, begin, end, /*halfScales=*/true,
                           data.data(), scales.data(), &blockStats[block],
                           ratios);
    });
    if (unreadable)
      return failure();
    for (const quant::QuantStats &part : blockStats)
      quant::mergeStats(stats, part);
    return success();
  }

  FailureOr<QuantizedWeight *> quantizeWeight(WeightOp weight, unsigned bits,
                                              PassAudit &audit) {
    auto key = std::make_pair(weight.getValue().getAsOpaquePointer(), bits);
    auto it = quantized.find(key);
    if (it != quantized.end())
      return &it->second;
    auto type = cast<RankedTensorType>(weight.getType());
    QuantizedWeight result;
    quant::GroupLayout &layout = result.layout;
    layout.shape.assign(type.getShape().begin(), type.getShape().end());
    layout.axis = 1;
    layout.groupSize = weightGroup;
    layout.bits = bits;
    int64_t packed =
        quant::GroupLayout::packedRowBytes(type.getDimSize(1), bits);
    layout.rowBytes = (packed + 15) / 16 * 16;
    std::vector<int8_t> data(layout.numDataBytes());
    std::vector<float> scales(layout.numScales());
    // Clipping ratios 1, 0.98, ..., 0.6 for the MSE scale search.
    SmallVector<float> ratios;
    if (weightScale == "mse")
      for (int step = 0; step <= 20; ++step)
        ratios.push_back(1.0f - 0.02f * step);
    if (failed(quantizeInBlocks(weight, layout, ratios, data, scales,
                                result.stats)))
      return weight.emitError()
             << kPassName << ": cannot read the values of weight '"
             << weight.getName() << "'";
    result.data = makeI8Attr(&getContext(), layout.dataShape(), data);
    result.scales = makeFloatAttr(&getContext(), layout.scaleShape(), scales,
                                  /*half=*/true);
    result.dataName = (weight.getName() + (bits == 4 ? ".q4" : ".q8")).str();
    result.scalesName = (weight.getName() + ".scales").str();

    const quant::QuantStats &stats = result.stats;
    int64_t in = type.getDimSize(1);
    int64_t lastGroup = in % weightGroup ? in % weightGroup : weightGroup;
    double rms =
        stats.values ? std::sqrt(stats.squaredError / stats.values) : 0;
    audit.add("weights_quantized");
    audit.change(
        weight.getLoc(),
        llvm::formatv("sits.weight '{0}' [{1} x {2}] {3}", weight.getName(),
                      type.getDimSize(0), in, type.getElementType()),
        llvm::formatv("int{0} data '{1}' [{2} x {3}] (rows padded to 16 "
                      "bytes) + f16 scales '{4}' [{2} x {5}], read through "
                      "sits.dequantize (group {6})",
                      bits, result.dataName, type.getDimSize(0),
                      layout.rowBytes, result.scalesName,
                      layout.scaleShape()[1], weightGroup.getValue()),
        llvm::formatv("round to nearest even of x / s, clamped to [-{0}, {0}], "
                      "s = f16(c absmax / {0}) per group of {1} along "
                      "in_features (the last group of a row holds {2}), {3}; "
                      "|x - q s| <= s / 2 unless clipped; measured: max "
                      "|error| {4:e}, RMS error {5:e}, {6} of {7} values "
                      "clipped, scales {8:e} .. {9:e}",
                      quant::maxLevel(bits), weightGroup.getValue(), lastGroup,
                      weightScale == "mse"
                          ? "c in 1, 0.98, ..., 0.6 chosen per group for the "
                            "smallest squared error"
                          : "c = 1",
                      stats.maxAbsError, rms, stats.clipped, stats.values,
                      stats.scaleMin, stats.scaleMax));
    return &quantized.emplace(key, std::move(result)).first->second;
  }

  LogicalResult quantizeWeights(func::FuncOp func, unsigned bits,
                                PassAudit &audit) {
    // Every GEMV weight operand, grouped by the weight op it reads.
    llvm::MapVector<WeightOp, SmallVector<OpOperand *>> uses;
    WalkResult walk = func.walk([&](Operation *op) {
      OpOperand *operand = weightOperandOf(op);
      if (!operand)
        return WalkResult::advance();
      // A rank's part would need its own groups and scales: refused rather
      // than left unquantized without a word.
      if (operand->get().getDefiningOp<ShardOp>()) {
        op->emitError() << kPassName
                        << ": the weights of a tensor-parallel program are "
                           "not quantized yet (this one is a sits.shard)";
        return WalkResult::interrupt();
      }
      auto weight = operand->get().getDefiningOp<WeightOp>();
      auto type = weight ? dyn_cast<RankedTensorType>(weight.getType())
                         : RankedTensorType();
      if (type && type.getRank() == 2 && type.hasStaticShape())
        uses[weight].push_back(operand);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    OpBuilder builder(&getContext());
    for (auto &[weight, operands] : uses) {
      FailureOr<QuantizedWeight *> q = quantizeWeight(weight, bits, audit);
      if (failed(q))
        return failure();
      builder.setInsertionPointAfter(weight);
      Location loc = weight.getLoc();
      auto data = WeightOp::create(
          builder, loc, builder.getStringAttr((*q)->dataName), (*q)->data);
      auto scales = WeightOp::create(
          builder, loc, builder.getStringAttr((*q)->scalesName), (*q)->scales);
      auto dequantized = DequantizeOp::create(
          builder, loc, weight.getType(), data, scales,
          builder.getI64IntegerAttr(bits), builder.getI64IntegerAttr(1),
          builder.getI64IntegerAttr(weightGroup));
      audit.add("dequantize_inserted");
      for (OpOperand *operand : operands)
        operand->set(dequantized);
      if (weight->use_empty())
        weight.erase();
    }
    return success();
  }

  //===--------------------------------------------------------------------===//
  // KV cache
  //===--------------------------------------------------------------------===//

  /// The cache type with quantization: FP16 hot part (a 16-bit element type
  /// is kept), `bits` cold part.
  KVCacheType quantizedType(KVCacheType type, unsigned bits,
                            bool perChannelKeys) {
    MLIRContext *context = &getContext();
    Type hot = type.getElementType();
    if (hot.isF32())
      hot = Float16Type::get(context);
    auto quant = KVQuantAttr::get(
        context, IntegerType::get(context, bits),
        static_cast<unsigned>(kvHotWindow), groupSize(type),
        KVKeyGroupsAttr::get(context, perChannelKeys ? KVKeyGroups::per_channel
                                                     : KVKeyGroups::per_token),
        perChannelKeys ? static_cast<unsigned>(kvChannelBlock) : 1u,
        Float16Type::get(context));
    return KVCacheType::get(context, type.getLayers(), type.getMaxBatch(),
                            type.getKvHeads(), type.getCapacity(),
                            type.getHeadDim(), hot, type.getLayout(), quant);
  }

  static unsigned groupSize(KVCacheType type) {
    return std::min(64u, type.getHeadDim());
  }

  LogicalResult quantizeCache(ModuleOp module, unsigned bits,
                              PassAudit &audit) {
    // auto: per-channel keys for int8 and int4 (measured on llama_bytes,
    // docs/quantization.md "Quantized KV cache on the GPU").
    bool perChannelKeys = kvKeys == "per-channel" || kvKeys == "auto";
    SmallVector<func::FuncOp> steps;
    KVCacheType oldType;
    for (auto func : module.getOps<func::FuncOp>())
      for (Type input : func.getArgumentTypes())
        if (auto cache = dyn_cast<KVCacheType>(input)) {
          if (oldType && cache != oldType)
            return func.emitError()
                   << kPassName << ": the functions take different KV caches";
          oldType = cache;
          steps.push_back(func);
        }
    if (!oldType)
      return module.emitError()
             << kPassName << ": kv-cache=" << kvCache
             << " needs a program with a KV cache (run --sits-kv-cache first)";
    if (oldType.getQuant())
      return module.emitError()
             << kPassName << ": the KV cache is quantized already";
    if (kvHotWindow > oldType.getCapacity())
      return module.emitError()
             << kPassName << ": kv-hot-window " << kvHotWindow.getValue()
             << " exceeds the cache capacity (" << oldType.getCapacity()
             << " tokens, --max-seq-len)";
    KVCacheType newType = quantizedType(oldType, bits, perChannelKeys);

    std::map<int64_t, SmallVector<Location>> layerLocations;
    for (func::FuncOp func : steps) {
      retype(func, oldType, newType);
      SmallVector<KVReadOp> reads;
      func.walk([&](KVReadOp read) { reads.push_back(read); });
      for (KVReadOp read : reads) {
        if (failed(quantizeRead(read, newType, bits, perChannelKeys, audit)))
          return failure();
        layerLocations[read.getLayer()].push_back(read.getLoc());
      }
    }
    KVQuantAttr quant = newType.getQuant();
    std::string keys =
        perChannelKeys ? llvm::formatv("per channel in blocks of {0} tokens",
                                       quant.getChannelBlock())
                             .str()
                       : llvm::formatv("per token in groups of {0} channels",
                                       quant.getGroupSize())
                             .str();
    for (auto &[layer, locations] : layerLocations) {
      audit.add("kv_layers_quantized");
      audit.change(
          locations,
          llvm::formatv("layer {0}: sits.attention over a {1} KV cache of {2} "
                        "tokens",
                        layer, oldType.getElementType(), oldType.getCapacity()),
          llvm::formatv("{0} hot window of {1} tokens + int{2} cold part: "
                        "sits.quantize/sits.dequantize of the keys ({3}) and "
                        "values (per token in groups of {4} channels), f16 "
                        "scales, sits.attention cold(...) hot_window = {1}",
                        newType.getElementType(), kvHotWindow.getValue(), bits,
                        keys, quant.getGroupSize()),
          llvm::formatv(
              "scales come from each group's own values (absmax / {0}, round "
              "to nearest even); a query at position p reads value j cold "
              "when p - j >= {1}, key j when p - (last token of j's block) "
              ">= {1}, so only tokens that left the window are read "
              "quantized; rows never change after their append, so an engine "
              "that quantizes a group once, when it leaves the window, stores "
              "the values this program computes",
              quant::maxLevel(bits), kvHotWindow.getValue()));
    }
    return success();
  }

  /// Gives every value of type `from` in `func` (arguments, results of the
  /// cache ops) type `to`, and updates the function type.
  static void retype(func::FuncOp func, KVCacheType from, KVCacheType to) {
    Block &entry = func.getBody().front();
    for (BlockArgument arg : entry.getArguments())
      if (arg.getType() == from)
        arg.setType(to);
    func.walk([&](Operation *op) {
      for (OpResult result : op->getResults())
        if (result.getType() == from)
          result.setType(to);
    });
    SmallVector<Type> results;
    for (Type type : func.getResultTypes())
      results.push_back(type == from ? Type(to) : type);
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           entry.getArgumentTypes(), results));
  }

  /// Quantizes what `read` returns and makes the attentions that read it use
  /// the dequantized copies as their cold part.
  LogicalResult quantizeRead(KVReadOp read, KVCacheType cache, unsigned bits,
                             bool perChannelKeys, PassAudit &audit) {
    SmallVector<AttentionOp> attentions;
    for (Operation *user : read->getUsers()) {
      auto attention = dyn_cast<AttentionOp>(user);
      if (!attention || attention.getKey() != read.getKey() ||
          attention.getValue() != read.getValue())
        return user->emitError()
               << kPassName
               << ": a quantized cache must be read by "
                  "sits.attention (keys and values of one read), found '"
               << user->getName() << "'";
      if (attention.getColdKey() || attention.getMask())
        return attention.emitError()
               << kPassName << ": this attention has a cold part or a mask";
      // Users lists an op once per operand it reads.
      if (!llvm::is_contained(attentions, attention))
        attentions.push_back(attention);
    }
    KVQuantAttr quant = cache.getQuant();
    OpBuilder builder(read.getContext());
    builder.setInsertionPointAfter(read);
    Location loc = read.getLoc();
    auto quantized = [&](Value value, int64_t axis, int64_t group) -> Value {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> dataShape(type.getShape());
      int64_t last = dataShape.back();
      dataShape.back() = ShapedType::isDynamic(last)
                             ? last
                             : quant::GroupLayout::packedRowBytes(last, bits);
      SmallVector<int64_t> scaleShape(type.getShape());
      if (!ShapedType::isDynamic(scaleShape[axis]))
        scaleShape[axis] = (scaleShape[axis] + group - 1) / group;
      auto q = QuantizeOp::create(
          builder, loc, RankedTensorType::get(dataShape, builder.getI8Type()),
          RankedTensorType::get(scaleShape, builder.getF16Type()), value,
          builder.getI64IntegerAttr(bits), builder.getI64IntegerAttr(axis),
          builder.getI64IntegerAttr(group));
      audit.add("quantize_inserted");
      audit.add("dequantize_inserted");
      return DequantizeOp::create(
          builder, loc, type, q.getData(), q.getScales(),
          builder.getI64IntegerAttr(bits), builder.getI64IntegerAttr(axis),
          builder.getI64IntegerAttr(group));
    };
    Value coldKey = perChannelKeys
                        ? quantized(read.getKey(), 2, quant.getChannelBlock())
                        : quantized(read.getKey(), 3, quant.getGroupSize());
    Value coldValue = quantized(read.getValue(), 3, quant.getGroupSize());
    for (AttentionOp attention : attentions) {
      builder.setInsertionPoint(attention);
      auto replacement = AttentionOp::create(
          builder, attention.getLoc(), attention.getType(),
          attention.getQuery(), attention.getKey(), attention.getValue(),
          /*mask=*/Value(), attention.getPastLen(), coldKey, coldValue,
          attention.getNumHeadsAttr(), attention.getNumKvHeadsAttr(),
          attention.getScaleAttr(), attention.getCausalAttr(),
          attention.getWindowAttr(), attention.getSoftcapAttr(),
          builder.getI64IntegerAttr(quant.getHotWindow()),
          builder.getI64IntegerAttr(perChannelKeys ? quant.getChannelBlock()
                                                   : 1));
      attention.replaceAllUsesWith(replacement.getResult());
      attention.erase();
    }
    return success();
  }
};

} // namespace
