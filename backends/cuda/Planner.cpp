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

#include "backends/cuda/ProgramPlanner.h"

#include "llvm/ADT/MapVector.h"
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
  // A launch's result is the value its region computed.
  auto it = activations.find(kernel::getInnerValue(value));
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
  FailureOr<ArgBinding> bound = addValue(std::move(stored), value);
  if (succeeded(bound))
    activations[value] = bound->index;
  return bound;
}

FailureOr<ArgBinding> ProgramPlanner::scratch(const std::string &name,
                                              uint64_t width, uint64_t bytes) {
  WorkspaceValue stored;
  stored.name = name;
  stored.width = width;
  stored.bytes = bytes;
  return addValue(std::move(stored), Value());
}

FailureOr<ArgBinding> ProgramPlanner::addValue(WorkspaceValue stored,
                                               Value value) {
  stored.firstLaunch = stored.lastLaunch = currentLaunch();
  stored.owner = currentOp;
  stored.result = -1;
  if (value) {
    Value outer = kernel::getOuterValue(value);
    if (outer.getDefiningOp() == currentOp)
      stored.result = static_cast<int>(cast<OpResult>(outer).getResultNumber());
  }
  if (memory == Memory::FromIR) {
    kernel::SliceAttr slice;
    if (stored.result >= 0) {
      if (auto buffers = currentOp->getAttrOfType<ArrayAttr>(
              kernel::KernelDialect::kBuffersAttrName))
        slice = dyn_cast<kernel::SliceAttr>(buffers[stored.result]);
    } else if (auto scratch = currentOp->getAttrOfType<ArrayAttr>(
                   kernel::KernelDialect::kScratchAttrName)) {
      if (scratchTaken < scratch.size())
        slice = dyn_cast<kernel::SliceAttr>(scratch[scratchTaken]);
      ++scratchTaken;
    }
    if (!slice)
      return currentOp->emitError()
             << "codegen: no #kernel.slice in '"
             << (stored.result >= 0 ? kernel::KernelDialect::kBuffersAttrName
                                    : kernel::KernelDialect::kScratchAttrName)
             << "' holds the " << (stored.result >= 0 ? "result" : "scratch")
             << " '" << stored.name
             << "' (the pass --kernel-plan-memory places every value)";
    if (static_cast<uint64_t>(slice.getBytes()) != stored.bytes)
      return currentOp->emitError()
             << "codegen: " << slice << " cannot hold '" << stored.name
             << "', which takes " << stored.bytes
             << " bytes (a memory plan made for other sizes?)";
    stored.offset = static_cast<uint64_t>(slice.getOffset());
    ++slicesTaken;
  }
  program.values.push_back(std::move(stored));
  return ArgBinding::bufferArg(
      BufferKind::Workspace, static_cast<unsigned>(program.values.size() - 1));
}

LogicalResult ProgramPlanner::checkSlicesUsed() {
  if (memory != Memory::FromIR)
    return success();
  unsigned given = 0;
  if (auto buffers = currentOp->getAttrOfType<ArrayAttr>(
          kernel::KernelDialect::kBuffersAttrName))
    given += llvm::count_if(buffers, llvm::IsaPred<kernel::SliceAttr>);
  if (auto scratch = currentOp->getAttrOfType<ArrayAttr>(
          kernel::KernelDialect::kScratchAttrName))
    given += scratch.size();
  if (given != slicesTaken)
    return currentOp->emitError()
           << "codegen: the op has " << given
           << " workspace slices, but its launches write " << slicesTaken
           << " values (a stale memory plan?)";
  return success();
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
  planned.launch.owner = currentOp;
  program.launches.push_back(std::move(planned.launch));
}

//===----------------------------------------------------------------------===//
// Launches formed by the fusion passes
//===----------------------------------------------------------------------===//

int ProgramPlanner::getOperandBits(Value value) {
  auto launch = value.getDefiningOp<kernel::LaunchOp>();
  if (!launch)
    return 0;
  return static_cast<int>(launch.getOutputOperandBits().value_or(0));
}

FailureOr<ArgBinding> ProgramPlanner::linearInput(Value value, Operation *user,
                                                  LinearLaunch &desc) {
  desc.inputOperandBits = getOperandBits(value);
  auto norm = value.getDefiningOp<RMSNormOp>();
  if (!norm || !kernel::getEnclosingLaunch(norm) ||
      kernel::getEnclosingLaunch(norm) != kernel::getEnclosingLaunch(user))
    return use(value, user);
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

LogicalResult ProgramPlanner::planLaunch(kernel::LaunchOp launch) {
  using kernel::FusionKind;
  SmallVector<LinearOp> linears = launch.getOpsOfType<LinearOp>();
  switch (launch.getFusion()) {
  case FusionKind::LinearGroup:
    return planLinears(linears);
  case FusionKind::GatedLinear:
    return planGatedLinear(launch.getOpsOfType<GLUOp>().front(), linears[0],
                           linears[1]);
  case FusionKind::ResidualLinear: {
    AddOp add = launch.getOpsOfType<AddOp>().front();
    Value residual =
        add.getLhs() == linears[0].getResult() ? add.getRhs() : add.getLhs();
    return planResidualLinear(add, linears[0], residual);
  }
  case FusionKind::RopeKVAppend: {
    KVAppendOp append = launch.getOpsOfType<KVAppendOp>().front();
    RopeOp keyRope, queryRope;
    for (RopeOp rope : launch.getOpsOfType<RopeOp>())
      (rope.getResult() == append.getKey() ? keyRope : queryRope) = rope;
    return planAppend(append, keyRope, queryRope);
  }
  case FusionKind::LMHead:
    return planLMHead(launch.getOpsOfType<LMHeadOp>().front());
  case FusionKind::Norm:
    return planOp(&launch.getBody().front().front());
  }
  return launch.emitError() << "codegen: unknown fusion";
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

  for (Operation &op : entry) {
    currentOp = &op;
    scratchTaken = slicesTaken = 0;
    auto launch = dyn_cast<kernel::LaunchOp>(op);
    if (failed(launch ? planLaunch(launch) : planOp(&op)) ||
        failed(checkSlicesUsed()))
      return failure();
  }
  return success();
}

} // namespace detail

using detail::KernelTable;
using detail::kvPagingOf;
using detail::Observed;
using detail::ProgramPlanner;
using detail::WeightTable;

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

/// The KV cache a step function takes as its second argument, or null.
static KVCacheType getStepCacheType(func::FuncOp func) {
  return func.getNumArguments() == 2
             ? dyn_cast<KVCacheType>(func.getArgumentTypes()[1])
             : KVCacheType();
}

int64_t getMaxPrefillTokens(const CodegenOptions &options, int64_t capacity) {
  return options.maxPrefillTokens ? options.maxPrefillTokens
                                  : std::min<int64_t>(512, capacity);
}

std::string describeLaunches(const EnginePlan &plan) {
  std::string out;
  for (const ProgramPlan *program : plan.programs())
    out += (out.empty() ? "" : ", ") + program->name + " " +
           std::to_string(program->launches.size()) + " launches";
  return out + " per step";
}

static int64_t getMaxPrefillTokens(const CodegenOptions &options,
                                   KVCacheType cacheType) {
  return getMaxPrefillTokens(options, cacheType.getCapacity());
}

/// What the KV cache and the options say of the model before planning.
static ModelConfig getCacheConfig(KVCacheType cacheType,
                                  const CodegenOptions &options) {
  ModelConfig config;
  config.layers = cacheType.getLayers();
  config.kvHeads = cacheType.getKvHeads();
  config.headDim = cacheType.getHeadDim();
  config.maxSeqLen = cacheType.getCapacity();
  config.maxBatch = cacheType.getMaxBatch();
  config.cacheType = options.weightType;
  config.maxPrefillTokens = getMaxPrefillTokens(options, cacheType);
  return config;
}

/// Names the program after `func` and sizes it for the most tokens a step
/// takes: a decode step's sequences, a few-row prefill's rows
/// (kernel.few_row_tokens), every sequence's prefill chunk.
static void initProgram(ProgramPlan &program, func::FuncOp func,
                        KVCacheType cacheType, int64_t maxPrefillTokens) {
  program.name = func.getSymName().str();
  program.isDecode = program.name == format::kDecodeProgram;
  auto fewRows = func->getAttrOfType<IntegerAttr>(
      kernel::KernelDialect::kFewRowTokensAttrName);
  program.gemvLinears = program.isDecode || fewRows;
  program.maxTokens = program.isDecode ? cacheType.getMaxBatch()
                      : fewRows        ? fewRows.getInt()
                                : cacheType.getMaxBatch() * maxPrefillTokens;
}

/// The end of the last slice of `program`'s values.
static uint64_t getSlicesEnd(const ProgramPlan &program) {
  uint64_t end = 0;
  for (const WorkspaceValue &value : program.values)
    end = std::max(end, value.offset + value.bytes);
  return end;
}

/// Plans a step function's launches (its weights and kernels planned into
/// throwaway tables, the kernel specs into `kernelSpecs`), its memory
/// placed by the planner or read from the IR.
static FailureOr<ProgramPlan> planStep(func::FuncOp func,
                                       const CodegenOptions &options,
                                       std::vector<KernelSpec> &kernelSpecs,
                                       ProgramPlanner::Memory memory) {
  KVCacheType cacheType = getStepCacheType(func);
  if (!cacheType || func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitError() << "codegen: @" << func.getSymName()
                            << " is not a step function (token ids and the "
                               "KV cache, a body of one block)";
  ProgramPlan program;
  initProgram(program, func, cacheType,
              getMaxPrefillTokens(options, cacheType));
  std::vector<WeightPlan> weightPlans;
  WeightTable weights(weightPlans);
  KernelTable kernels(kernelSpecs);
  Observed observed;
  observed.config = getCacheConfig(cacheType, options);
  ProgramPlanner planner(func, program, weights, kernels, options, cacheType,
                         observed, memory);
  if (failed(planner.run()))
    return failure();
  return program;
}

FailureOr<ProgramPlan> placeWorkspace(func::FuncOp func,
                                      const CodegenOptions &options) {
  std::vector<KernelSpec> kernelSpecs;
  FailureOr<ProgramPlan> planned =
      planStep(func, options, kernelSpecs, ProgramPlanner::Memory::Place);
  if (failed(planned))
    return failure();
  ProgramPlan &program = *planned;
  planMemory(program);

  // One kernel.buffers entry per result of each op that writes values, in
  // result order, and its scratch in the order its launches take it.
  MLIRContext *context = func.getContext();
  llvm::MapVector<Operation *,
                  std::pair<SmallVector<Attribute>, SmallVector<Attribute>>>
      slices;
  for (const WorkspaceValue &value : program.values) {
    auto &[buffers, scratch] = slices[value.owner];
    auto slice =
        kernel::SliceAttr::get(context, static_cast<int64_t>(value.offset),
                               static_cast<int64_t>(value.bytes));
    if (value.result < 0) {
      scratch.push_back(slice);
      continue;
    }
    if (buffers.empty())
      buffers.assign(value.owner->getNumResults(), UnitAttr::get(context));
    buffers[value.result] = slice;
  }
  for (auto &[op, entry] : slices) {
    if (!entry.first.empty())
      op->setAttr(kernel::KernelDialect::kBuffersAttrName,
                  ArrayAttr::get(context, entry.first));
    if (!entry.second.empty())
      op->setAttr(kernel::KernelDialect::kScratchAttrName,
                  ArrayAttr::get(context, entry.second));
  }
  func->setAttr(kernel::KernelDialect::kWorkspaceBytesAttrName,
                IntegerAttr::get(IntegerType::get(context, 64),
                                 static_cast<int64_t>(program.peakBytes)));
  return planned;
}

FailureOr<ProgramPlan> planStepLaunches(func::FuncOp func,
                                        const CodegenOptions &options,
                                        std::vector<KernelSpec> &kernelSpecs) {
  return planStep(func, options, kernelSpecs, ProgramPlanner::Memory::FromIR);
}

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

  KVCacheType cacheType = getStepCacheType(prefill);
  if (!cacheType)
    return prefill.emitError() << "codegen: @prefill must take the KV cache "
                                  "as its second argument";
  if (cacheType.getLayout().getValue() != KVCacheLayout::contiguous)
    return prefill.emitError() << "codegen: only the contiguous KV-cache "
                                  "layout is supported";

  EnginePlan plan;
  plan.options = options;
  ModelConfig &config = plan.model;
  config = getCacheConfig(cacheType, options);
  if (config.maxPrefillTokens < 1 || config.maxPrefillTokens > config.maxSeqLen)
    return module.emitError()
           << "codegen: --max-prefill-tokens must be between 1 and the KV "
              "cache capacity (--max-seq-len "
           << config.maxSeqLen << "), got " << config.maxPrefillTokens;
  for (uint32_t bucket : options.batchBuckets)
    if (bucket > config.maxBatch)
      return module.emitError() << "codegen: batch bucket " << bucket
                                << " exceeds --max-batch " << config.maxBatch;

  // The optional third program: a prefill whose linear layers are GEMVs.
  auto fewRowPrefill =
      module.lookupSymbol<func::FuncOp>(format::kFewRowPrefillProgram);
  std::vector<std::pair<func::FuncOp, ProgramPlan *>> steps = {
      {prefill, &plan.prefill}, {decode, &plan.decode}};
  if (fewRowPrefill) {
    if (fewRowPrefill.isExternal() || !fewRowPrefill.getBody().hasOneBlock() ||
        !fewRowPrefill->hasAttr(kernel::KernelDialect::kFewRowTokensAttrName))
      return fewRowPrefill.emitError()
             << "codegen: @" << format::kFewRowPrefillProgram
             << " must have a body of one block and a '"
             << kernel::KernelDialect::kFewRowTokensAttrName << "'";
    plan.prefillFew.emplace();
    steps.push_back({fewRowPrefill, &*plan.prefillFew});
  }
  for (auto [func, program] : steps)
    initProgram(*program, func, cacheType, config.maxPrefillTokens);
  if (plan.prefillFew && plan.prefillFew->maxTokens > plan.prefill.maxTokens)
    return fewRowPrefill.emitError()
           << "codegen: '" << kernel::KernelDialect::kFewRowTokensAttrName
           << "' = " << plan.prefillFew->maxTokens
           << " is more rows than a prefill step takes (max_batch x the "
              "prefill chunk = "
           << plan.prefill.maxTokens << ")";

  // Both steps address the one cache alike.
  const KVPaging paging = kvPagingOf(prefill, cacheType);
  if (!(kvPagingOf(decode, cacheType) == paging))
    return decode.emitError()
           << "codegen: @prefill and @decode must store the KV cache alike "
              "(the same '"
           << kernel::KernelDialect::kKVPagesAttrName << "', or none)";
  if (paging.blockTokens && paging.blocks < paging.maxBlocks)
    return prefill.emitError()
           << "codegen: a paged KV cache of " << paging.blocks
           << " blocks cannot hold one sequence of the capacity ("
           << paging.maxBlocks << " blocks)";
  if (paging.blockTokens && cacheType.getQuant() &&
      cacheType.getQuant().hasPerChannelKeys() &&
      paging.blockTokens % cacheType.getQuant().getChannelBlock() != 0)
    return prefill.emitError()
           << "codegen: a paged quantized KV cache needs blocks of whole "
              "per-channel key blocks ("
           << paging.blockTokens << " tokens, key blocks of "
           << cacheType.getQuant().getChannelBlock() << ")";

  WeightTable weights(plan.weights);
  KernelTable kernels(plan.kernels);
  Observed observed;
  observed.config = config;
  for (auto [func, program] : steps) {
    if (func.getNumArguments() != 2 || func.getArgumentTypes()[1] != cacheType)
      return func.emitError() << "codegen: @" << func.getSymName()
                              << " must take the KV cache @prefill takes";
    // A step without a memory plan is one --kernel-plan-memory could not
    // plan: planning it again reports why, at the op.
    auto given = func->getAttrOfType<IntegerAttr>(
        kernel::KernelDialect::kWorkspaceBytesAttrName);
    ProgramPlanner planner(
        func, *program, weights, kernels, options, cacheType, observed,
        given ? ProgramPlanner::Memory::FromIR : ProgramPlanner::Memory::Place);
    if (failed(planner.run()))
      return failure();
    if (!given)
      return func.emitError()
             << "codegen: @" << func.getSymName() << " has no memory plan ('"
             << kernel::KernelDialect::kWorkspaceBytesAttrName
             << "'): the pass --kernel-plan-memory places its values";
    // The workspace as the memory plan in the IR gives it, checked.
    program->peakBytes = getSlicesEnd(*program);
    if (given.getInt() != static_cast<int64_t>(program->peakBytes))
      return func.emitError()
             << "codegen: @" << func.getSymName() << "'s slices end at byte "
             << program->peakBytes << ", but its '"
             << kernel::KernelDialect::kWorkspaceBytesAttrName << "' is "
             << given.getInt();
    if (std::optional<std::string> error = checkMemoryPlan(*program))
      return func.emitError() << "codegen: the memory plan of @"
                              << func.getSymName() << " is wrong: " << *error;
  }
  if (!observed.sawAttention)
    return module.emitError() << "codegen: the program has no attention";
  plan.model = observed.config;
  plan.counterInts = observed.counterInts;
  plan.tvc = observed.tvc;
  if (decode->hasAttr(kernel::KernelDialect::kDecodeScheduleAttrName)) {
    FailureOr<PersistentDecodePlan> persistent =
        planPersistentDecode(decode, plan);
    if (failed(persistent))
      return failure();
    plan.persistentDecode = std::move(*persistent);
  }

  for (ProgramPlan *program : plan.programs()) {
    plan.workspaceBytes = std::max(plan.workspaceBytes, program->peakBytes);
    uint64_t unshared = 0;
    for (const WorkspaceValue &value : program->values)
      unshared += value.bytes;
    plan.unsharedBytes = std::max(plan.unsharedBytes, unshared);
  }
  plan.kvCache = kvCacheConfigOf(cacheType, options.weightType,
                                 config.maxPrefillTokens, paging);
  // Rows of the pool's blocks, or each sequence's capacity.
  plan.cacheBufferBytes =
      static_cast<uint64_t>(config.layers) *
      (paging.blockTokens ? paging.blocks * paging.blockTokens
                          : config.maxBatch * config.maxSeqLen) *
      config.kvHeads * config.headDim * format::dtypeBytes(options.weightType);
  return plan;
}

} // namespace sits::codegen
