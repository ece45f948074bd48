//===- Passes.h - The CUDA backend's fusion passes --------------*- C++ -*-===//
//
// Passes.td describes each pass. buildKernelPipeline adds them in the order
// sitsc runs them after --emit=optimized (sitsc --emit=kernels prints the
// result).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_TRANSFORMS_PASSES_H
#define SITS_BACKENDS_CUDA_TRANSFORMS_PASSES_H

#include "backends/cuda/Target.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace sits::kernel {

#define GEN_PASS_DECL
#include "backends/cuda/transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "backends/cuda/transforms/Passes.h.inc"

/// Adds the fusion passes with the options the code generator will use.
void buildKernelPipeline(mlir::OpPassManager &pm,
                         const codegen::CodegenOptions &options);

} // namespace sits::kernel

#endif // SITS_BACKENDS_CUDA_TRANSFORMS_PASSES_H
