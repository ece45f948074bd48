//===- EmulationHeader.cpp - The embedded emulation header ----------------===//

#include "compiler/codegen/KernelLibrary.h"

namespace sits::codegen {

namespace {
const KernelHeader kEmulation[] = {
#include "compiler/codegen/EmulationHeader.inc"
};
} // namespace

extern const char *const kEmulationHeader = kEmulation[0].source;

} // namespace sits::codegen
