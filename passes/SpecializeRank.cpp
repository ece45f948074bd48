//===- SpecializeRank.cpp - The program of one rank -----------------------===//
//
// specializeForRank (dialects/sits/Sharding.h) as a pass, so that lit tests
// and sits-opt show one rank's program.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/Sharding.h"
#include "passes/Passes.h"

namespace sits {
#define GEN_PASS_DEF_SPECIALIZERANK
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {
struct SpecializeRankPass
    : public sits::impl::SpecializeRankBase<SpecializeRankPass> {
  using SpecializeRankBase::SpecializeRankBase;

  void runOnOperation() override {
    if (failed(specializeForRankInPlace(getOperation(), rank)))
      signalPassFailure();
  }
};
} // namespace
