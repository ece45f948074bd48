//===- EmulationHeader.cpp - The embedded emulation header ----------------===//

#include "backends/cuda/KernelLibrary.h"

namespace sits::codegen {

namespace {
const KernelHeader kEmulation[] = {
#include "backends/cuda/EmulationHeader.inc"
};
} // namespace

extern const char *const kEmulationHeader = kEmulation[0].source;

} // namespace sits::codegen
