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
//     the same layer's attention reads, into the same kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Launches.h"
#include "compiler/codegen/Plan.h"

#include "dialects/sits/SitsOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Path.h"

#include <functional>
#include <map>

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
                    std::to_string(threads);
  for (const std::string &line : config)
    key += "|" + line;
  for (const KernelParam &param : params)
    key += "|" + param.type + " " + param.name;
  for (const std::string &line : body)
    key += "|" + line;
  return key;
}

namespace {

/// A short name for diagnostics and comments: the ONNX node names of a
/// location, or file:line.
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

/// The weights of the engine, shared by both programs (deduplicated by name
/// and storage type).
class WeightTable {
public:
  explicit WeightTable(std::vector<WeightPlan> &weights) : weights(weights) {}

  FailureOr<unsigned> bind(WeightOp op, DType type) {
    std::string key = op.getName().str() + "@" + format::dtypeName(type);
    auto it = byKey.find(key);
    if (it != byKey.end()) {
      if (weights[it->second].values != op.getValue())
        return op.emitError() << "codegen: two weights are named '"
                              << op.getName()
                              << "' but hold different values";
      return it->second;
    }
    auto shaped = cast<ShapedType>(op.getValue().getType());
    if (!shaped.hasStaticShape() || !isa<FloatType>(shaped.getElementType()))
      return op.emitError() << "codegen: weight '" << op.getName()
                            << "' must be a float tensor of static shape, got "
                            << shaped;
    WeightPlan plan;
    plan.name = op.getName().str();
    plan.type = type;
    plan.shape.assign(shaped.getShape().begin(), shaped.getShape().end());
    plan.values = op.getValue();
    plan.bytes = static_cast<uint64_t>(shaped.getNumElements()) *
                 format::dtypeBytes(type);
    weights.push_back(std::move(plan));
    byKey[key] = static_cast<unsigned>(weights.size() - 1);
    return byKey[key];
  }

private:
  std::vector<WeightPlan> &weights;
  std::map<std::string, unsigned> byKey;
};

/// Deduplicates kernel specs across both programs and names them.
class KernelTable {
public:
  explicit KernelTable(std::vector<KernelSpec> &kernels) : kernels(kernels) {}

  unsigned add(KernelSpec spec, const std::string &use) {
    std::string key = spec.getKey();
    auto it = byKey.find(key);
    if (it == byKey.end()) {
      spec.name = "sits_" + spec.family + "_" +
                  std::to_string(countByFamily[spec.family]++);
      kernels.push_back(std::move(spec));
      it = byKey.emplace(key, static_cast<unsigned>(kernels.size() - 1)).first;
    }
    std::vector<std::string> &uses = kernels[it->second].uses;
    if (uses.size() < 4)
      uses.push_back(use);
    else if (uses.size() == 4)
      uses.push_back("...");
    return it->second;
  }

private:
  std::vector<KernelSpec> &kernels;
  std::map<std::string, unsigned> byKey;
  std::map<std::string, unsigned> countByFamily;
};

/// What the planner learns about the model while it plans (for metadata).
struct Observed {
  ModelConfig config;
  bool sawAttention = false;
};

//===----------------------------------------------------------------------===//
// One program
//===----------------------------------------------------------------------===//

class ProgramPlanner {
public:
  ProgramPlanner(func::FuncOp func, ProgramPlan &program, WeightTable &weights,
                 KernelTable &kernels, const CodegenOptions &options,
                 KVCacheType cacheType, Observed &observed)
      : func(func), program(program), weights(weights), kernels(kernels),
        options(options), cacheType(cacheType), observed(observed) {}

  LogicalResult run();

private:
  // Values.
  FailureOr<int64_t> tokenWidth(Value value, Operation *user);
  FailureOr<ArgBinding> use(Value value, Operation *user);
  FailureOr<ArgBinding> define(Value value, Operation *producer);
  FailureOr<unsigned> weightOf(Value value, Operation *user, DType type,
                               ArrayRef<int64_t> shape);
  FailureOr<RopeConfig> ropeConfigOf(RopeOp rope);
  LogicalResult checkPast(Value past, Operation *user);
  unsigned currentLaunch() const {
    return static_cast<unsigned>(program.launches.size());
  }
  void addLaunch(PlannedLaunch planned, ArrayRef<Operation *> ops);

  // Fusions.
  void findFusions();
  void fuseGatedLinears(GLUOp glu);
  void fuseResidual(AddOp add);
  void groupLinears();
  void fuseRopeIntoAppend(KVAppendOp append);

  // Ops.
  LogicalResult planOp(Operation *op);
  LogicalResult planLinears(ArrayRef<LinearOp> linears);
  LogicalResult planGatedLinear(GLUOp glu, LinearOp gate, LinearOp up);
  LogicalResult planResidualLinear(AddOp add, LinearOp linear, Value residual);
  LogicalResult planLMHead(LMHeadOp op);
  LogicalResult planAppend(KVAppendOp op, RopeOp keyRope, RopeOp queryRope);
  LogicalResult planAttention(AttentionOp op);
  LogicalResult planReturn(func::ReturnOp op);
  FailureOr<LinearSegment> linearSegment(Operation *op, Value weight,
                                         Value bias, int64_t k);

  func::FuncOp func;
  ProgramPlan &program;
  WeightTable &weights;
  KernelTable &kernels;
  const CodegenOptions &options;
  KVCacheType cacheType;
  Observed &observed;

  Value tokenIds, pastLengths;
  DenseSet<Value> positions;
  DenseMap<Value, unsigned> activations; ///< roots and views -> value index
  DenseMap<Value, std::pair<KVReadOp, bool>> cacheReads; ///< bool: is key
  DenseSet<int64_t> appendedLayers;
  Value logits;

  DenseSet<Operation *> absorbed;
  llvm::MapVector<Operation *, std::function<LogicalResult()>> anchors;
};

FailureOr<int64_t> ProgramPlanner::tokenWidth(Value value, Operation *user) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || (type.getRank() != 3 && type.getRank() != 4))
    return user->emitError()
           << "codegen: expected an activation [batch, seq, width] or "
              "[batch, heads, seq, head_dim], got "
           << value.getType();
  int64_t width = type.getRank() == 3 ? type.getDimSize(2)
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
                             << "' has shape " << weightType
                             << ", expected " << shape.size() << "-D "
                             << "shape [" << [&] {
                                  std::string s;
                                  for (int64_t d : shape)
                                    s += (s.empty() ? "" : "x") +
                                         std::to_string(d);
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

void ProgramPlanner::fuseGatedLinears(GLUOp glu) {
  LinearOp gate = singleUseLinear(glu.getGate());
  LinearOp up = singleUseLinear(glu.getUp());
  if (!gate || !up || gate == up || absorbed.count(gate) || absorbed.count(up) ||
      gate.getInput() != up.getInput() ||
      gate.getWeight().getType() != up.getWeight().getType())
    return;
  absorbed.insert(gate);
  absorbed.insert(up);
  anchors[glu] = [=]() { return planGatedLinear(glu, gate, up); };
}

void ProgramPlanner::fuseResidual(AddOp add) {
  for (unsigned index : {1u, 0u}) {
    LinearOp linear = singleUseLinear(add->getOperand(index));
    Value residual = add->getOperand(1 - index);
    if (!linear || absorbed.count(linear) || residual == linear.getResult())
      continue;
    absorbed.insert(linear);
    anchors[add] = [=]() { return planResidualLinear(add, linear, residual); };
    return;
  }
}

void ProgramPlanner::groupLinears() {
  llvm::MapVector<Value, SmallVector<LinearOp>> byInput;
  func.walk([&](LinearOp linear) {
    auto type = dyn_cast<RankedTensorType>(linear.getInput().getType());
    if (!absorbed.count(linear) && type && type.getRank() == 3)
      byInput[linear.getInput()].push_back(linear);
  });
  constexpr size_t kMaxSegments = 4;
  for (auto &[input, linears] : byInput) {
    for (size_t start = 0; start < linears.size(); start += kMaxSegments) {
      SmallVector<LinearOp> group(
          linears.begin() + start,
          linears.begin() + std::min(linears.size(), start + kMaxSegments));
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

void ProgramPlanner::findFusions() {
  func.walk([&](GLUOp glu) { fuseGatedLinears(glu); });
  func.walk([&](AddOp add) { fuseResidual(add); });
  groupLinears();
  func.walk([&](KVAppendOp append) { fuseRopeIntoAppend(append); });
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

LogicalResult ProgramPlanner::planOp(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<WeightOp, arith::ConstantOp>([](auto) { return success(); })
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
        auto weightType = cast<ShapedType>(norm.getWeight().getType());
        if (weightType.getRank() != 1)
          return norm.emitError() << "codegen: norm weights must be 1-D";
        desc.hidden = weightType.getDimSize(0);
        desc.epsilon = norm.getEpsilon().convertToFloat();
        if constexpr (std::is_same_v<decltype(norm), RMSNormOp>) {
          desc.weightOffset = norm.getWeightOffset().convertToFloat();
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
      .Case<AddOp, ActivationOp, GLUOp>([&](auto elementwise) -> LogicalResult {
        ElementwiseLaunch desc;
        Operation *raw = elementwise.getOperation();
        desc.kind = isa<AddOp>(raw)          ? ElementwiseKind::Add
                    : isa<ActivationOp>(raw) ? ElementwiseKind::Activation
                                             : ElementwiseKind::Glu;
        if (auto act = dyn_cast<ActivationOp>(raw))
          desc.activation = static_cast<int>(act.getKind());
        if (auto glu = dyn_cast<GLUOp>(raw)) {
          desc.activation = static_cast<int>(glu.getKind());
          observed.config.activation =
              stringifyActivation(glu.getKind()).str();
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
        auto it = activations.find(view.getInput());
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
                                                       int64_t k) {
  auto weightType = cast<ShapedType>(weight.getType());
  if (weightType.getRank() != 2 || weightType.getDimSize(1) != k)
    return op->emitError() << "codegen: expected a weight [out, " << k
                           << "], got " << weightType;
  LinearSegment segment;
  segment.rows = weightType.getDimSize(0);
  FailureOr<unsigned> index =
      weightOf(weight, op, options.weightType, weightType.getShape());
  if (failed(index))
    return failure();
  segment.weight = *index;
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
  desc.decode = program.isDecode;
  desc.weightType = options.weightType;
  LinearOp first = linears.front();
  auto inputType = dyn_cast<RankedTensorType>(first.getInput().getType());
  if (!inputType || inputType.getRank() != 3)
    return first.emitError() << "codegen: a linear layer's input must be "
                                "token-major [batch, seq, features], got "
                             << first.getInput().getType();
  FailureOr<int64_t> k = tokenWidth(first.getInput(), first);
  FailureOr<ArgBinding> input = use(first.getInput(), first);
  if (failed(k) || failed(input))
    return failure();
  desc.k = *k;
  desc.input = *input;
  SmallVector<Operation *> ops;
  for (LinearOp linear : linears) {
    FailureOr<LinearSegment> segment =
        linearSegment(linear, linear.getWeight(), linear.getBias(), desc.k);
    if (failed(segment))
      return failure();
    FailureOr<ArgBinding> out = define(linear.getResult(), linear);
    if (failed(out))
      return failure();
    segment->out = *out;
    desc.segments.push_back(*segment);
    ops.push_back(linear);
  }
  addLaunch(planLinear(desc), ops);
  return success();
}

LogicalResult ProgramPlanner::planGatedLinear(GLUOp glu, LinearOp gate,
                                              LinearOp up) {
  LinearLaunch desc;
  desc.decode = program.isDecode;
  desc.weightType = options.weightType;
  desc.epilogue = LinearEpilogue::Glu;
  desc.activation = static_cast<int>(glu.getKind());
  FailureOr<int64_t> k = tokenWidth(gate.getInput(), gate);
  FailureOr<ArgBinding> input = use(gate.getInput(), gate);
  if (failed(k) || failed(input))
    return failure();
  desc.k = *k;
  desc.input = *input;
  for (LinearOp linear : {gate, up}) {
    FailureOr<LinearSegment> segment =
        linearSegment(linear, linear.getWeight(), linear.getBias(), desc.k);
    if (failed(segment))
      return failure();
    desc.segments.push_back(*segment);
  }
  FailureOr<ArgBinding> out = define(glu.getResult(), glu);
  if (failed(out))
    return failure();
  desc.segments[0].out = *out;
  observed.config.intermediate = desc.segments[0].rows;
  observed.config.activation = stringifyActivation(glu.getKind()).str();
  addLaunch(planLinear(desc), {gate, up, glu});
  return success();
}

LogicalResult ProgramPlanner::planResidualLinear(AddOp add, LinearOp linear,
                                                 Value residual) {
  LinearLaunch desc;
  desc.decode = program.isDecode;
  desc.weightType = options.weightType;
  desc.epilogue = LinearEpilogue::Residual;
  FailureOr<int64_t> k = tokenWidth(linear.getInput(), linear);
  FailureOr<ArgBinding> input = use(linear.getInput(), linear);
  FailureOr<ArgBinding> residualArg = use(residual, add);
  if (failed(k) || failed(input) || failed(residualArg))
    return failure();
  desc.k = *k;
  desc.input = *input;
  desc.residual = *residualArg;
  FailureOr<LinearSegment> segment =
      linearSegment(linear, linear.getWeight(), linear.getBias(), desc.k);
  if (failed(segment))
    return failure();
  FailureOr<ArgBinding> out = define(add.getResult(), add);
  if (failed(out))
    return failure();
  segment->out = *out;
  desc.segments.push_back(*segment);
  addLaunch(planLinear(desc), {linear, add});
  return success();
}

LogicalResult ProgramPlanner::planLMHead(LMHeadOp head) {
  if (logits)
    return head.emitError() << "codegen: a step has one LM head";
  if (!head.getResult().hasOneUse() ||
      !isa<func::ReturnOp>(*head.getResult().getUsers().begin()))
    return head.emitError()
           << "codegen: the LM head's logits must be returned and used by "
              "nothing else (the engine computes only each sequence's last "
              "token)";
  LinearLaunch desc;
  desc.decode = true;
  desc.gatherLast = true;
  desc.weightType = options.weightType;
  auto inputType = dyn_cast<RankedTensorType>(head.getInput().getType());
  if (!inputType || inputType.getRank() != 3)
    return head.emitError() << "codegen: the LM head's input must be "
                               "[batch, seq, hidden]";
  FailureOr<int64_t> k = tokenWidth(head.getInput(), head);
  FailureOr<ArgBinding> input = use(head.getInput(), head);
  if (failed(k) || failed(input))
    return failure();
  desc.k = *k;
  desc.input = *input;
  FailureOr<LinearSegment> segment =
      linearSegment(head, head.getWeight(), head.getBias(), desc.k);
  if (failed(segment))
    return failure();
  segment->out = ArgBinding::bufferArg(BufferKind::Logits);
  desc.segments.push_back(*segment);
  observed.config.vocab = segment->rows;
  observed.config.tiedLMHead = head.getTied();
  logits = head.getResult();
  addLaunch(planLinear(desc), {head});
  return success();
}

FailureOr<RopeConfig> ProgramPlanner::ropeConfigOf(RopeOp rope) {
  auto gather = rope.getCos().getDefiningOp<RopeGatherOp>();
  if (!gather || rope.getSin() != gather.getSin() ||
      rope.getCos() != gather.getCos() || !positions.count(gather.getPositions()))
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
    return rope.emitError() << "codegen: the RoPE table " << table
                            << " must have rotary_dim (" << config.rotaryDim
                            << ") columns";
  FailureOr<unsigned> weight = weightOf(gather.getTable(), rope, DType::F32,
                                        table.getShape());
  if (failed(weight))
    return failure();
  config.table = *weight;
  observed.config.rotaryDim = config.rotaryDim;
  observed.config.ropeStyle = stringifyRopeStyle(rope.getStyle()).str();
  return config;
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
  desc.layer = layer;
  desc.kvHeads = cacheType.getKvHeads();
  desc.headDim = cacheType.getHeadDim();
  desc.capacity = cacheType.getCapacity();
  desc.cacheType = options.weightType;
  uint64_t layerElements = static_cast<uint64_t>(cacheType.getMaxBatch()) *
                           desc.kvHeads * desc.capacity * desc.headDim;
  desc.layerByteOffset =
      layer * layerElements * format::dtypeBytes(options.weightType);
  for (Value operand : {append.getKey(), append.getValue()}) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || type.getRank() != 4 ||
        type.getDimSize(1) != desc.kvHeads || type.getDimSize(3) != desc.headDim)
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
  desc.cacheType = options.weightType;
  uint64_t layerElements = static_cast<uint64_t>(cacheType.getMaxBatch()) *
                           desc.kvHeads * desc.capacity * desc.headDim;
  desc.layerByteOffset =
      layer * layerElements * format::dtypeBytes(options.weightType);
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
  FailureOr<ArgBinding> queryArg = use(attention.getQuery(), attention);
  FailureOr<ArgBinding> out = define(attention.getResult(), attention);
  if (failed(queryArg) || failed(out))
    return failure();
  desc.query = *queryArg;
  desc.out = *out;
  std::string error;
  std::optional<PlannedLaunch> planned = codegen::planAttention(desc, &error);
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
  if (ret.getNumOperands() != 2 || !logits || ret.getOperand(0) != logits ||
      !ret.getOperand(1).getDefiningOp<KVAdvanceOp>())
    return ret.emitError()
           << "codegen: @" << func.getSymName()
           << " must return the logits of a sits.lm_head and the advanced "
              "KV cache";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

FailureOr<EnginePlan> planEngine(ModuleOp module,
                                 const CodegenOptions &options) {
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  auto decode = module.lookupSymbol<func::FuncOp>("decode");
  if (!prefill || !decode)
    return module.emitError()
           << "codegen: the program has no @" << (prefill ? "decode" : "prefill")
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
      return module.emitError()
             << "codegen: batch bucket " << bucket << " exceeds --max-batch "
             << config.maxBatch;

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
    if (func.getNumArguments() != 2 ||
        func.getArgumentTypes()[1] != cacheType)
      return func.emitError() << "codegen: @prefill and @decode must take the "
                                 "same KV cache";
    ProgramPlanner planner(func, *program, weights, kernels, options,
                           cacheType, observed);
    if (failed(planner.run()))
      return failure();
  }
  if (!observed.sawAttention)
    return module.emitError() << "codegen: the program has no attention";
  plan.model = observed.config;

  for (ProgramPlan *program : {&plan.prefill, &plan.decode}) {
    planMemory(*program);
    plan.workspaceBytes = std::max(plan.workspaceBytes, program->peakBytes);
    uint64_t unshared = 0;
    for (const WorkspaceValue &value : program->values)
      unshared += value.bytes;
    plan.unsharedBytes = std::max(plan.unsharedBytes, unshared);
  }
  plan.cacheBufferBytes = static_cast<uint64_t>(config.layers) *
                          config.maxBatch * config.kvHeads * config.maxSeqLen *
                          config.headDim *
                          format::dtypeBytes(options.weightType);
  return plan;
}

} // namespace sits::codegen
