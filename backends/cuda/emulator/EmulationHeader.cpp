//===- EmulationHeader.cpp - The embedded emulation headers ---------------===//

#include "backends/cuda/KernelLibrary.h"

namespace sits::codegen {

namespace {
const KernelHeader kEmulation[] = {
#include "backends/cuda/EmulationHeader.inc"
};
} // namespace

/// emulation.h (force-included) and the headers it includes, named
/// "sits/emulation.h", ...
const KernelHeader *getEmulationHeaders(size_t *count) {
  *count = sizeof(kEmulation) / sizeof(kEmulation[0]);
  return kEmulation;
}

} // namespace sits::codegen
