//===- AtomicOutput.h - Text outputs written whole or not at all -*- C++ -*-//

#ifndef SITS_COMPILER_PIPELINE_ATOMICOUTPUT_H
#define SITS_COMPILER_PIPELINE_ATOMICOUTPUT_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace sits {

/// Writes what `print` prints to `path`: stdout for "-"; a path that is a
/// device or a pipe (/dev/stdout, /dev/null, a FIFO) is written as the stream
/// it is; any other file through sits::AtomicFile, so that it appears
/// complete or not at all and an interrupted run leaves the old one intact.
llvm::Error writeOutputAtomically(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(llvm::raw_ostream &)> print);

} // namespace sits

#endif // SITS_COMPILER_PIPELINE_ATOMICOUTPUT_H
