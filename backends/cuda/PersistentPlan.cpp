//===- PersistentPlan.cpp - The persistent decode kernels' tables ---------===//
//
// With --decode-kernels=persistent, @decode carries its task graph
// (#kernel.decode_schedule, a #kernel.task on each op that becomes a
// launch; ScheduleDecodeTasks.cpp). This evaluates it per batch bucket for
// the emitter: each task's launch (kernel, grid, block, shared memory) as
// the graph-mode step has it, and where its arguments lie in the kernel's
// table, and refuses what the persistent kernel cannot run.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/Plan.h"
#include "dialects/kernel/KernelOps.h"
#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace sits::codegen {

std::string getPersistentUnsupportedReason(Operation *op) {
  if (isa<TVCLMHeadOp>(op))
    return "the TVC LM head";
  if (isa<DequantizeOp>(op))
    return "quantized weights";
  if (auto launch = dyn_cast<LaunchOp>(op)) {
    if (launch.getFusion() == FusionKind::LMHead ||
        (launch.getFusion() != FusionKind::Norm &&
         !launch.getOpsOfType<RMSNormOp>().empty()))
      return "an rms_norm fused into a GEMV (--norm-fusion)";
    if (std::optional<uint64_t> bits = launch.getOutputOperandBits();
        bits && *bits != KernelDialect::kInputOrderOperandBits)
      return "16-bit operands for quantized GEMVs";
  }
  auto config = op->getAttrOfType<ConfigAttr>(KernelDialect::kConfigAttrName);
  if (!config)
    return "";
  switch (config.getKernel()) {
  case KernelKind::Gemv:
  case KernelKind::GemvTensorCore:
  case KernelKind::Attention:
  case KernelKind::AttentionSplit:
  case KernelKind::Embedding:
  case KernelKind::RMSNorm:
  case KernelKind::LayerNorm:
  case KernelKind::Rope:
  case KernelKind::AppendKV:
  case KernelKind::Elementwise:
    return "";
  default:
    return "the " + stringifyKernelKind(config.getKernel()).str() + " kernel";
  }
}

std::optional<ArgumentBlock> getArgumentBlock(const KernelSpec &spec) {
  ArgumentBlock block;
  uint64_t alignment = 1;
  for (const KernelParam &param : spec.params) {
    uint64_t size = 0;
    if (!param.type.empty() && param.type.back() == '*')
      size = 8;
    else if (param.type == "int" || param.type == "float")
      size = 4;
    else
      return std::nullopt;
    block.bytes = (block.bytes + size - 1) / size * size;
    block.offsets.push_back(block.bytes);
    block.bytes += size;
    alignment = std::max(alignment, size);
  }
  block.bytes = (block.bytes + alignment - 1) / alignment * alignment;
  return block;
}

FailureOr<PersistentDecodePlan> planPersistentDecode(func::FuncOp decode,
                                                     const EnginePlan &plan) {
  auto schedule = decode->getAttrOfType<DecodeScheduleAttr>(
      KernelDialect::kDecodeScheduleAttrName);
  const std::string option = "--decode-kernels=persistent: ";
  for (Operation &op : decode.getBody().front()) {
    std::string why = getPersistentUnsupportedReason(&op);
    if (!why.empty())
      return op.emitError() << option << "the persistent kernel cannot run "
                            << why << " yet (" << op.getName() << ")";
  }
  PersistentDecodePlan persistent;
  persistent.blocks = static_cast<uint32_t>(schedule.getBlocks());
  persistent.trace = plan.options.persistentTrace;
  const std::vector<LaunchPlan> &launches = plan.decode.launches;
  std::vector<TaskAttr> tasks;
  for (size_t t = 0; t < launches.size(); ++t) {
    Operation *owner = launches[t].owner;
    auto task = owner->getAttrOfType<TaskAttr>(KernelDialect::kTaskAttrName);
    if (!task || task.getId() != static_cast<int64_t>(t))
      return owner->emitError()
             << option << "decode launch " << t << " (" << owner->getName()
             << ") is not task " << t
             << " of the task graph: each op that becomes a launch is one "
                "task, in program order";
    tasks.push_back(task);
  }

  for (auto [b, batch] : llvm::enumerate(schedule.getBuckets())) {
    PersistentDecodePlan::Bucket bucket;
    bucket.batch = static_cast<uint32_t>(batch);
    format::SymbolValues symbols =
        format::makeSymbols(batch, 1, schedule.getBlocks());
    for (size_t t = 0; t < launches.size(); ++t) {
      const LaunchPlan &launch = launches[t];
      Operation *owner = launch.owner;
      auto eval = [&](const format::Expr &expr) -> FailureOr<uint64_t> {
        int64_t value = 0;
        std::string error;
        if (!format::evalExpr(expr, symbols, &value, &error) || value < 0)
          return owner->emitError() << option << "task " << t << " at batch "
                                    << batch << ": " << error;
        return static_cast<uint64_t>(value);
      };
      PersistentDecodePlan::Task task;
      task.kernel = launch.kernel;
      task.tiles = 1;
      for (int d = 0; d < 3; ++d) {
        FailureOr<uint64_t> extent = eval(launch.grid[d]);
        if (failed(extent))
          return failure();
        task.grid[d] = *extent;
        task.tiles *= *extent;
      }
      FailureOr<uint64_t> threads = eval(launch.block[0]);
      FailureOr<uint64_t> height = eval(launch.block[1]);
      FailureOr<uint64_t> depth = eval(launch.block[2]);
      FailureOr<uint64_t> shared = eval(launch.sharedBytes);
      if (failed(threads) || failed(height) || failed(depth) || failed(shared))
        return failure();
      task.threads = *threads;
      task.sharedBytes = *shared;
      TaskAttr attr = tasks[t];
      if (static_cast<int64_t>(task.tiles) != attr.getTiles()[b] ||
          attr.getFirstBlock()[b] >= schedule.getBlocks())
        return owner->emitError()
               << option << "task " << t << " has " << attr.getTiles()[b]
               << " tiles from block " << attr.getFirstBlock()[b]
               << " at batch " << batch << ", but its launch ("
               << launch.description << ") has a grid of " << task.tiles
               << " blocks (of " << schedule.getBlocks() << ")";
      task.firstBlock = static_cast<uint64_t>(attr.getFirstBlock()[b]);
      // The kernel's threads are its block's first ones: threadIdx is not
      // the tile's in more dimensions, and the tile's barrier counts warps.
      if (*height != 1 || *depth != 1 || task.threads % 32 != 0 ||
          task.threads == 0 || task.threads > 1024)
        return owner->emitError()
               << option << "the persistent kernel cannot run task " << t
               << " (" << launch.description << ") yet: blocks of "
               << task.threads << " x " << *height << " x " << *depth
               << " threads (it runs one dimension of whole warps)";
      if (task.sharedBytes > static_cast<uint64_t>(kMaxSharedBytes))
        return owner->emitError()
               << option << "task " << t << " needs " << task.sharedBytes
               << " bytes of shared memory, more than a resident block "
                  "has ("
               << kMaxSharedBytes << ")";
      for (int64_t dep : attr.getDeps())
        task.deps.push_back(static_cast<unsigned>(dep));
      std::optional<ArgumentBlock> args =
          getArgumentBlock(plan.kernels[launch.kernel]);
      if (!args)
        return owner->emitError()
               << option << "the persistent kernel cannot pass the "
               << "arguments of " << plan.kernels[launch.kernel].name
               << " yet (a parameter of a type other than a pointer, int "
                  "or float)";
      task.argOffset = bucket.argBytes;
      bucket.argBytes += (args->bytes + kArgumentBlockAlignment - 1) /
                         kArgumentBlockAlignment * kArgumentBlockAlignment;
      bucket.threads = std::max(bucket.threads, task.threads);
      bucket.sharedBytes = std::max(bucket.sharedBytes, task.sharedBytes);
      bucket.tasks.push_back(std::move(task));
    }
    persistent.buckets.push_back(std::move(bucket));
  }
  return persistent;
}

} // namespace sits::codegen
