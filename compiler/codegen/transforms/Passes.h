//===- Passes.h - The CUDA backend's fusion passes --------------*- C++ -*-===//
//
// Passes.td describes each pass. buildKernelPipeline adds them in the order
// sitsc runs them after --emit=optimized (sitsc --emit=kernels prints the
// result).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_CODEGEN_TRANSFORMS_PASSES_H
#define SITS_COMPILER_CODEGEN_TRANSFORMS_PASSES_H

#include "compiler/codegen/Target.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace sits::kernel {

#define GEN_PASS_DECL
#include "compiler/codegen/transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/transforms/Passes.h.inc"

/// Adds the fusion passes with the options the code generator will use.
void buildKernelPipeline(mlir::OpPassManager &pm,
                         const codegen::CodegenOptions &options);

} // namespace sits::kernel

#endif // SITS_COMPILER_CODEGEN_TRANSFORMS_PASSES_H
