//===- ReferenceBackend.h - The serving backend on the CPU reference -*- C++
//-*-===//
//
// Runs the optimized program's @prefill and @decode steps (a module after
// --sits-kv-cache) with the CPU reference executor, as a serve::Backend:
// sits-serve-reference serves the real model this way where no GPU exists.
// Each slot owns a batch-1 KV-cache state, and each fed slot runs its own
// executor call: a batched call cannot give its sequences different step
// lengths, and the reference cache cannot reset one sequence of a batch.
// Correct before fast: the tokens equal `sits-exec --prompt` greedy ones.
//
// With usePagedCache, it keeps a paged engine's accounting of KV blocks
// (the runtime's BlockAllocator) over its own per-slot storage: slots take
// blocks from a bounded pool as they grow and fail a step with KVCacheFull
// when none is left, prefix blocks are shared rather than taken, so that
// the scheduler's admission by blocks runs on the CPU as over a GPU
// session.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_SERVE_REFERENCEBACKEND_H
#define SITS_COMPILER_SERVE_REFERENCEBACKEND_H

#include "compiler/reference/Executor.h"
#include "compiler/reference/Verification.h"

#include "PagedBackend.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace sits {

class ReferenceBackend : public serve::PagedBackend {
public:
  /// The backend of `module` (which must outlive it): an error when the
  /// module has no prefill/decode steps with a KV cache.
  static llvm::Expected<std::unique_ptr<ReferenceBackend>>
  create(mlir::ModuleOp module, reference::ExecutorOptions options = {});

  uint32_t slots() const override { return slotCount; }
  uint32_t maxSequenceLength() const override { return capacity; }
  std::vector<int32_t> step(const std::vector<serve::SlotStep> &steps) override;
  void release(uint32_t slot) override;

  /// Accounts for the cache as a paged engine's: blocks of `blockTokens`
  /// (a power of two from 16 to 1024, as sitsc's) from a pool of
  /// `poolBlocks` (0: every slot's whole context). Throws sits::Error for
  /// bad sizes. Before the block pool is allocated.
  void usePagedCache(uint32_t blockTokens, uint32_t poolBlocks);

  /// Prefix caching: the pool blocks are host copies of a slot's cache rows
  /// (every layer, keys and values), made when first saved.
  void allocateBlockPool(uint32_t blockTokens, uint32_t blocks) override;
  uint32_t cacheBlockTokens() const override { return blockTokens; }
  uint32_t poolBlocks() const override { return uint32_t(pool.size()); }
  void saveBlocks(uint32_t slot, uint32_t firstBlock,
                  const std::vector<uint32_t> &poolIds) override;
  void loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                  const SamplingParams &sampling) override;

private:
  ReferenceBackend(mlir::ModuleOp module, reference::Program program,
                   reference::ExecutorOptions options,
                   reference::KVCacheConfig config);
  int32_t runSlot(const serve::SlotStep &step);

  mlir::ModuleOp module;
  reference::Program program;
  reference::Executor executor;
  uint32_t slotCount;
  uint32_t capacity;
  reference::KVCacheConfig config;
  /// Each slot's cache (null: empty).
  std::vector<std::shared_ptr<reference::KVCacheState>> caches;
  uint32_t blockTokens = 0;
  /// The block pool (an empty block was never saved).
  std::vector<std::vector<float>> pool;
};

} // namespace sits

#endif // SITS_COMPILER_SERVE_REFERENCEBACKEND_H
