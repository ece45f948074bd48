//===- KernelLibrary.cpp - The embedded kernel headers --------------------===//

#include "backends/cuda/KernelLibrary.h"

namespace sits::codegen {

namespace {
const KernelHeader kHeaders[] = {
#include "backends/cuda/KernelLibrary.inc"
};
} // namespace

const KernelHeader *getKernelHeaders(size_t *count) {
  *count = sizeof(kHeaders) / sizeof(kHeaders[0]);
  return kHeaders;
}

} // namespace sits::codegen
