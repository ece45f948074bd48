//===- ProgramPlanner.h - Planning one program (internal) -------*- C++ -*-===//
//
// Shared by Planner.cpp (values, fusions, the walk, the engine) and
// PlanOps.cpp (what each op becomes). Not part of the codegen API.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_PROGRAMPLANNER_H
#define SITS_BACKENDS_CUDA_PROGRAMPLANNER_H

#include "backends/cuda/KVQuantLaunches.h"
#include "backends/cuda/Launches.h"
#include "backends/cuda/Plan.h"

#include "dialects/kernel/KernelOps.h"
#include "dialects/sits/SitsOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <map>

namespace sits::codegen::detail {

using namespace mlir;
using format::DType;

/// A short name for diagnostics and comments: the ONNX node names of a
/// location, or file:line.
std::string describeLocation(Location loc);
/// The op's name and location.
std::string describeOp(Operation *op);

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
                              << op.getName() << "' but hold different values";
      return it->second;
    }
    auto shaped = cast<ShapedType>(op.getValue().getType());
    // Quantized levels (i8 or i4x2) are stored as the i8 bytes they are.
    bool levels = type == DType::I8 || type == DType::I4X2;
    if (!shaped.hasStaticShape() ||
        (levels ? !shaped.getElementType().isInteger(8)
                : !isa<FloatType>(shaped.getElementType())))
      return op.emitError() << "codegen: weight '" << op.getName()
                            << "' must be " << (levels ? "an i8" : "a float")
                            << " tensor of static shape, got " << shaped;
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

  /// Stores quantized levels `index` with interleaved chunks of `bits`-bit
  /// levels (0: input order), as the sits.dequantize ops reading it say;
  /// false when an earlier reader said the other.
  bool setInterleaved(unsigned index, int bits) {
    if (layoutGiven.size() < weights.size())
      layoutGiven.resize(weights.size(), false);
    if (layoutGiven[index] && weights[index].interleavedBits != bits)
      return false;
    layoutGiven[index] = true;
    weights[index].interleavedBits = bits;
    return true;
  }

  /// Binds values computed by the planner (the TVC bounds of the stored
  /// weights), stored as `type` under `name`; `compute` runs only when no
  /// weight of that name and type is bound yet.
  unsigned bindComputed(const std::string &name, DType type,
                        const std::function<ElementsAttr()> &compute) {
    std::string key = name + "@" + format::dtypeName(type);
    auto it = byKey.find(key);
    if (it != byKey.end())
      return it->second;
    WeightPlan plan;
    plan.name = name;
    plan.type = type;
    plan.values = compute();
    auto shaped = cast<ShapedType>(plan.values.getType());
    plan.shape.assign(shaped.getShape().begin(), shaped.getShape().end());
    plan.bytes = static_cast<uint64_t>(shaped.getNumElements()) *
                 format::dtypeBytes(type);
    weights.push_back(std::move(plan));
    return byKey[key] = static_cast<unsigned>(weights.size() - 1);
  }

private:
  std::vector<WeightPlan> &weights;
  std::map<std::string, unsigned> byKey;
  /// Whether a reader gave each weight its layout (setInterleaved).
  std::vector<bool> layoutGiven;
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
/// The KV cache's paging as `func`'s #kernel.kv_pages gives it (blockTokens
/// 0: contiguous).
KVPaging kvPagingOf(func::FuncOp func, KVCacheType cacheType);

struct Observed {
  ModelConfig config;
  bool sawAttention = false;
  uint64_t counterInts = 0;
  std::optional<EnginePlan::Tvc> tvc;
};

//===----------------------------------------------------------------------===//
// One program
//===----------------------------------------------------------------------===//

class ProgramPlanner {
public:
  /// Where the workspace offsets come from.
  enum class Memory {
    FromIR, ///< the #kernel.slice attributes (code generation)
    Place,  ///< none yet: placeWorkspace places the values afterwards
  };

  ProgramPlanner(func::FuncOp func, ProgramPlan &program, WeightTable &weights,
                 KernelTable &kernels, const CodegenOptions &options,
                 KVCacheType cacheType, Observed &observed,
                 Memory memory = Memory::FromIR)
      : func(func), program(program), weights(weights), kernels(kernels),
        options(options), cacheType(cacheType), observed(observed),
        memory(memory), paging(kvPagingOf(func, cacheType)) {}

  LogicalResult run();

private:
  // Values.
  FailureOr<int64_t> tokenWidth(Value value, Operation *user);
  FailureOr<ArgBinding> use(Value value, Operation *user);
  FailureOr<ArgBinding> define(Value value, Operation *producer);
  /// `bytes` of scratch for the launch being planned.
  FailureOr<ArgBinding> scratch(const std::string &name, uint64_t width,
                                uint64_t bytes);
  /// Adds `stored` to the program's values, written by the op being
  /// planned (as its result `value`, or as scratch when null), at the offset
  /// its #kernel.slice gives (Memory::FromIR).
  FailureOr<ArgBinding> addValue(WorkspaceValue stored, Value value);
  /// Whether the op just planned has a slice for every value it wrote, and
  /// no other.
  LogicalResult checkSlicesUsed();
  FailureOr<unsigned> weightOf(Value value, Operation *user, DType type,
                               ArrayRef<int64_t> shape);
  FailureOr<RopeConfig> ropeConfigOf(RopeOp rope);
  LogicalResult checkPast(Value past, Operation *user);
  /// mma.sync for f16/bf16 (tensor-core GEMV and GEMM): sm_80 and newer.
  bool hasTensorCores() const { return options.target.getSm() >= 80; }
  /// Where layer `layer` starts in each of the KV cache's buffers (key and
  /// value): max_batch x kv_heads x capacity x head_dim elements a layer.
  /// Paged: blocks x kv_heads x block_tokens x head_dim elements a layer.
  uint64_t cacheLayerByteOffset(int64_t layer) const {
    const uint64_t sequences =
        paging.blockTokens ? paging.blocks : cacheType.getMaxBatch();
    const uint64_t rows =
        paging.blockTokens ? paging.blockTokens : cacheType.getCapacity();
    return static_cast<uint64_t>(layer) * sequences * cacheType.getKvHeads() *
           rows * cacheType.getHeadDim() *
           format::dtypeBytes(options.weightType);
  }
  unsigned currentLaunch() const {
    return static_cast<unsigned>(program.launches.size());
  }
  void addLaunch(PlannedLaunch planned, ArrayRef<Operation *> ops);

  // Launches the fusion passes formed (backends/cuda/transforms).
  LogicalResult planLaunch(kernel::LaunchOp launch);
  /// The bits of the quantized GEMVs whose 16-bit operands the launch that
  /// produces `value` writes it as (its output_operand_bits); 0: f32.
  int getOperandBits(Value value);
  /// The input binding of a linear launch reading `value`: the rms_norm
  /// fused into its kernel.launch reads the norm's input instead (and sets
  /// desc.norm).
  FailureOr<ArgBinding> linearInput(Value value, Operation *user,
                                    LinearLaunch &desc);

  // Ops.
  LogicalResult planOp(Operation *op);
  LogicalResult planLinears(ArrayRef<LinearOp> linears);
  LogicalResult planGatedLinear(GLUOp glu, LinearOp gate, LinearOp up);
  LogicalResult planResidualLinear(AddOp add, LinearOp linear, Value residual);
  LogicalResult planLMHead(LMHeadOp op);
  LogicalResult planTVCHead(TVCLMHeadOp op); // TvcPlan.cpp
  LogicalResult planAppend(KVAppendOp op, RopeOp keyRope, RopeOp queryRope);
  LogicalResult planAttention(AttentionOp op);
  LogicalResult planReturn(func::ReturnOp op);
  /// A segment of `desc` (quantized weights set desc.quant, and must agree
  /// with the segments before).
  FailureOr<LinearSegment> linearSegment(Operation *op, Value weight,
                                         Value bias, LinearLaunch &desc);

  // Quantized weights (PlanQuant.cpp).
  /// Checks a sits.dequantize that a linear layer reads as its weight and
  /// binds its data and scales.
  FailureOr<LinearQuant> quantizedWeight(Operation *op, DequantizeOp dequantize,
                                         int64_t k, LinearSegment &segment);
  /// A sits.dequantize compiles only into the linear layers that read it.
  LogicalResult checkDequantizeUsers(DequantizeOp dequantize);
  /// Adds the launch of `desc`; for prefill, quantized weights are first
  /// dequantized into the workspace (the GEMM then reads them as usual).
  LogicalResult addLinearLaunch(LinearLaunch desc, ArrayRef<Operation *> ops);
  /// The block size the kernel.config of the launch that runs `op` (its
  /// kernel.launch, or itself) gives the one-kernel launch of `kernel`.
  FailureOr<int64_t> rowThreads(Operation *op, kernel::KernelKind kernel);
  /// Takes the kernel that `owner`'s kernel.config chose for `desc` (the
  /// launch, or the op that launches alone), after checking that it can
  /// run it (LinearKernels.cpp).
  LogicalResult takeLinearKernel(Operation *owner, LinearLaunch &desc);

  func::FuncOp func;
  ProgramPlan &program;
  WeightTable &weights;
  KernelTable &kernels;
  const CodegenOptions &options;
  KVCacheType cacheType;
  Observed &observed;
  const Memory memory;
  /// The step's #kernel.kv_pages (blockTokens 0: contiguous).
  const KVPaging paging;

  /// The op of the function's body being planned, and how many of its
  /// slices its values took.
  Operation *currentOp = nullptr;
  unsigned scratchTaken = 0, slicesTaken = 0;

  Value tokenIds, pastLengths;
  DenseSet<Value> positions;
  DenseMap<Value, unsigned> activations; ///< roots and views -> value index
  DenseMap<Value, std::pair<KVReadOp, bool>> cacheReads; ///< bool: is key
  DenseSet<int64_t> appendedLayers;
  Value logits;

  /// The norm linearInput fused into the launch being planned.
  Operation *fusedNormOp = nullptr;
};

} // namespace sits::codegen::detail

#endif // SITS_BACKENDS_CUDA_PROGRAMPLANNER_H
