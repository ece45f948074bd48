//===- OnnxKernels.cpp - Kernels of the onnx import dialect ---------------===//

#include "compiler/reference/Kernels.h"

using namespace sits::reference;

void sits::reference::registerOnnxKernels(KernelTable &table) {}
