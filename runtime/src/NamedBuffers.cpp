//===- NamedBuffers.cpp - Buffers the runtime itself reads ----------------===//

#include "src/NamedBuffers.h"

#include "sits/KVCalibration.h"

namespace sits::runtime {

NamedBuffers findNamedBuffers(const std::vector<format::BufferDesc> &buffers,
                              bool quantizedKV) {
  NamedBuffers named;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const format::BufferDesc &buffer = buffers[i];
    if (buffer.role != format::BufferRole::Activation)
      continue;
    if (quantizedKV && buffer.name == format::kKVCalibrationBuffer)
      named.kvCalibration = static_cast<int>(i);
    // Three u64: proved rows, fallback rows, mode.
    if (buffer.name == "tvc_counters" && buffer.bytes >= 24)
      named.tvcCounters = static_cast<int>(i);
  }
  return named;
}

} // namespace sits::runtime
