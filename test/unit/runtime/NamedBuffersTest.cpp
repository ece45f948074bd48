//===- NamedBuffersTest.cpp - The buffers the runtime reads by name -------===//
//
// The session reads the TVC head's counters and the quantized KV cache's
// calibration counters from activation buffers found by name. A session
// that misses them reports no TVC counts and writes an empty calibration
// log (a merge once sent activation buffers past the TVC lookup).
//
//===----------------------------------------------------------------------===//

#include "src/NamedBuffers.h"

#include "sits/KVCalibration.h"

#include <gtest/gtest.h>

using namespace sits;
using format::BufferDesc;
using format::BufferRole;

namespace {

BufferDesc buffer(std::string name, BufferRole role, uint64_t bytes) {
  BufferDesc desc;
  desc.name = std::move(name);
  desc.role = role;
  desc.bytes = bytes;
  return desc;
}

std::vector<BufferDesc> engineBuffers() {
  return {buffer("w", BufferRole::Weight, 64),
          buffer("token_ids", BufferRole::TokenIds, 32),
          buffer("workspace", BufferRole::Activation, 4096),
          buffer(format::kKVCalibrationBuffer, BufferRole::Activation, 512),
          buffer("tvc_scratch", BufferRole::Activation, 1024),
          buffer("tvc_counters", BufferRole::Activation, 24)};
}

TEST(NamedBuffersTest, FindsTheTvcCountersAndTheCalibrationCounters) {
  runtime::NamedBuffers named =
      runtime::findNamedBuffers(engineBuffers(), /*quantizedKV=*/true);
  EXPECT_EQ(named.kvCalibration, 3);
  EXPECT_EQ(named.tvcCounters, 5);
}

TEST(NamedBuffersTest, CalibrationCountersOnlyWithAQuantizedCache) {
  runtime::NamedBuffers named =
      runtime::findNamedBuffers(engineBuffers(), /*quantizedKV=*/false);
  EXPECT_EQ(named.kvCalibration, -1);
  EXPECT_EQ(named.tvcCounters, 5);
}

TEST(NamedBuffersTest, IgnoresWeightsAndBuffersTooSmall) {
  std::vector<BufferDesc> buffers = {
      buffer("tvc_counters", BufferRole::Weight, 24),
      buffer(format::kKVCalibrationBuffer, BufferRole::Weight, 512)};
  runtime::NamedBuffers named = runtime::findNamedBuffers(buffers, true);
  EXPECT_EQ(named.tvcCounters, -1);
  EXPECT_EQ(named.kvCalibration, -1);
  buffers = {buffer("tvc_counters", BufferRole::Activation, 16)};
  EXPECT_EQ(runtime::findNamedBuffers(buffers, true).tvcCounters, -1);
}

} // namespace
