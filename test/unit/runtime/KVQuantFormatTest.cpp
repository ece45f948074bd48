//===- KVQuantFormatTest.cpp - Quantized KV cache in the engine format ----===//
//
// The metadata of a quantized KV cache (kv_cache.quant), the layout of its
// buffers, and the calibration counters turned into the log.
//
//===----------------------------------------------------------------------===//

#include "sits/EngineFormat.h"
#include "sits/Json.h"
#include "sits/KVCalibration.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace sits;
using namespace sits::format;

namespace {

/// Metadata of a 2-layer cache (2 kv heads of 64, 100 tokens, batch 3,
/// chunks of 16) with `quant` as kv_cache.quant (none when null).
/// `paged`: a pool of `paged` blocks of 32 tokens (4 a sequence).
std::string metadata(const json::Value *quant, const char *dtype = "f16",
                     uint64_t paged = 0, uint64_t blockTokens = 32) {
  json::Value meta = json::Value::object();
  json::Value &model = meta.set("model", json::Value::object());
  model.set("vocab_size", 256);
  json::Value &limits = meta.set("limits", json::Value::object());
  limits.set("max_batch", 3);
  limits.set("max_prefill_tokens", 16);
  limits.set("max_seq_len", 100);
  json::Value &kv = meta.set("kv_cache", json::Value::object());
  kv.set("layers", 2);
  kv.set("max_batch", 3);
  kv.set("kv_heads", 2);
  kv.set("capacity", 100);
  kv.set("head_dim", 64);
  kv.set("dtype", dtype);
  if (quant)
    kv.set("quant", *quant);
  if (paged) {
    kv.set("layout", "paged");
    kv.set("block_tokens", blockTokens);
    kv.set("blocks", paged);
    kv.set("block_table", "kv_block_table");
  }
  return meta.write();
}

json::Value quant(uint64_t bits, const char *keys, uint64_t block,
                  uint64_t hotRows) {
  json::Value q = json::Value::object();
  q.set("bits", bits);
  q.set("hot_window", 8);
  q.set("hot_rows", hotRows);
  q.set("group_size", 64);
  q.set("keys", keys);
  q.set("channel_block", block);
  return q;
}

TEST(KVQuantFormat, ParsesAndLaysOutTheBuffers) {
  json::Value q = quant(4, "per_channel", 32, 8 + 31 + 16);
  RuntimeConfig config;
  std::string error;
  ASSERT_TRUE(parseRuntimeConfig(metadata(&q), &config, &error)) << error;
  const KVCacheConfig &kv = config.kvCache;
  EXPECT_EQ(kv.coldBits, 4u);
  EXPECT_TRUE(kv.perChannelKeys);
  EXPECT_EQ(kv.channelBlock, 32u);
  EXPECT_EQ(kv.hotRows, 55u);
  // Per layer: hot 3*2*55*64*2 bytes; cold 3*2*100*32; scales the larger of
  // per-token (3*2*100*1*2) and per-channel (3*2*ceil(100/32)=4*64*2).
  KVCacheConfig::QuantLayout l = kv.quantLayout(true);
  EXPECT_EQ(l.hotBytes, 3u * 2 * 55 * 64 * 2);
  EXPECT_EQ(l.coldOffset, (l.hotBytes + 255) / 256 * 256);
  EXPECT_EQ(l.coldBytes, 3u * 2 * 100 * 32);
  EXPECT_EQ(l.scaleOffset, l.coldOffset + (l.coldBytes + 255) / 256 * 256);
  EXPECT_EQ(l.scaleBytes, 3u * 2 * 4 * 64 * 2);
  EXPECT_EQ(l.layerBytes % 256, 0u);
  EXPECT_EQ(kv.bufferBytes(true), 2 * l.layerBytes);
  EXPECT_EQ(kv.bufferBytes(false), kv.bufferBytes(true));

  // Without quant the buffers are the plain cache.
  ASSERT_TRUE(parseRuntimeConfig(metadata(nullptr), &config, &error));
  EXPECT_EQ(config.kvCache.coldBits, 0u);
  EXPECT_EQ(config.kvCache.bufferBytes(), 2u * 3 * 2 * 100 * 64 * 2);
}

/// A paged quantized cache: the hot ring per sequence, the cold rows and
/// scales in the pool's blocks, per-channel key scales per block of keys.
TEST(KVQuantFormat, PagedLayoutKeepsTheRingPerSequence) {
  json::Value q = quant(8, "per_channel", 16, 8 + 15 + 16);
  RuntimeConfig config;
  std::string error;
  ASSERT_TRUE(
      parseRuntimeConfig(metadata(&q, "f16", /*paged=*/7), &config, &error))
      << error;
  const KVCacheConfig &kv = config.kvCache;
  ASSERT_TRUE(kv.paged());
  EXPECT_EQ(kv.maxBlocksPerSeq(), 4u);
  KVCacheConfig::QuantLayout l = kv.quantLayout(true);
  // Hot: 3 sequences x 2 heads x 39 rows x 64 halves; cold: 7 blocks x 2
  // heads x 32 rows x 64 bytes; scales: per token 7*2*32*1*2, per channel
  // 7*2*(32/16)*64*2 (the larger).
  EXPECT_EQ(l.hotBytes, 3u * 2 * 39 * 64 * 2);
  EXPECT_EQ(l.coldBytes, 7u * 2 * 32 * 64);
  EXPECT_EQ(l.scaleBytes, 7u * 2 * 2 * 64 * 2);
  EXPECT_EQ(l.scaleOffset, l.coldOffset + (l.coldBytes + 255) / 256 * 256);
  EXPECT_EQ(kv.bufferBytes(true), 2 * l.layerBytes);

  // The same cache with more blocks grows by the cold parts only.
  ASSERT_TRUE(parseRuntimeConfig(metadata(&q, "f16", 14), &config, &error));
  EXPECT_EQ(config.kvCache.quantLayout(true).hotBytes, l.hotBytes);
  EXPECT_EQ(config.kvCache.quantLayout(true).coldBytes, 2 * l.coldBytes);

  // A block of per-channel keys must lie in one pool block: blocks of 32
  // tokens cannot hold key blocks of 64.
  json::Value wide = quant(8, "per_channel", 64, 8 + 63 + 16);
  EXPECT_FALSE(parseRuntimeConfig(metadata(&wide, "f16", 7), &config, &error));
  EXPECT_NE(error.find("not a multiple of \"quant.channel_block\" (64)"),
            std::string::npos)
      << error;
  // Per-token keys (key blocks of one) fit any block.
  json::Value tokens = quant(4, "per_token", 1, 24);
  EXPECT_TRUE(
      parseRuntimeConfig(metadata(&tokens, "f16", 7, 16), &config, &error))
      << error;
  EXPECT_EQ(config.kvCache.quantLayout(false).coldBytes, 7u * 2 * 16 * 32);
}

TEST(KVQuantFormat, RejectsInconsistentConfigs) {
  RuntimeConfig config;
  std::string error;
  auto rejects = [&](const json::Value &q, const char *dtype = "f16") {
    error.clear();
    return !parseRuntimeConfig(metadata(&q, dtype), &config, &error);
  };
  EXPECT_TRUE(rejects(quant(5, "per_token", 1, 24)));
  EXPECT_NE(error.find("inconsistent"), std::string::npos) << error;
  EXPECT_TRUE(rejects(quant(8, "per_row", 1, 24)));
  EXPECT_NE(error.find("kv_cache.quant.keys"), std::string::npos) << error;
  // The ring must hold the window, a key block and a prefill chunk.
  EXPECT_TRUE(rejects(quant(8, "per_token", 1, 23)));
  EXPECT_TRUE(rejects(quant(8, "per_channel", 32, 24)));
  EXPECT_FALSE(rejects(quant(8, "per_token", 1, 24))) << error;
  // A ring of the whole capacity (100 tokens) never wraps: enough.
  json::Value wide = quant(8, "per_channel", 8, 100);
  wide.set("hot_window", 90);
  EXPECT_FALSE(rejects(wide)) << error;
  wide.set("hot_rows", 99);
  EXPECT_TRUE(rejects(wide));
  // Per-token keys have blocks of one; the hot part is 16-bit.
  EXPECT_TRUE(rejects(quant(8, "per_token", 4, 40)));
  EXPECT_TRUE(rejects(quant(8, "per_token", 1, 24), "f32"));
  json::Value q = quant(8, "per_token", 1, 24);
  q.set("group_size", 128);
  EXPECT_TRUE(rejects(q));
  EXPECT_NE(error.find("group_size"), std::string::npos) << error;
}

/// Counters of one (layer, head, K/V) slot as kv_quant.cuh writes them.
void fill(std::vector<uint64_t> &words, size_t slot, uint64_t tokens,
          uint64_t groups, uint64_t values, uint64_t clipped, double scaleSum,
          double errorSum, float scaleMin, float scaleMax) {
  uint64_t *w = words.data() + slot * kKVCalibrationWords;
  w[0] = tokens;
  w[1] = groups;
  w[2] = values;
  w[3] = clipped;
  std::memcpy(&w[4], &scaleSum, 8);
  std::memcpy(&w[5], &errorSum, 8);
  uint32_t bits;
  std::memcpy(&bits, &scaleMin, 4);
  w[6] = 0xffffffffull - bits;
  std::memcpy(&bits, &scaleMax, 4);
  w[7] = bits;
}

TEST(KVQuantFormat, CalibrationLog) {
  KVCacheConfig kv;
  kv.layers = 2;
  kv.kvHeads = 2;
  kv.headDim = 64;
  kv.coldBits = 4;
  kv.hotWindow = 8;
  kv.groupSize = 64;
  kv.perChannelKeys = true;
  kv.channelBlock = 32;
  std::vector<uint64_t> words(2 * 2 * 2 * kKVCalibrationWords, 0);
  // Layer 1, head 0, keys: 64 tokens in 2 blocks of 32 (128 channel
  // scales); values of layer 1, head 1: 10 tokens.
  fill(words, (1 * 2 + 0) * 2 + 0, 64, 128, 4096, 3, 128 * 0.25, 4096 * 1e-4,
       0.125f, 0.5f);
  fill(words, (1 * 2 + 1) * 2 + 1, 10, 10, 640, 0, 10 * 0.5, 640 * 2e-4, 0.25f,
       1.0f);
  KVCalibrationStats k = kvCalibrationAt(kv, words, 1, 0, true);
  EXPECT_EQ(k.tokens, 64u);
  EXPECT_EQ(k.clipped, 3u);
  EXPECT_DOUBLE_EQ(k.scaleMin, 0.125);
  EXPECT_DOUBLE_EQ(k.scaleMax, 0.5);
  EXPECT_DOUBLE_EQ(k.scaleMean, 0.25);
  EXPECT_NEAR(k.meanSquaredError, 1e-4, 1e-12);
  KVCalibrationStats none = kvCalibrationAt(kv, words, 0, 0, true);
  EXPECT_EQ(none.tokens, 0u);
  EXPECT_EQ(none.scaleMin, 0.0);

  json::Value log;
  std::string error;
  ASSERT_TRUE(json::parse(kvCalibrationJson(kv, words), &log, &error)) << error;
  const json::Value *layers = log.find("layers");
  ASSERT_TRUE(layers && layers->isArray());
  const json::Value *total = log.find("total");
  ASSERT_TRUE(total);
  EXPECT_EQ(total->find("keys")->find("tokens")->getInteger(), 64);
  EXPECT_EQ(total->find("values")->find("tokens")->getInteger(), 10);
  std::string summary = kvCalibrationSummary(kv, words);
  EXPECT_NE(summary.find("layer 1 K: 64 tokens, scale 0.125/0.25/0.5"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("3 of 4096 clipped"), std::string::npos) << summary;
}

TEST(KVQuantFormat, LogPaths) {
  std::string error;
  EXPECT_FALSE(checkWritablePath("/nonexistent-folder/log.json", &error));
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  EXPECT_FALSE(checkWritablePath("/tmp", &error));
  EXPECT_NE(error.find("is a folder"), std::string::npos) << error;
  char dir[] = "/tmp/sits-kvlog-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  std::string path = std::string(dir) + "/log.json";
  EXPECT_TRUE(checkWritablePath(path, &error)) << error;
  ASSERT_TRUE(writeTextFileAtomic(path, "{}\n", &error)) << error;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{}\n");
  EXPECT_FALSE(
      writeTextFileAtomic(std::string(dir) + "/no/log.json", "{}", &error));
  std::remove(path.c_str());
  rmdir(dir);
}

} // namespace
