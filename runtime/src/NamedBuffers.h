//===- NamedBuffers.h - Buffers the runtime reads by name ---*- C++ -*-===//
//-*-===//
//
// Most session buffers are only kernel arguments; a few activation buffers
// are also read or written by the runtime by name: the quantized KV cache's
// calibration counters and the TVC head's counters. Finding them is kept
// apart from the CUDA allocation so that it is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_NAMEDBUFFERS_H
#define SITS_RUNTIME_SRC_NAMEDBUFFERS_H

#include "sits/EngineFormat.h"

#include <vector>

namespace sits::runtime {

/// Indices into the engine's buffers; -1 where the engine has none.
struct NamedBuffers {
  int kvCalibration = -1; ///< u64 counters of a quantized KV cache
  int tvcCounters = -1;   ///< the TVC head's u64 [proved, fallback, mode]
};

/// The named activation buffers of `buffers`. `quantizedKV`: the engine's
/// KV cache has a cold part (only then are calibration counters read).
NamedBuffers findNamedBuffers(const std::vector<format::BufferDesc> &buffers,
                              bool quantizedKV);

} // namespace sits::runtime

#endif // SITS_RUNTIME_SRC_NAMEDBUFFERS_H
