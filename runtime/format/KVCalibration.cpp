//===- KVCalibration.cpp - Statistics of a quantized KV cache -------------===//

#include "sits/KVCalibration.h"
#include "sits/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sits {
namespace format {

namespace {

double asDouble(uint64_t word) {
  double value;
  std::memcpy(&value, &word, 8);
  return value;
}

float asFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// Merges `b` into `a` (sums and extremes; means recomputed by the caller).
struct Totals {
  uint64_t tokens = 0, groups = 0, values = 0, clipped = 0;
  double scaleSum = 0, errorSum = 0, scaleMin = 0, scaleMax = 0;
  void add(const KVCalibrationStats &s) {
    if (s.groups) {
      scaleMin = groups ? std::min(scaleMin, s.scaleMin) : s.scaleMin;
      scaleMax = std::max(scaleMax, s.scaleMax);
    }
    tokens += s.tokens;
    groups += s.groups;
    values += s.values;
    clipped += s.clipped;
    scaleSum += s.scaleMean * double(s.groups);
    errorSum += s.meanSquaredError * double(s.values);
  }
  KVCalibrationStats stats() const {
    KVCalibrationStats s;
    s.tokens = tokens;
    s.groups = groups;
    s.values = values;
    s.clipped = clipped;
    s.scaleMin = scaleMin;
    s.scaleMax = scaleMax;
    s.scaleMean = groups ? scaleSum / double(groups) : 0.0;
    s.meanSquaredError = values ? errorSum / double(values) : 0.0;
    return s;
  }
};

std::string number(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

std::string statsJson(const KVCalibrationStats &s) {
  return "{\"tokens\": " + std::to_string(s.tokens) +
         ", \"groups\": " + std::to_string(s.groups) +
         ", \"values\": " + std::to_string(s.values) +
         ", \"clipped\": " + std::to_string(s.clipped) +
         ", \"scale_min\": " + number(s.scaleMin) +
         ", \"scale_mean\": " + number(s.scaleMean) +
         ", \"scale_max\": " + number(s.scaleMax) +
         ", \"mean_squared_error\": " + number(s.meanSquaredError) + "}";
}

} // namespace

KVCalibrationStats kvCalibrationAt(const KVCacheConfig &kv,
                                   const std::vector<uint64_t> &words,
                                   uint32_t layer, uint32_t head, bool keys) {
  KVCalibrationStats s;
  size_t at = ((size_t(layer) * kv.kvHeads + head) * 2 + (keys ? 0 : 1)) *
              kKVCalibrationWords;
  if (at + kKVCalibrationWords > words.size())
    return s;
  const uint64_t *w = words.data() + at;
  s.tokens = w[0];
  s.groups = w[1];
  s.values = w[2];
  s.clipped = w[3];
  s.scaleMean = s.groups ? asDouble(w[4]) / double(s.groups) : 0.0;
  s.meanSquaredError = s.values ? asDouble(w[5]) / double(s.values) : 0.0;
  if (s.groups) {
    s.scaleMin = asFloat(static_cast<uint32_t>(0xffffffffull - w[6]));
    s.scaleMax = asFloat(static_cast<uint32_t>(w[7]));
  }
  return s;
}

std::string kvCalibrationJson(const KVCacheConfig &kv,
                              const std::vector<uint64_t> &words) {
  std::string out =
      "{\n  \"kv_cache\": {\"bits\": " + std::to_string(kv.coldBits) +
      ", \"hot_window\": " + std::to_string(kv.hotWindow) +
      ", \"group_size\": " + std::to_string(kv.groupSize) + ", \"keys\": \"" +
      (kv.perChannelKeys ? "per_channel" : "per_token") +
      "\", \"channel_block\": " + std::to_string(kv.channelBlock) +
      "},\n  \"layers\": [";
  Totals keyTotal, valueTotal;
  for (uint32_t layer = 0; layer < kv.layers; ++layer) {
    out += std::string(layer ? "," : "") +
           "\n    {\"layer\": " + std::to_string(layer) + ", \"heads\": [";
    for (uint32_t head = 0; head < kv.kvHeads; ++head) {
      KVCalibrationStats k = kvCalibrationAt(kv, words, layer, head, true);
      KVCalibrationStats v = kvCalibrationAt(kv, words, layer, head, false);
      keyTotal.add(k);
      valueTotal.add(v);
      out += std::string(head ? "," : "") +
             "\n      {\"head\": " + std::to_string(head) +
             ",\n       \"keys\": " + statsJson(k) +
             ",\n       \"values\": " + statsJson(v) + "}";
    }
    out += "]}";
  }
  out += "\n  ],\n  \"total\": {\"keys\": " + statsJson(keyTotal.stats()) +
         ",\n            \"values\": " + statsJson(valueTotal.stats()) +
         "}\n}\n";
  return out;
}

std::string kvCalibrationSummary(const KVCacheConfig &kv,
                                 const std::vector<uint64_t> &words) {
  std::string out;
  char buf[256];
  for (uint32_t layer = 0; layer < kv.layers; ++layer)
    for (bool keys : {true, false}) {
      Totals total;
      for (uint32_t head = 0; head < kv.kvHeads; ++head)
        total.add(kvCalibrationAt(kv, words, layer, head, keys));
      KVCalibrationStats s = total.stats();
      std::snprintf(buf, sizeof(buf),
                    "kv calibration: layer %u %s: %llu tokens, scale "
                    "%.4g/%.4g/%.4g (min/mean/max), %llu of %llu clipped, "
                    "mse %.4g\n",
                    layer, keys ? "K" : "V", (unsigned long long)s.tokens,
                    s.scaleMin, s.scaleMean, s.scaleMax,
                    (unsigned long long)s.clipped, (unsigned long long)s.values,
                    s.meanSquaredError);
      out += buf;
    }
  return out;
}

bool checkWritablePath(const std::string &path, std::string *error) {
  struct stat st;
  if (path.empty()) {
    *error = "an empty file name";
    return false;
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    *error = "'" + path + "' is a folder";
    return false;
  }
  size_t slash = path.find_last_of('/');
  std::string folder = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : path.substr(0, slash);
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "cannot write '" + path + "': the folder '" + folder +
             "' does not exist";
    return false;
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    *error = "cannot write '" + path + "': the folder '" + folder +
             "' is not writable";
    return false;
  }
  return true;
}

bool writeTextFileAtomic(const std::string &path, const std::string &text,
                         std::string *error) {
  return writeFileAtomic(path, text, error);
}

} // namespace format
} // namespace sits
