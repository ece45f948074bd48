//===- Registration.cpp - Everything sitsc and sits-opt register ----------===//

#include "compiler/registration/Registration.h"

#include "backends/cuda/transforms/Passes.h"
#include "compiler/pipeline/Pipeline.h"
#include "dialects/kernel/KernelDialect.h"
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/sits/SitsDialect.h"
#include "frontends/onnx/Passes.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/Passes.h"

void sits::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<sits::SitsDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  registry.insert<sits::onnx::OnnxDialect>();
  registry.insert<sits::kernel::KernelDialect>();
}

void sits::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  sits::registerSitsPasses();
  sits::registerSitsOnnxPasses();
  sits::kernel::registerKernelPasses();
  sits::registerPipelines();
}
