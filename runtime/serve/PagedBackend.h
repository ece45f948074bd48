//===- PagedBackend.h - A backend with a paged cache's blocks ---*- C++ -*-===//
//
// A serve::Backend whose KV cache is accounted in blocks from a bounded
// pool by the runtime's BlockAllocator (runtime/src, CUDA-free), as a paged
// engine's session accounts for its own: the CPU reference backend and the
// scheduler tests' backend answer the pool's questions from it. (The GPU
// backend asks its session, which keeps one.) Link SitsKVBlocks.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_PAGEDBACKEND_H
#define SITS_RUNTIME_SERVE_PAGEDBACKEND_H

#include "Backend.h"
#include "src/BlockAllocator.h"

#include <memory>

namespace sits::serve {

class PagedBackend : public Backend {
public:
  uint32_t sharedBlockTokens() const override {
    return pages ? pages->tokensPerBlock() : 0;
  }
  uint32_t kvPoolBlocks() const override {
    return pages ? pages->totalBlocks() : 0;
  }
  uint32_t kvAvailableBlocks(const std::vector<uint32_t> &keep) const override {
    return pages ? pages->availableBlocks(keep) : 0;
  }

protected:
  /// The pool's bookkeeping; null for a cache where every slot holds its
  /// whole context.
  std::unique_ptr<runtime::BlockAllocator> pages;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_PAGEDBACKEND_H
