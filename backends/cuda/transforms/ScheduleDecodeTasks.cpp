//===- ScheduleDecodeTasks.cpp - The decode step as one task graph --------===//
//
// With --decode-kernels=persistent, the decode step of each batch bucket is
// one persistent kernel whose blocks run the tiles of the step's launches
// (tasks) in a compile-time order, each tile once the tasks it depends on
// have finished. This pass decides that schedule and records it as IR: a
// #kernel.task on every op that becomes a launch, a #kernel.decode_schedule
// on @decode. The launches, their grids and the bytes each one reads and
// writes are the code generator's own (codegen::planStepLaunches, with the
// memory plan's offsets), so the dependencies are those of the engine.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Plan.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

#include "llvm/ADT/BitVector.h"

#include <algorithm>

namespace sits::kernel {
#define GEN_PASS_DEF_SCHEDULEDECODETASKS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;
using codegen::BufferKind;

namespace {

/// The most sequences of a bucket the persistent kernel takes (the batch of
/// one tensor-core GEMV token group).
constexpr int64_t kMaxPersistentBucket = 8;

/// Bytes of one kind of buffer that a launch argument points at, as far as
/// the order of tasks goes: a workspace value's slice, or the binding's
/// offset for the others (a layer of the KV cache, the logits, counters).
struct Footprint {
  BufferKind kind;
  uint64_t begin, end;
  bool written;
};

bool overlaps(const Footprint &a, const Footprint &b) {
  return a.kind == b.kind && a.begin < b.end && b.begin < a.end;
}

/// Whether tasks `earlier` and `later` must run in that order: one writes
/// bytes the other reads or writes.
bool conflicts(ArrayRef<Footprint> earlier, ArrayRef<Footprint> later) {
  for (const Footprint &a : earlier)
    for (const Footprint &b : later)
      if ((a.written || b.written) && overlaps(a, b))
        return true;
  return false;
}

struct ScheduleDecodeTasksPass
    : public sits::kernel::impl::ScheduleDecodeTasksBase<
          ScheduleDecodeTasksPass> {
  using ScheduleDecodeTasksBase::ScheduleDecodeTasksBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"tasks", "tiles", "dependencies", "prefetches"});
    auto func =
        getOperation().lookupSymbol<func::FuncOp>(format::kDecodeProgram);
    if (!func || func.isExternal() || !func.getBody().hasOneBlock())
      return;
    if (func->hasAttr(KernelDialect::kDecodeScheduleAttrName)) {
      audit.change(func.getLoc(), "@decode", "its task graph",
                   "given in the input");
      return;
    }
    if (decodeKernels == "graph")
      return;
    if (decodeKernels != "persistent") {
      func.emitError() << "--decode-kernels must be graph or persistent, got '"
                       << decodeKernels << "'";
      return signalPassFailure();
    }
    if (failed(schedule(func, audit)))
      signalPassFailure();
  }

  /// The buckets the runtime captures: --batch-buckets or the default
  /// (format::getDefaultBatchBuckets), those up to max_batch, and max_batch.
  FailureOr<SmallVector<int64_t>> getBuckets(func::FuncOp func,
                                             int64_t maxBatch) {
    std::vector<uint32_t> given = format::getDefaultBatchBuckets(maxBatch);
    if (!batchBuckets.empty()) {
      std::string error;
      std::optional<std::vector<uint32_t>> parsed =
          codegen::parseBatchBuckets(batchBuckets, &error);
      if (!parsed)
        return func.emitError() << error;
      given = *parsed;
    }
    SmallVector<int64_t> buckets;
    for (uint32_t bucket : given)
      if (bucket < maxBatch)
        buckets.push_back(bucket);
    buckets.push_back(maxBatch);
    if (buckets.back() > kMaxPersistentBucket)
      return func.emitError()
             << "--decode-kernels=persistent: decode steps of at most "
             << kMaxPersistentBucket << " sequences are supported yet, but "
             << "--max-batch is " << maxBatch;
    return buckets;
  }

  LogicalResult schedule(func::FuncOp func, PassAudit &audit) {
    KVCacheType cache = getKVCacheArgType(func);
    if (!cache)
      return func.emitError() << "--decode-kernels=persistent: @decode does "
                                 "not take a KV cache";
    if (func->hasAttr(KernelDialect::kKVPagesAttrName))
      return func.emitError() << "--decode-kernels=persistent does not "
                                 "support a paged KV cache yet";
    if (cache.getQuant())
      return func.emitError() << "--decode-kernels=persistent does not "
                                 "support a quantized KV cache yet";
    const int64_t blocks = persistentBlocks;
    if (blocks < 1 || blocks > format::kMaxMultiprocessors)
      return func.emitError()
             << "--persistent-blocks must be from 1 to "
             << format::kMaxMultiprocessors << ", got " << blocks;
    for (Operation &op : func.getBody().front()) {
      std::string why = codegen::getPersistentUnsupportedReason(&op);
      if (!why.empty())
        return op.emitError() << "--decode-kernels=persistent does not "
                                 "support "
                              << why << " yet (" << op.getName() << ")";
    }
    if (!func->hasAttr(KernelDialect::kWorkspaceBytesAttrName))
      return func.emitError()
             << "--decode-kernels=persistent: @decode has no memory plan "
                "('"
             << KernelDialect::kWorkspaceBytesAttrName
             << "'); the task graph is made after --kernel-plan-memory";
    FailureOr<SmallVector<int64_t>> buckets =
        getBuckets(func, cache.getMaxBatch());
    if (failed(buckets))
      return failure();

    codegen::CodegenOptions options =
        planningOptions(dtype, target, maxPrefillTokens);
    std::vector<codegen::KernelSpec> kernels;
    FailureOr<codegen::ProgramPlan> program =
        codegen::planStepLaunches(func, options, kernels);
    if (failed(program))
      return failure();

    // One task per op that becomes a launch.
    const size_t count = program->launches.size();
    std::vector<std::vector<Footprint>> footprints(count);
    for (size_t t = 0; t < count; ++t) {
      const codegen::LaunchPlan &launch = program->launches[t];
      if (t && launch.owner == program->launches[t - 1].owner)
        return launch.owner->emitError()
               << "--decode-kernels=persistent does not support an op of "
                  "several launches yet ("
               << launch.owner->getName() << ")";
      const codegen::KernelSpec &spec = kernels[launch.kernel];
      for (size_t a = 0; a < launch.args.size(); ++a) {
        const codegen::ArgBinding &arg = launch.args[a];
        if (arg.kind != codegen::ArgBinding::Kind::Buffer ||
            arg.buffer == BufferKind::Weight)
          continue;
        bool written = spec.params[a].type.rfind("const ", 0) != 0;
        if (arg.buffer == BufferKind::Workspace) {
          const codegen::WorkspaceValue &value = program->values[arg.index];
          footprints[t].push_back(
              {arg.buffer, value.offset, value.offset + value.bytes, written});
        } else {
          footprints[t].push_back(
              {arg.buffer, arg.byteOffset, arg.byteOffset + 1, written});
        }
      }
    }

    // Dependencies, less those implied: `ancestors[t]` holds every task
    // that finishes before t starts.
    std::vector<llvm::BitVector> ancestors(count, llvm::BitVector(count));
    std::vector<SmallVector<int64_t>> deps(count);
    int64_t edges = 0;
    for (size_t t = 0; t < count; ++t) {
      llvm::BitVector covered(count);
      for (size_t p = t; p-- > 0;) {
        if (covered.test(p) || !conflicts(footprints[p], footprints[t]))
          continue;
        deps[t].push_back(static_cast<int64_t>(p));
        covered |= ancestors[p];
        ancestors[t] |= ancestors[p];
        ancestors[t].set(p);
      }
      std::reverse(deps[t].begin(), deps[t].end());
      edges += static_cast<int64_t>(deps[t].size());
    }

    // Tiles per bucket, dealt round-robin in task order.
    MLIRContext *context = &getContext();
    const size_t bucketCount = buckets->size();
    SmallVector<int64_t> dealt(bucketCount, 0);
    int64_t prefetches = 0;
    for (size_t t = 0; t < count; ++t) {
      const codegen::LaunchPlan &launch = program->launches[t];
      SmallVector<int64_t> tiles, firstBlock;
      for (size_t b = 0; b < bucketCount; ++b) {
        format::SymbolValues symbols =
            format::makeSymbols((*buckets)[b], 1, blocks);
        int64_t product = 1;
        for (const format::Expr &dim : launch.grid) {
          int64_t value = 0;
          std::string error;
          if (!format::evalExpr(dim, symbols, &value, &error) || value < 1)
            return launch.owner->emitError()
                   << "--decode-kernels=persistent: the grid of "
                   << launch.description << " at batch " << (*buckets)[b]
                   << " is not positive" << (error.empty() ? "" : ": ")
                   << error;
          product *= value;
        }
        tiles.push_back(product);
        firstBlock.push_back(dealt[b] % blocks);
        dealt[b] += product;
      }
      auto config = launch.owner->getAttrOfType<ConfigAttr>(
          KernelDialect::kConfigAttrName);
      bool prefetch = config && config.getWeightBytes() > 0;
      prefetches += prefetch;
      launch.owner->setAttr(KernelDialect::kTaskAttrName,
                            TaskAttr::get(context, static_cast<int64_t>(t),
                                          tiles, firstBlock, deps[t],
                                          prefetch));
    }
    auto scheduleAttr = DecodeScheduleAttr::get(context, blocks, *buckets);
    func->setAttr(KernelDialect::kDecodeScheduleAttrName, scheduleAttr);

    const int64_t largest = dealt.back();
    audit.add("tasks", static_cast<int64_t>(count));
    audit.add("tiles", largest);
    audit.add("dependencies", edges);
    audit.add("prefetches", prefetches);
    std::string buffer;
    llvm::raw_string_ostream printed(buffer);
    printed << scheduleAttr;
    audit.change(
        func.getLoc(), "@decode", printed.str(),
        std::to_string(count) + " tasks of " + std::to_string(largest) +
            " tiles at batch " + std::to_string(buckets->back()) + " over " +
            std::to_string(blocks) + " blocks, " + std::to_string(edges) +
            " dependencies (a task waits for the earlier ones that "
            "write what it reads, or read or write what it "
            "writes), " +
            std::to_string(prefetches) +
            " prefetching their weights (--decode-kernels="
            "persistent)");
    return success();
  }
};

} // namespace
