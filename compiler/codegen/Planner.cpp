//===- Planner.cpp - From the optimized program to launches ---------------===//
//
// Walks @prefill and @decode op by op and maps each op to a kernel launch or
// to a view of a buffer that exists already:
//
//   sits.embedding, rms_norm, layer_norm      one launch each
//   sits.linear                               gemv (decode) / gemm (prefill)
//   sits.lm_head                              gemv over each sequence's last
//                                             new token, into `logits`
//   sits.add, activation, glu                 elementwise (unless fused)
//   sits.rope                                 rope (unless fused)
//   sits.kv_cache.append                      append_kv (with fused RoPE)
//   sits.attention                            attention over the cache
//   split_heads, merge_heads, kv_cache.read   views (no launch)
//   kv_cache.length, position_ids,            the past_lengths buffer,
//   rope_gather                               read by the kernels
//   kv_cache.advance                          nothing: the runtime advances
//
// Fusions (each checked on the use-def chains, never assumed):
//   * linears that read the same input: one launch (Q, K and V);
//   * glu(linear(x, Wg), linear(x, Wu)): one gated launch (gate/up MLP);
//   * add(linear(...), r): the residual in the linear's epilogue;
//   * rope of the keys into the KV-cache write, and rope of the query that
//     the same layer's attention reads, into the same kernel;
//   * decode: rms_norm into the one tensor-core GEMV launch that reads it
//     (its only users), which normalizes x as it loads it.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ProgramPlanner.h"

#include "llvm/Support/Path.h"

using namespace mlir;

namespace sits::codegen {

using format::DType;
using format::Expr;

ArgBinding ArgBinding::bufferArg(BufferKind buffer, unsigned index,
                                 uint64_t byteOffset) {
  ArgBinding arg;
  arg.kind = Kind::Buffer;
  arg.buffer = buffer;
  arg.index = index;
  arg.byteOffset = byteOffset;
  return arg;
}

ArgBinding ArgBinding::int32(Expr expr) {
  ArgBinding arg;
  arg.kind = Kind::Int32;
  arg.expr = std::move(expr);
  return arg;
}

std::string KernelSpec::getKey() const {
  std::string key = family + "|" + header + "|" + call + "|" +
                    std::to_string(threads) + "|" + std::to_string(minBlocks) +
                    (callWaitsForPredecessors ? "|waits" : "");
  for (const std::string &line : config)
    key += "|" + line;
  for (const KernelParam &param : params)
    key += "|" + param.type + " " + param.name;
  for (const std::string &line : body)
    key += "|" + line;
  return key;
}

namespace detail {

std::string describeLocation(Location loc) {
  std::string out;
  std::function<void(Location)> visit = [&](Location l) {
    if (auto name = dyn_cast<NameLoc>(l)) {
      out += (out.empty() ? "" : ", ") + name.getName().str();
    } else if (auto fused = dyn_cast<FusedLoc>(l)) {
      for (Location inner : fused.getLocations())
        visit(inner);
    } else if (auto file = dyn_cast<FileLineColLoc>(l)) {
      out += (out.empty() ? "" : ", ") +
             llvm::sys::path::filename(file.getFilename().getValue()).str() +
             ":" + std::to_string(file.getLine());
    } else if (auto callSite = dyn_cast<CallSiteLoc>(l)) {
      visit(callSite.getCallee());
    }
  };
  visit(loc);
  if (out.size() > 120)
    out = out.substr(0, 117) + "...";
  return out;
}

std::string describeOp(Operation *op) {
  std::string where = describeLocation(op->getLoc());
  return op->getName().getStringRef().str() +
         (where.empty() ? "" : " (" + where + ")");
}

FailureOr<int64_t> ProgramPlanner::tokenWidth(Value value, Operation *user) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || (type.getRank() != 3 && type.getRank() != 4))
    return user->emitError()
           << "codegen: expected an activation [batch, seq, width] or "
              "[batch, heads, seq, head_dim], got "
           << value.getType();
  int64_t width = type.getRank() == 3
                      ? type.getDimSize(2)
                      : (type.isDynamicDim(1) || type.isDynamicDim(3)
                             ? ShapedType::kDynamic
                             : type.getDimSize(1) * type.getDimSize(3));
  if (ShapedType::isDynamic(width) || width <= 0)
    return user->emitError() << "codegen: the activation " << value.getType()
                             << " needs static feature dimensions";
  return width;
}

FailureOr<ArgBinding> ProgramPlanner::use(Value value, Operation *user) {
  auto it = activations.find(value);
  if (it == activations.end()) {
    Operation *def = value.getDefiningOp();
    return user->emitError()
           << "codegen: operand " << value.getType() << " of "
           << user->getName() << " is "
           << (def ? "produced by '" + def->getName().getStringRef().str() +
                         "', which codegen does not keep as an activation"
                   : std::string("a function argument that is not an "
                                 "activation"));
  }
  WorkspaceValue &stored = program.values[it->second];
  stored.lastLaunch = std::max(stored.lastLaunch, currentLaunch());
  return ArgBinding::bufferArg(BufferKind::Workspace, it->second);
}

FailureOr<ArgBinding> ProgramPlanner::define(Value value, Operation *producer) {
  FailureOr<int64_t> width = tokenWidth(value, producer);
  if (failed(width))
    return failure();
  WorkspaceValue stored;
  stored.name = describeOp(producer);
  stored.width = static_cast<uint64_t>(*width);
  stored.bytes = static_cast<uint64_t>(program.maxTokens) * stored.width * 4;
  stored.firstLaunch = stored.lastLaunch = currentLaunch();
  program.values.push_back(std::move(stored));
  unsigned index = static_cast<unsigned>(program.values.size() - 1);
  activations[value] = index;
  return ArgBinding::bufferArg(BufferKind::Workspace, index);
}

ArgBinding ProgramPlanner::scratch(const std::string &name, int64_t width) {
  WorkspaceValue stored;
  stored.name = name;
  stored.width = static_cast<uint64_t>(width);
  stored.bytes = static_cast<uint64_t>(program.maxTokens) * stored.width * 4;
  stored.firstLaunch = stored.lastLaunch = currentLaunch();
  program.values.push_back(std::move(stored));
  return ArgBinding::bufferArg(
      BufferKind::Workspace, static_cast<unsigned>(program.values.size() - 1));
}

FailureOr<unsigned> ProgramPlanner::weightOf(Value value, Operation *user,
                                             DType type,
                                             ArrayRef<int64_t> shape) {
  auto weight = value.getDefiningOp<WeightOp>();
  if (!weight)
    return user->emitError()
           << "codegen: the weights of " << user->getName()
           << " must come from a sits.weight (a constant of the model)";
  auto weightType = cast<ShapedType>(weight.getType());
  if (weightType.getShape() != shape)
    return user->emitError() << "codegen: weight '" << weight.getName()
                             << "' has shape " << weightType << ", expected "
                             << shape.size() << "-D "
                             << "shape [" <<
           [&] {
             std::string s;
             for (int64_t d : shape)
               s += (s.empty() ? "" : "x") + std::to_string(d);
             return s;
           }() << "]";
  return weights.bind(weight, type);
}

LogicalResult ProgramPlanner::checkPast(Value past, Operation *user) {
  if (past && past == pastLengths)
    return success();
  return user->emitError()
         << "codegen: past_len must be the sits.kv_cache.length of the step's "
            "cache (the kernels read it from the past_lengths buffer)";
}

void ProgramPlanner::addLaunch(PlannedLaunch planned,
                               ArrayRef<Operation *> ops) {
  std::string what;
  for (Operation *op : ops)
    what += (what.empty() ? "" : " + ") + describeOp(op);
  planned.launch.kernel =
      kernels.add(std::move(planned.spec), program.name + ": " + what);
  planned.launch.description = what;
  program.launches.push_back(std::move(planned.launch));
}

//===----------------------------------------------------------------------===//
// Fusions
//===----------------------------------------------------------------------===//

/// The linear that produces `value` for this single use, or null.
static LinearOp singleUseLinear(Value value) {
  auto linear = value.getDefiningOp<LinearOp>();
  if (!linear || !linear.getResult().hasOneUse())
    return nullptr;
  auto type = dyn_cast<RankedTensorType>(linear.getInput().getType());
  return type && type.getRank() == 3 ? linear : nullptr;
}

/// Bits and group size of a weight read through sits.dequantize ({0, 0}:
/// not quantized). Linears share a launch only with equal keys.
static std::pair<int64_t, int64_t> quantKey(Value weight) {
  if (auto dequantize = weight.getDefiningOp<DequantizeOp>())
    return {static_cast<int64_t>(dequantize.getBits()),
            static_cast<int64_t>(dequantize.getGroupSize())};
  return {0, 0};
}

void ProgramPlanner::fuseGatedLinears(GLUOp glu) {
  LinearOp gate = singleUseLinear(glu.getGate());
  LinearOp up = singleUseLinear(glu.getUp());
  if (!gate || !up || gate == up || absorbed.count(gate) ||
      absorbed.count(up) || gate.getInput() != up.getInput() ||
      gate.getWeight().getType() != up.getWeight().getType() ||
      quantKey(gate.getWeight()) != quantKey(up.getWeight()))
    return;
  absorbed.insert(gate);
  absorbed.insert(up);
  launchOf[gate] = launchOf[up] = glu;
  anchors[glu] = [=]() { return planGatedLinear(glu, gate, up); };
}

void ProgramPlanner::fuseResidual(AddOp add) {
  for (unsigned index : {1u, 0u}) {
    LinearOp linear = singleUseLinear(add->getOperand(index));
    Value residual = add->getOperand(1 - index);
    if (!linear || absorbed.count(linear) || residual == linear.getResult())
      continue;
    absorbed.insert(linear);
    launchOf[linear] = add;
    anchors[add] = [=]() { return planResidualLinear(add, linear, residual); };
    return;
  }
}

void ProgramPlanner::groupLinears() {
  // By input (and weight quantization, which one launch shares).
  llvm::MapVector<std::pair<Value, std::pair<int64_t, int64_t>>,
                  SmallVector<LinearOp>>
      byInput;
  func.walk([&](LinearOp linear) {
    auto type = dyn_cast<RankedTensorType>(linear.getInput().getType());
    if (!absorbed.count(linear) && type && type.getRank() == 3)
      byInput[{linear.getInput(), quantKey(linear.getWeight())}].push_back(
          linear);
  });
  constexpr size_t kMaxSegments = 4;
  for (auto &[input, linears] : byInput) {
    for (size_t start = 0; start < linears.size(); start += kMaxSegments) {
      SmallVector<LinearOp> group(
          linears.begin() + start,
          linears.begin() + std::min(linears.size(), start + kMaxSegments));
      for (LinearOp member : group)
        launchOf[member] = group.front();
      for (LinearOp member : llvm::drop_begin(group))
        absorbed.insert(member);
      anchors[group.front()] = [=]() {
        SmallVector<LinearOp> copy(group);
        return planLinears(copy);
      };
    }
  }
}

void ProgramPlanner::fuseRopeIntoAppend(KVAppendOp append) {
  RopeOp keyRope = append.getKey().getDefiningOp<RopeOp>();
  if (keyRope && (!keyRope.getResult().hasOneUse() ||
                  append.getValue() == keyRope.getResult()))
    keyRope = nullptr;
  // The query of the attention that reads this layer after the append.
  RopeOp queryRope;
  for (Operation *user : append.getResult().getUsers()) {
    auto read = dyn_cast<KVReadOp>(user);
    if (!read || read.getLayer() != append.getLayer())
      continue;
    for (Operation *reader : read.getKey().getUsers()) {
      auto attention = dyn_cast<AttentionOp>(reader);
      if (!attention || attention.getKey() != read.getKey())
        continue;
      auto rope = attention.getQuery().getDefiningOp<RopeOp>();
      if (rope && rope.getResult().hasOneUse() && !absorbed.count(rope))
        queryRope = rope;
    }
  }
  Operation *anchor = append;
  if (queryRope && append->isBeforeInBlock(queryRope))
    anchor = queryRope;
  if (keyRope)
    absorbed.insert(keyRope);
  if (anchor != append.getOperation())
    absorbed.insert(append);
  if (queryRope && anchor != queryRope.getOperation())
    absorbed.insert(queryRope);
  anchors[anchor] = [=]() { return planAppend(append, keyRope, queryRope); };
}

void ProgramPlanner::fuseNormIntoLinears(RMSNormOp norm) {
  // Decode only (prefill's GEMM reads the normalized rows many times), on
  // the tensor-core GEMV, for a norm over the whole row (not a per-head
  // QK-norm), and with one launch reading the result: otherwise each
  // launch would normalize again, or the normalized row would be needed
  // in memory anyway.
  auto type = dyn_cast<ShapedType>(norm.getWeight().getType());
  auto input = dyn_cast<RankedTensorType>(norm.getInput().getType());
  if (!options.fuseNorms || !program.isDecode || !type || type.getRank() != 1 ||
      !input || input.getRank() != 3 || input.isDynamicDim(2) ||
      input.getDimSize(2) != type.getDimSize(0) ||
      !decodeGemvOnTensorCores(hasTensorCores(), options.weightType,
                               input.getDimSize(2)))
    return;
  Operation *launch = nullptr;
  for (Operation *user : norm.getResult().getUsers()) {
    Value weight;
    if (auto linear = dyn_cast<LinearOp>(user))
      weight = linear.getWeight();
    else if (auto head = dyn_cast<LMHeadOp>(user))
      weight = head.getWeight();
    else
      return;
    if (quantKey(weight) != std::pair<int64_t, int64_t>{0, 0})
      return;
    auto it = launchOf.find(user);
    Operation *owner = it != launchOf.end() ? it->second : user;
    if (!isa<LMHeadOp>(user) && it == launchOf.end())
      return;
    if (launch && owner != launch)
      return;
    launch = owner;
  }
  if (!launch)
    return;
  absorbed.insert(norm);
  fusedNorms[norm.getResult()] = norm;
}

int ProgramPlanner::halfOperandBits(Value value) {
  // The quantized tensor-core GEMV rounds its input to the engine's 16-bit
  // type in the order of its mma operands; a producer whose every reader is
  // such a GEMV can write exactly that (the same rounding), so the GEMVs
  // load half the bytes of x and convert nothing. Decode only, over whole
  // rows of a static width.
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!program.isDecode || !hasTensorCores() ||
      options.weightType == DType::F32 || !type || type.getRank() != 3 ||
      type.isDynamicDim(2))
    return 0;
  const int64_t k = type.getDimSize(2);
  int bits = 0;
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    Value weight;
    if (auto linear = dyn_cast<LinearOp>(user);
        linear && &use == &linear.getInputMutable())
      weight = linear.getWeight();
    else if (auto head = dyn_cast<LMHeadOp>(user);
             head && &use == &head.getInputMutable())
      weight = head.getWeight();
    else
      return 0;
    auto [userBits, group] = quantKey(weight);
    if (!quantGemvReadsHalfOperands(userBits, group, k) ||
        (bits && userBits != bits))
      return 0;
    bits = static_cast<int>(userBits);
  }
  return bits;
}

void ProgramPlanner::chooseNormOperandOutput(RMSNormOp norm) {
  auto type = dyn_cast<ShapedType>(norm.getWeight().getType());
  auto input = dyn_cast<RankedTensorType>(norm.getInput().getType());
  if (fusedNorms.count(norm.getResult()) || !type || type.getRank() != 1 ||
      !input || input.getRank() != 3 ||
      input.getDimSize(2) != type.getDimSize(0))
    return;
  if (int bits = halfOperandBits(norm.getResult()))
    halfOperandValues[norm.getResult()] = bits;
}

void ProgramPlanner::chooseGluOperandOutput(GLUOp glu) {
  // Only the epilogue of a gate/up pair on the quantized tensor-core GEMV
  // (tcFinishItem) writes operands.
  auto gate = glu.getGate().getDefiningOp<LinearOp>();
  if (!gate || launchOf.lookup(gate) != glu.getOperation())
    return;
  auto input = dyn_cast<RankedTensorType>(gate.getInput().getType());
  auto [bits, group] = quantKey(gate.getWeight());
  if (!input || input.getRank() != 3 || input.isDynamicDim(2) ||
      !decodeGemvOnTensorCores(hasTensorCores(), options.weightType,
                               input.getDimSize(2)) ||
      !quantGemvOnTensorCores(bits, group, input.getDimSize(2),
                              /*gated=*/true))
    return;
  if (int outBits = halfOperandBits(glu.getResult()))
    halfOperandValues[glu.getResult()] = outBits;
}

FailureOr<ArgBinding> ProgramPlanner::linearInput(Value value, Operation *user,
                                                  LinearLaunch &desc) {
  desc.halfInput = halfOperandValues.count(value) != 0;
  auto fused = fusedNorms.find(value);
  if (fused == fusedNorms.end())
    return use(value, user);
  RMSNormOp norm = fused->second;
  FailureOr<unsigned> weight =
      weightOf(norm.getWeight(), norm, DType::F32, {desc.k});
  if (failed(weight))
    return failure();
  LinearLaunch::NormPrologue prologue;
  prologue.weight = *weight;
  prologue.epsilon = norm.getEpsilon().convertToFloat();
  prologue.weightOffset = norm.getWeightOffset().convertToFloat();
  desc.norm = prologue;
  fusedNormOp = norm;
  observed.config.norm = "rms_norm";
  return use(norm.getInput(), norm);
}

void ProgramPlanner::findFusions() {
  func.walk([&](GLUOp glu) { fuseGatedLinears(glu); });
  func.walk([&](AddOp add) { fuseResidual(add); });
  groupLinears();
  func.walk([&](KVAppendOp append) { fuseRopeIntoAppend(append); });
  func.walk([&](RMSNormOp norm) { fuseNormIntoLinears(norm); });
  func.walk([&](RMSNormOp norm) { chooseNormOperandOutput(norm); });
  func.walk([&](GLUOp glu) { chooseGluOperandOutput(glu); });
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult ProgramPlanner::run() {
  Block &entry = func.getBody().front();
  if (entry.getNumArguments() != 2 ||
      !isa<RankedTensorType>(entry.getArgument(0).getType()) ||
      cast<RankedTensorType>(entry.getArgument(0).getType()).getRank() != 2 ||
      entry.getArgument(1).getType() != cacheType)
    return func.emitError()
           << "codegen: @" << func.getSymName()
           << " must take the token ids [batch, seq] and the KV cache";
  tokenIds = entry.getArgument(0);

  findFusions();
  for (Operation &op : entry) {
    if (absorbed.count(&op))
      continue;
    auto anchor = anchors.find(&op);
    if (anchor != anchors.end()) {
      if (failed(anchor->second()))
        return failure();
      continue;
    }
    if (failed(planOp(&op)))
      return failure();
  }
  return success();
}

} // namespace detail

using detail::KernelTable;
using detail::Observed;
using detail::ProgramPlanner;
using detail::WeightTable;

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

FailureOr<EnginePlan> planEngine(ModuleOp module,
                                 const CodegenOptions &options) {
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  auto decode = module.lookupSymbol<func::FuncOp>("decode");
  if (!prefill || !decode)
    return module.emitError()
           << "codegen: the program has no @"
           << (prefill ? "decode" : "prefill")
           << " function; an engine is built from the optimized program "
              "(prefill and decode steps over a KV cache)";
  for (func::FuncOp func : {prefill, decode})
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return func.emitError() << "codegen: @" << func.getSymName()
                              << " must have a body of one block";

  auto cacheType = prefill.getNumArguments() == 2
                       ? dyn_cast<KVCacheType>(prefill.getArgumentTypes()[1])
                       : KVCacheType();
  if (!cacheType)
    return prefill.emitError() << "codegen: @prefill must take the KV cache "
                                  "as its second argument";
  if (cacheType.getLayout().getValue() != KVCacheLayout::contiguous)
    return prefill.emitError() << "codegen: only the contiguous KV-cache "
                                  "layout is supported";

  EnginePlan plan;
  plan.options = options;
  ModelConfig &config = plan.model;
  config.layers = cacheType.getLayers();
  config.kvHeads = cacheType.getKvHeads();
  config.headDim = cacheType.getHeadDim();
  config.maxSeqLen = cacheType.getCapacity();
  config.maxBatch = cacheType.getMaxBatch();
  config.cacheType = options.weightType;
  config.maxPrefillTokens = options.maxPrefillTokens
                                ? options.maxPrefillTokens
                                : std::min<int64_t>(512, config.maxSeqLen);
  if (config.maxPrefillTokens < 1 || config.maxPrefillTokens > config.maxSeqLen)
    return module.emitError()
           << "codegen: --max-prefill-tokens must be between 1 and the KV "
              "cache capacity (--max-seq-len "
           << config.maxSeqLen << "), got " << config.maxPrefillTokens;
  for (uint32_t bucket : options.batchBuckets)
    if (bucket > config.maxBatch)
      return module.emitError() << "codegen: batch bucket " << bucket
                                << " exceeds --max-batch " << config.maxBatch;

  plan.prefill.name = format::kPrefillProgram;
  plan.prefill.maxTokens = config.maxBatch * config.maxPrefillTokens;
  plan.decode.name = format::kDecodeProgram;
  plan.decode.isDecode = true;
  plan.decode.maxTokens = config.maxBatch;

  WeightTable weights(plan.weights);
  KernelTable kernels(plan.kernels);
  Observed observed;
  observed.config = config;
  for (auto [func, program] :
       {std::pair{prefill, &plan.prefill}, std::pair{decode, &plan.decode}}) {
    if (func.getNumArguments() != 2 || func.getArgumentTypes()[1] != cacheType)
      return func.emitError() << "codegen: @prefill and @decode must take the "
                                 "same KV cache";
    ProgramPlanner planner(func, *program, weights, kernels, options, cacheType,
                           observed);
    if (failed(planner.run()))
      return failure();
  }
  if (!observed.sawAttention)
    return module.emitError() << "codegen: the program has no attention";
  plan.model = observed.config;
  plan.counterInts = observed.counterInts;
  plan.tvc = observed.tvc;

  for (ProgramPlan *program : {&plan.prefill, &plan.decode}) {
    planMemory(*program);
    if (std::optional<std::string> error = checkMemoryPlan(*program))
      return module.emitError()
             << "codegen: internal error in the memory plan of @"
             << program->name << ": " << *error;
    plan.workspaceBytes = std::max(plan.workspaceBytes, program->peakBytes);
    uint64_t unshared = 0;
    for (const WorkspaceValue &value : program->values)
      unshared += value.bytes;
    plan.unsharedBytes = std::max(plan.unsharedBytes, unshared);
  }
  plan.kvCache =
      kvCacheConfigOf(cacheType, options.weightType, config.maxPrefillTokens);
  plan.cacheBufferBytes = static_cast<uint64_t>(config.layers) *
                          config.maxBatch * config.kvHeads * config.maxSeqLen *
                          config.headDim *
                          format::dtypeBytes(options.weightType);
  return plan;
}

} // namespace sits::codegen
