//===- KernelPipeline.cpp - The fusion passes in sitsc's order ------------===//

#include "backends/cuda/transforms/Passes.h"

using namespace mlir;

void sits::kernel::buildKernelPipeline(OpPassManager &pm,
                                       const codegen::CodegenOptions &options) {
  // The order is part of the decisions: the gated and residual epilogues
  // take their linear layers before grouping sees them, and the norms and
  // operand layouts look at the launches formed by then.
  pm.addPass(createFuseGatedLinears());
  pm.addPass(createFuseResidualLinears());
  pm.addPass(createGroupLinears());
  pm.addPass(createFuseRopeAppend());
  std::string weightType = codegen::weightTypeName(options.weightType);
  pm.addPass(
      createFuseNorms({options.fuseNorms, options.target.getSm(), weightType}));
  pm.addPass(createChooseOperandLayout({options.target.getSm(), weightType}));
}
