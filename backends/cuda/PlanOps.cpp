//===- PlanOps.cpp - What each op of a program becomes --------------------===//
//
// One function per kind of op: the checks that make it compilable (each
// failure names the op and its location) and the launch it becomes, or the
// buffer it is a view of. Planner.cpp decides the order and the fusions.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/ProgramPlanner.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

namespace sits::codegen::detail {

using format::DType;
using format::Expr;

/// sits.quantize of a kv_cache.read result, or sits.dequantize of one,
/// that only attention's cold operands read: the engine's cache holds the
/// cold copy (planQuantizeKV writes it), so these are views.
KVPaging kvPagingOf(func::FuncOp func, KVCacheType cacheType) {
  KVPaging paging;
  auto pages = func->getAttrOfType<kernel::KVPagesAttr>(
      kernel::KernelDialect::kKVPagesAttrName);
  if (!pages)
    return paging;
  paging.blockTokens = pages.getBlockTokens();
  paging.blocks = pages.getBlocks();
  paging.maxBlocks =
      (cacheType.getCapacity() + paging.blockTokens - 1) / paging.blockTokens;
  return paging;
}

static bool isKVColdCopy(Operation *op) {
  if (auto dequantize = dyn_cast<DequantizeOp>(op)) {
    auto quantize = dequantize.getData().getDefiningOp<QuantizeOp>();
    return quantize && quantize.getInput().getDefiningOp<KVReadOp>() &&
           llvm::all_of(dequantize->getUsers(), [&](Operation *user) {
             auto attention = dyn_cast<AttentionOp>(user);
             return attention &&
                    (attention.getColdKey() == dequantize.getResult() ||
                     attention.getColdValue() == dequantize.getResult()) &&
                    attention.getKey() != dequantize.getResult() &&
                    attention.getValue() != dequantize.getResult() &&
                    attention.getQuery() != dequantize.getResult();
           });
  }
  auto quantize = dyn_cast<QuantizeOp>(op);
  return quantize && quantize.getInput().getDefiningOp<KVReadOp>() &&
         llvm::all_of(quantize->getUsers(), [](Operation *user) {
           return isa<DequantizeOp>(user) && isKVColdCopy(user);
         });
}

LogicalResult ProgramPlanner::planOp(Operation *op) {
  if (cacheType.getQuant() && isa<QuantizeOp, DequantizeOp>(op) &&
      isKVColdCopy(op))
    return success();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<WeightOp, arith::ConstantOp>([](auto) { return success(); })
      .Case([&](DequantizeOp dequantize) {
        return checkDequantizeUsers(dequantize);
      })
      .Case([&](KVLengthOp length) -> LogicalResult {
        if (length.getCache() != func.getArgument(1) || pastLengths)
          return length.emitError()
                 << "codegen: expected one sits.kv_cache.length, of the "
                    "step's input cache";
        pastLengths = length.getResult();
        return success();
      })
      .Case([&](PositionIdsOp ids) -> LogicalResult {
        if (ids.getIds() != tokenIds)
          return ids.emitError() << "codegen: positions must be those of the "
                                    "step's token ids";
        if (failed(checkPast(ids.getPastLen(), ids)))
          return failure();
        positions.insert(ids.getResult());
        return success();
      })
      .Case([&](RopeGatherOp gather) -> LogicalResult {
        if (!positions.count(gather.getPositions()))
          return gather.emitError()
                 << "codegen: RoPE tables must be read at the step's "
                    "positions (sits.position_ids of the token ids, past "
                    "the cached length)";
        if (!gather.getTable().getDefiningOp<WeightOp>())
          return gather.emitError()
                 << "codegen: the RoPE table must be a sits.weight";
        return success();
      })
      .Case([&](EmbeddingOp embedding) -> LogicalResult {
        if (embedding.getIds() != tokenIds)
          return embedding.emitError()
                 << "codegen: the embedding must read the step's token ids";
        auto table = cast<ShapedType>(embedding.getTable().getType());
        EmbeddingLaunch desc;
        FailureOr<int64_t> threads =
            rowThreads(embedding, kernel::KernelKind::Embedding);
        if (failed(threads))
          return failure();
        desc.threads = *threads;
        desc.vocab = table.getDimSize(0);
        desc.hidden = table.getDimSize(1);
        desc.scale = embedding.getScale().convertToFloat();
        desc.weightType = options.weightType;
        FailureOr<unsigned> weight =
            weightOf(embedding.getTable(), embedding, options.weightType,
                     table.getShape());
        FailureOr<ArgBinding> out = define(embedding.getResult(), embedding);
        if (failed(weight) || failed(out))
          return failure();
        desc.table = *weight;
        desc.out = *out;
        observed.config.hidden = desc.hidden;
        addLaunch(planEmbedding(desc), {embedding});
        return success();
      })
      .Case<RMSNormOp, LayerNormOp>([&](auto norm) -> LogicalResult {
        NormLaunch desc;
        desc.isLayerNorm = isa<LayerNormOp>(norm.getOperation());
        FailureOr<int64_t> threads =
            rowThreads(norm, desc.isLayerNorm ? kernel::KernelKind::LayerNorm
                                              : kernel::KernelKind::RMSNorm);
        if (failed(threads))
          return failure();
        desc.threads = *threads;
        auto weightType = cast<ShapedType>(norm.getWeight().getType());
        if (weightType.getRank() != 1)
          return norm.emitError() << "codegen: norm weights must be 1-D";
        desc.hidden = weightType.getDimSize(0);
        desc.epsilon = norm.getEpsilon().convertToFloat();
        if constexpr (std::is_same_v<decltype(norm), RMSNormOp>) {
          desc.weightOffset = norm.getWeightOffset().convertToFloat();
          if (int bits =
                  getOperandBits(kernel::getOuterValue(norm.getResult()))) {
            desc.operandBits = bits;
            desc.operandType = options.weightType;
          }
        } else if (norm.getBias()) {
          FailureOr<unsigned> bias =
              weightOf(norm.getBias(), norm, DType::F32, {desc.hidden});
          if (failed(bias))
            return failure();
          desc.bias = *bias;
        }
        FailureOr<int64_t> width = tokenWidth(norm.getInput(), norm);
        if (failed(width))
          return failure();
        if (*width % desc.hidden != 0)
          return norm.emitError() << "codegen: the normalized dimension "
                                  << desc.hidden << " does not divide the "
                                  << "activation width " << *width;
        FailureOr<unsigned> weight =
            weightOf(norm.getWeight(), norm, DType::F32, {desc.hidden});
        FailureOr<ArgBinding> input = use(norm.getInput(), norm);
        FailureOr<ArgBinding> out = define(norm.getResult(), norm);
        if (failed(weight) || failed(input) || failed(out))
          return failure();
        desc.weight = *weight;
        desc.input = *input;
        desc.out = *out;
        observed.config.norm = desc.isLayerNorm ? "layer_norm" : "rms_norm";
        PlannedLaunch planned = planNorm(desc);
        // One block per normalized row: a per-head norm (QK-norm) has
        // several rows per token.
        planned.launch.grid[0] =
            Expr::tokens() * Expr::constant(*width / desc.hidden);
        addLaunch(std::move(planned), {norm});
        return success();
      })
      .Case([&](LinearOp linear) { return planLinears({linear}); })
      .Case([&](LMHeadOp head) { return planLMHead(head); })
      .Case([&](TVCLMHeadOp head) { return planTVCHead(head); })
      .Case<AddOp, ActivationOp, GLUOp>([&](auto elementwise) -> LogicalResult {
        ElementwiseLaunch desc;
        Operation *raw = elementwise.getOperation();
        FailureOr<int64_t> threads =
            rowThreads(raw, kernel::KernelKind::Elementwise);
        if (failed(threads))
          return failure();
        desc.threads = *threads;
        desc.kind = isa<AddOp>(raw)          ? ElementwiseKind::Add
                    : isa<ActivationOp>(raw) ? ElementwiseKind::Activation
                                             : ElementwiseKind::Glu;
        if (auto act = dyn_cast<ActivationOp>(raw))
          desc.activation = static_cast<int>(act.getKind());
        if (auto glu = dyn_cast<GLUOp>(raw)) {
          desc.activation = static_cast<int>(glu.getKind());
          observed.config.activation = stringifyActivation(glu.getKind()).str();
        }
        FailureOr<int64_t> width = tokenWidth(raw->getResult(0), raw);
        if (failed(width))
          return failure();
        desc.width = *width;
        FailureOr<ArgBinding> lhs = use(raw->getOperand(0), raw);
        if (failed(lhs))
          return failure();
        desc.lhs = *lhs;
        if (raw->getNumOperands() > 1) {
          FailureOr<ArgBinding> rhs = use(raw->getOperand(1), raw);
          if (failed(rhs))
            return failure();
          desc.rhs = *rhs;
        }
        FailureOr<ArgBinding> out = define(raw->getResult(0), raw);
        if (failed(out))
          return failure();
        desc.out = *out;
        addLaunch(planElementwise(desc), {raw});
        return success();
      })
      .Case<SplitHeadsOp, MergeHeadsOp>([&](auto view) -> LogicalResult {
        // Heads are a view of the token-major buffer:
        // [b, h, s, d] lives at token b * S + s, column h * head_dim + d.
        auto it = activations.find(kernel::getInnerValue(view.getInput()));
        if (it == activations.end())
          return failed(use(view.getInput(), view)) ? failure() : success();
        FailureOr<int64_t> width = tokenWidth(view.getResult(), view);
        if (failed(width))
          return failure();
        activations[view.getResult()] = it->second;
        return success();
      })
      .Case([&](RopeOp rope) -> LogicalResult {
        FailureOr<RopeConfig> config = ropeConfigOf(rope);
        if (failed(config))
          return failure();
        RopeLaunch desc;
        desc.rope = *config;
        FailureOr<int64_t> threads = rowThreads(rope, kernel::KernelKind::Rope);
        if (failed(threads))
          return failure();
        desc.threads = *threads;
        FailureOr<ArgBinding> input = use(rope.getInput(), rope);
        FailureOr<ArgBinding> out = define(rope.getResult(), rope);
        if (failed(input) || failed(out))
          return failure();
        desc.input = *input;
        desc.out = *out;
        addLaunch(planRope(desc), {rope});
        return success();
      })
      .Case([&](KVAppendOp append) {
        return planAppend(append, nullptr, nullptr);
      })
      .Case([&](KVReadOp read) -> LogicalResult {
        cacheReads[read.getKey()] = {read, true};
        cacheReads[read.getValue()] = {read, false};
        return success();
      })
      .Case([&](AttentionOp attention) { return planAttention(attention); })
      .Case([&](KVAdvanceOp advance) -> LogicalResult {
        if (advance.getIds() != tokenIds)
          return advance.emitError()
                 << "codegen: the cache must advance by the step's tokens";
        return success();
      })
      .Case([&](func::ReturnOp ret) { return planReturn(ret); })
      .Default([&](Operation *other) -> LogicalResult {
        std::string hint;
        if (isa<RopeCosSinOp>(other))
          hint = " (run --sits-hoist-rope first: codegen reads precomputed "
                 "RoPE tables)";
        else if (other->getDialect() &&
                 other->getDialect()->getNamespace() == "onnx")
          hint = " (an ONNX op that raising did not turn into a sits op)";
        return other->emitError()
               << "codegen: cannot compile '" << other->getName()
               << "': no GPU kernel implements it" << hint;
      });
}

FailureOr<LinearSegment> ProgramPlanner::linearSegment(Operation *op,
                                                       Value weight, Value bias,
                                                       LinearLaunch &desc) {
  const int64_t k = desc.k;
  auto weightType = cast<ShapedType>(weight.getType());
  if (weightType.getRank() != 2 || weightType.getDimSize(1) != k)
    return op->emitError() << "codegen: expected a weight [out, " << k
                           << "], got " << weightType;
  LinearSegment segment;
  segment.rows = weightType.getDimSize(0);
  LinearQuant quant;
  if (auto dequantize = weight.getDefiningOp<DequantizeOp>()) {
    FailureOr<LinearQuant> found = quantizedWeight(op, dequantize, k, segment);
    if (failed(found))
      return failure();
    quant = *found;
  } else {
    FailureOr<unsigned> index =
        weightOf(weight, op, options.weightType, weightType.getShape());
    if (failed(index))
      return failure();
    segment.weight = *index;
  }
  if (desc.segments.empty())
    desc.quant = quant;
  else if (quant.bits != desc.quant.bits || quant.group != desc.quant.group)
    return op->emitError() << "codegen: the linear layers of one launch must "
                              "have the same weight quantization";
  if (bias) {
    FailureOr<unsigned> biasIndex =
        weightOf(bias, op, DType::F32, {segment.rows});
    if (failed(biasIndex))
      return failure();
    segment.bias = *biasIndex;
    observed.config.hasLinearBias = true;
  }
  return segment;
}

LogicalResult ProgramPlanner::planLinears(ArrayRef<LinearOp> linears) {
  LinearLaunch desc;
  desc.decode = program.gemvLinears;
  desc.weightType = options.weightType;
  desc.tensorCores = hasTensorCores();
  LinearOp first = linears.front();
  auto inputType = dyn_cast<RankedTensorType>(first.getInput().getType());
  if (!inputType || inputType.getRank() != 3)
    return first.emitError() << "codegen: a linear layer's input must be "
                                "token-major [batch, seq, features], got "
                             << first.getInput().getType();
  FailureOr<int64_t> k = tokenWidth(first.getInput(), first);
  if (failed(k))
    return failure();
  desc.k = *k;
  FailureOr<ArgBinding> input = linearInput(first.getInput(), first, desc);
  if (failed(input))
    return failure();
  desc.input = *input;
  SmallVector<Operation *> ops;
  for (LinearOp linear : linears) {
    FailureOr<LinearSegment> segment =
        linearSegment(linear, linear.getWeight(), linear.getBias(), desc);
    if (failed(segment))
      return failure();
    FailureOr<ArgBinding> out = define(linear.getResult(), linear);
    if (failed(out))
      return failure();
    segment->out = *out;
    desc.segments.push_back(*segment);
    ops.push_back(linear);
  }
  return addLinearLaunch(std::move(desc), ops);
}

LogicalResult ProgramPlanner::planGatedLinear(GLUOp glu, LinearOp gate,
                                              LinearOp up) {
  LinearLaunch desc;
  desc.decode = program.gemvLinears;
  desc.weightType = options.weightType;
  desc.tensorCores = hasTensorCores();
  desc.epilogue = LinearEpilogue::Glu;
  desc.activation = static_cast<int>(glu.getKind());
  FailureOr<int64_t> k = tokenWidth(gate.getInput(), gate);
  if (failed(k))
    return failure();
  desc.k = *k;
  FailureOr<ArgBinding> input = linearInput(gate.getInput(), gate, desc);
  if (failed(input))
    return failure();
  desc.input = *input;
  for (LinearOp linear : {gate, up}) {
    FailureOr<LinearSegment> segment =
        linearSegment(linear, linear.getWeight(), linear.getBias(), desc);
    if (failed(segment))
      return failure();
    desc.segments.push_back(*segment);
  }
  FailureOr<ArgBinding> out = define(glu.getResult(), glu);
  if (failed(out))
    return failure();
  desc.segments[0].out = *out;
  desc.outputOperandBits =
      getOperandBits(kernel::getOuterValue(glu.getResult()));
  observed.config.intermediate = desc.segments[0].rows;
  observed.config.activation = stringifyActivation(glu.getKind()).str();
  return addLinearLaunch(std::move(desc), {gate, up, glu});
}

LogicalResult ProgramPlanner::planResidualLinear(AddOp add, LinearOp linear,
                                                 Value residual) {
  LinearLaunch desc;
  desc.decode = program.gemvLinears;
  desc.weightType = options.weightType;
  desc.tensorCores = hasTensorCores();
  desc.epilogue = LinearEpilogue::Residual;
  FailureOr<int64_t> k = tokenWidth(linear.getInput(), linear);
  if (failed(k))
    return failure();
  desc.k = *k;
  FailureOr<ArgBinding> input = linearInput(linear.getInput(), linear, desc);
  FailureOr<ArgBinding> residualArg = use(residual, add);
  if (failed(input) || failed(residualArg))
    return failure();
  desc.input = *input;
  desc.residual = *residualArg;
  FailureOr<LinearSegment> segment =
      linearSegment(linear, linear.getWeight(), linear.getBias(), desc);
  if (failed(segment))
    return failure();
  FailureOr<ArgBinding> out = define(add.getResult(), add);
  if (failed(out))
    return failure();
  segment->out = *out;
  desc.segments.push_back(*segment);
  return addLinearLaunch(std::move(desc), {linear, add});
}

LogicalResult ProgramPlanner::planLMHead(LMHeadOp head) {
  if (logits)
    return head.emitError() << "codegen: a step has one LM head";
  Value headLogits = kernel::getOuterValue(head.getResult());
  if (!headLogits.hasOneUse() ||
      !isa<func::ReturnOp>(*headLogits.getUsers().begin()))
    return head.emitError()
           << "codegen: the LM head's logits must be returned and used by "
              "nothing else (the engine computes only each sequence's last "
              "token)";
  LinearLaunch desc;
  desc.decode = true;
  desc.gatherLast = true;
  desc.weightType = options.weightType;
  desc.tensorCores = hasTensorCores();
  auto inputType = dyn_cast<RankedTensorType>(head.getInput().getType());
  if (!inputType || inputType.getRank() != 3)
    return head.emitError() << "codegen: the LM head's input must be "
                               "[batch, seq, hidden]";
  FailureOr<int64_t> k = tokenWidth(head.getInput(), head);
  if (failed(k))
    return failure();
  desc.k = *k;
  FailureOr<ArgBinding> input = linearInput(head.getInput(), head, desc);
  if (failed(input))
    return failure();
  desc.input = *input;
  FailureOr<LinearSegment> segment =
      linearSegment(head, head.getWeight(), head.getBias(), desc);
  if (failed(segment))
    return failure();
  segment->out = ArgBinding::bufferArg(BufferKind::Logits);
  desc.segments.push_back(*segment);
  observed.config.vocab = segment->rows;
  observed.config.tiedLMHead = head.getTied();
  logits = head.getResult();
  return addLinearLaunch(std::move(desc), {head});
}

FailureOr<RopeConfig> ProgramPlanner::ropeConfigOf(RopeOp rope) {
  auto gather = rope.getCos().getDefiningOp<RopeGatherOp>();
  if (!gather || rope.getSin() != gather.getSin() ||
      rope.getCos() != gather.getCos() ||
      !positions.count(gather.getPositions()))
    return rope.emitError()
           << "codegen: cos and sin must come from one sits.rope_gather of a "
              "precomputed table at the step's positions";
  auto input = dyn_cast<RankedTensorType>(rope.getInput().getType());
  if (!input || input.getRank() != 4 || input.isDynamicDim(1) ||
      input.isDynamicDim(3))
    return rope.emitError() << "codegen: RoPE's input must be "
                               "[batch, heads, seq, head_dim] with static "
                               "heads and head_dim";
  auto table = cast<ShapedType>(gather.getTable().getType());
  RopeConfig config;
  config.heads = input.getDimSize(1);
  config.headDim = input.getDimSize(3);
  config.rotaryDim = rope.getRotaryDim();
  config.interleaved = rope.getStyle() == RopeStyle::interleaved;
  config.tableRows = table.getDimSize(0);
  if (table.getRank() != 2 || table.getDimSize(1) != config.rotaryDim)
    return rope.emitError()
           << "codegen: the RoPE table " << table << " must have rotary_dim ("
           << config.rotaryDim << ") columns";
  FailureOr<unsigned> weight =
      weightOf(gather.getTable(), rope, DType::F32, table.getShape());
  if (failed(weight))
    return failure();
  config.table = *weight;
  observed.config.rotaryDim = config.rotaryDim;
  observed.config.ropeStyle = stringifyRopeStyle(rope.getStyle()).str();
  return config;
}

FailureOr<int64_t> ProgramPlanner::rowThreads(Operation *op,
                                              kernel::KernelKind kernel) {
  Operation *owner = kernel::getEnclosingLaunch(op);
  if (!owner)
    owner = op;
  auto config = owner->getAttrOfType<kernel::ConfigAttr>(
      kernel::KernelDialect::kConfigAttrName);
  if (!config)
    return owner->emitError()
           << "codegen: no '" << kernel::KernelDialect::kConfigAttrName
           << "' says which kernel runs this launch (the pass "
              "--kernel-configure-launches chooses it)";
  if (config.getKernel() != kernel)
    return owner->emitError()
           << "codegen: cannot launch " << config << ": the op runs the "
           << kernel::stringifyKernelKind(kernel) << " kernel";
  if (config.getKSplits() != 1)
    return owner->emitError()
           << "codegen: cannot launch " << config << ": only gemm_tc splits K";
  return config.getThreads();
}

LogicalResult ProgramPlanner::planAppend(KVAppendOp append, RopeOp keyRope,
                                         RopeOp queryRope) {
  int64_t layer = static_cast<int64_t>(append.getLayer());
  if (append.getCache().getType() != cacheType ||
      layer >= static_cast<int64_t>(cacheType.getLayers()))
    return append.emitError() << "codegen: layer " << layer
                              << " is not a layer of the step's cache";
  if (!appendedLayers.insert(layer).second)
    return append.emitError() << "codegen: layer " << layer
                              << " of the cache is appended twice in one step";
  if (failed(checkPast(append.getPastLen(), append)))
    return failure();
  AppendLaunch desc;
  FailureOr<int64_t> threads = rowThreads(append, kernel::KernelKind::AppendKV);
  if (failed(threads))
    return failure();
  desc.threads = *threads;
  desc.layer = layer;
  desc.kvHeads = cacheType.getKvHeads();
  desc.headDim = cacheType.getHeadDim();
  desc.capacity = cacheType.getCapacity();
  desc.paging = paging;
  desc.cacheType = options.weightType;
  desc.layerByteOffset = cacheLayerByteOffset(layer);
  format::KVCacheConfig kv = kvCacheConfigOf(
      cacheType, options.weightType, observed.config.maxPrefillTokens, paging);
  if (kv.coldBits) {
    if (std::optional<std::string> error = checkKVQuant(kv))
      return append.emitError() << "codegen: " << *error;
    // The append writes the hot ring, which is per sequence in either
    // layout; quantize_kv writes the (paged) cold rows.
    desc.paging = KVPaging();
    desc.hotRows = kv.hotRows;
    desc.cacheType = kv.dtype;
    desc.layerByteOffset = layer * kv.quantLayout(true).layerBytes;
  }
  for (Value operand : {append.getKey(), append.getValue()}) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || type.getRank() != 4 || type.getDimSize(1) != desc.kvHeads ||
        type.getDimSize(3) != desc.headDim)
      return append.emitError()
             << "codegen: keys and values must be [batch, " << desc.kvHeads
             << ", seq, " << desc.headDim << "] as the cache holds them, got "
             << operand.getType();
  }
  SmallVector<Operation *> ops;
  if (keyRope) {
    FailureOr<RopeConfig> config = ropeConfigOf(keyRope);
    FailureOr<ArgBinding> key = use(keyRope.getInput(), keyRope);
    if (failed(config) || failed(key))
      return failure();
    desc.keyRope = *config;
    desc.key = *key;
    ops.push_back(keyRope);
  } else {
    FailureOr<ArgBinding> key = use(append.getKey(), append);
    if (failed(key))
      return failure();
    desc.key = *key;
  }
  FailureOr<ArgBinding> value = use(append.getValue(), append);
  if (failed(value))
    return failure();
  desc.value = *value;
  if (queryRope) {
    FailureOr<RopeConfig> config = ropeConfigOf(queryRope);
    FailureOr<ArgBinding> query = use(queryRope.getInput(), queryRope);
    if (failed(config) || failed(query))
      return failure();
    FailureOr<ArgBinding> out = define(queryRope.getResult(), queryRope);
    if (failed(out))
      return failure();
    desc.queryRope = *config;
    desc.query = *query;
    desc.queryOut = *out;
    ops.push_back(queryRope);
  }
  ops.push_back(append);
  addLaunch(codegen::planAppend(desc), ops);
  // Tokens leaving the hot window are quantized once this step's rows are
  // in the ring.
  if (kv.coldBits)
    addLaunch(planQuantizeKV(kv, layer, paging), {append});
  return success();
}

LogicalResult ProgramPlanner::planAttention(AttentionOp attention) {
  auto keyRead = cacheReads.find(attention.getKey());
  auto valueRead = cacheReads.find(attention.getValue());
  if (keyRead == cacheReads.end() || valueRead == cacheReads.end() ||
      !keyRead->second.second || valueRead->second.second ||
      keyRead->second.first != valueRead->second.first)
    return attention.emitError()
           << "codegen: attention must read its keys and values from one "
              "sits.kv_cache.read (run --sits-kv-cache first)";
  if (attention.getMask())
    return attention.emitError()
           << "codegen: attention with a mask operand is not supported (the "
              "causal mask should have been folded into the causal rule)";
  if (attention.getCausal() != CausalMode::bottom_right)
    return attention.emitError()
           << "codegen: attention over the KV cache must be causal "
              "bottom_right, got '"
           << stringifyCausalMode(attention.getCausal()) << "'";
  if (failed(checkPast(attention.getPastLen(), attention)))
    return failure();
  int64_t layer = static_cast<int64_t>(keyRead->second.first.getLayer());
  if (!appendedLayers.count(layer))
    return attention.emitError()
           << "codegen: attention reads layer " << layer
           << " of the cache before this step's keys and values were "
              "appended to it";
  auto query = dyn_cast<RankedTensorType>(attention.getQuery().getType());
  if (!query || query.getRank() != 4 || query.isDynamicDim(1) ||
      query.getDimSize(1) != attention.getNumHeads() ||
      query.getDimSize(3) != cacheType.getHeadDim() ||
      attention.getNumKvHeads() != cacheType.getKvHeads() ||
      attention.getNumHeads() % attention.getNumKvHeads() != 0)
    return attention.emitError()
           << "codegen: query " << attention.getQuery().getType()
           << " does not fit " << attention.getNumHeads() << " heads over "
           << cacheType.getKvHeads() << " cached KV heads of dimension "
           << cacheType.getHeadDim();

  AttentionLaunch desc;
  desc.decode = program.isDecode;
  desc.layer = layer;
  desc.heads = attention.getNumHeads();
  desc.kvHeads = attention.getNumKvHeads();
  desc.headDim = cacheType.getHeadDim();
  desc.capacity = cacheType.getCapacity();
  desc.paging = paging;
  desc.cacheType = options.weightType;
  desc.layerByteOffset = cacheLayerByteOffset(layer);
  format::KVCacheConfig kv = kvCacheConfigOf(
      cacheType, options.weightType, observed.config.maxPrefillTokens, paging);
  if (kv.coldBits) {
    // The cold operands must be the cache's own quantization of this read.
    std::optional<uint64_t> hot = attention.getHotWindow();
    int64_t block = attention.getColdKeyBlock();
    if (!attention.getColdKey() || !hot || *hot != kv.hotWindow ||
        block != static_cast<int64_t>(kv.channelBlock) ||
        !isKVColdCopy(attention.getColdKey().getDefiningOp()) ||
        !isKVColdCopy(attention.getColdValue().getDefiningOp()))
      return attention.emitError()
             << "codegen: attention over a quantized KV cache must read the "
                "cache's cold copy (sits.quantize of its kv_cache.read) with "
                "hot_window "
             << kv.hotWindow << " and cold_key_block " << kv.channelBlock;
    desc.cacheType = kv.dtype;
  } else if (attention.getColdKey()) {
    return attention.emitError()
           << "codegen: attention with a cold part needs a quantized KV cache";
  }
  desc.scale = attention.getScale().convertToFloat();
  if (std::optional<APFloat> softcap = attention.getSoftcap()) {
    desc.softcap = softcap->convertToFloat();
    if (!(desc.softcap > 0.0f))
      return attention.emitError() << "codegen: softcap must be positive";
  }
  if (std::optional<uint64_t> window = attention.getWindow()) {
    if (*window == 0 || *window > (1u << 30))
      return attention.emitError()
             << "codegen: the sliding window must be between 1 and 2^30";
    desc.window = static_cast<int64_t>(*window);
  }
  desc.tensorCores = hasTensorCores();
  FailureOr<ArgBinding> queryArg = use(attention.getQuery(), attention);
  desc.sixteenBitMath = options.weightType != DType::F32;
  FailureOr<ArgBinding> out = define(attention.getResult(), attention);
  if (failed(queryArg) || failed(out))
    return failure();
  desc.query = *queryArg;
  desc.out = *out;
  auto kernelConfig = attention->getAttrOfType<kernel::ConfigAttr>(
      kernel::KernelDialect::kConfigAttrName);
  if (!kernelConfig)
    return attention.emitError()
           << "codegen: no '" << kernel::KernelDialect::kConfigAttrName
           << "' says which kernel runs this attention (the pass "
              "--kernel-select-attention-kernels chooses it)";
  if (std::string why = checkAttentionKernel(desc, kv, kernelConfig.getKernel(),
                                             kernelConfig.getSplitKeys());
      !why.empty())
    return attention.emitError()
           << "codegen: cannot launch " << kernelConfig << ": " << why;
  if (kernelConfig.getKSplits() != 1)
    return attention.emitError() << "codegen: cannot launch " << kernelConfig
                                 << ": only gemm_tc splits K";
  desc.kernel = kernelConfig.getKernel();
  desc.splitKeys = kernelConfig.getSplitKeys();
  if (desc.splitKeys != 0) {
    std::optional<DecodeSplit> split = decodeSplitOf(desc);
    uint64_t width = static_cast<uint64_t>(split->partialWidth);
    FailureOr<ArgBinding> partial =
        scratch("partial results of " + describeOp(attention), width,
                static_cast<uint64_t>(program.maxTokens) * width * 4);
    if (failed(partial))
      return failure();
    desc.partial = *partial;
    desc.counters = ArgBinding::bufferArg(BufferKind::Counters);
    observed.counterInts = std::max<uint64_t>(
        observed.counterInts,
        static_cast<uint64_t>(cacheType.getMaxBatch()) * desc.kvHeads);
  }
  std::string error;
  std::optional<PlannedLaunch> planned =
      kv.coldBits ? planAttentionKVQ(desc, kv, &error)
                  : codegen::planAttention(desc, &error);
  if (!planned)
    return attention.emitError() << "codegen: " << error;
  ModelConfig &config = observed.config;
  if (!observed.sawAttention) {
    config.heads = desc.heads;
    config.kvHeads = desc.kvHeads;
    config.window = desc.window;
    config.softcap = desc.softcap;
    observed.sawAttention = true;
  }
  addLaunch(std::move(*planned), {attention});
  return success();
}

LogicalResult ProgramPlanner::planReturn(func::ReturnOp ret) {
  if (ret.getNumOperands() != 2 || !logits ||
      kernel::getInnerValue(ret.getOperand(0)) != logits ||
      !ret.getOperand(1).getDefiningOp<KVAdvanceOp>())
    return ret.emitError()
           << "codegen: @" << func.getSymName()
           << " must return the logits of a sits.lm_head and the advanced "
              "KV cache";
  return success();
}

} // namespace sits::codegen::detail
