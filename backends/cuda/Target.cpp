//===- Target.cpp - Code generation options -------------------------------===//

#include "backends/cuda/Target.h"
#include "dialects/kernel/KernelDialect.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace sits::codegen {

std::string Target::getName() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + suffix;
}

std::optional<Target> parseTarget(const std::string &text, std::string *error) {
  auto fail = [&](const std::string &why) -> std::optional<Target> {
    *error = "--target must be a GPU architecture such as sm_90a, sm_90 or "
             "sm_80, got '" +
             text + "'" + why;
    return std::nullopt;
  };
  if (text.rfind("sm_", 0) != 0)
    return fail("");
  std::string rest = text.substr(3);
  std::string digits;
  size_t pos = 0;
  while (pos < rest.size() &&
         std::isdigit(static_cast<unsigned char>(rest[pos])))
    digits += rest[pos++];
  std::string suffix = rest.substr(pos);
  if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0' ||
      (suffix != "" && suffix != "a" && suffix != "f"))
    return fail("");
  Target target;
  target.major =
      static_cast<unsigned>(std::stoul(digits.substr(0, digits.size() - 1)));
  target.minor = static_cast<unsigned>(digits.back() - '0');
  target.suffix = suffix;
  if (target.getSm() < 75)
    return fail(" (CUDA 13 compiles for sm_75 and newer)");
  return target;
}

std::optional<format::DType> parseWeightType(const std::string &text,
                                             std::string *error) {
  if (text == "fp16" || text == "f16")
    return format::DType::F16;
  if (text == "bf16")
    return format::DType::BF16;
  if (text == "fp32" || text == "f32")
    return format::DType::F32;
  *error = "--dtype must be fp16, bf16 or fp32, got '" + text + "'";
  return std::nullopt;
}

const char *weightTypeName(format::DType type) {
  switch (type) {
  case format::DType::F16:
    return "fp16";
  case format::DType::BF16:
    return "bf16";
  default:
    return "fp32";
  }
}

std::optional<std::vector<uint32_t>> parseBatchBuckets(const std::string &text,
                                                       std::string *error) {
  std::vector<uint32_t> buckets;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    bool digits = !item.empty() && item.size() <= 5;
    for (char c : item)
      digits &= std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!digits || std::stoul(item) == 0) {
      *error = "--batch-buckets must be increasing positive batch sizes "
               "separated by commas (1,2,4,8), got '" +
               text + "'";
      return std::nullopt;
    }
    uint32_t value = static_cast<uint32_t>(std::stoul(item));
    if (!buckets.empty() && value <= buckets.back()) {
      *error = "--batch-buckets must increase, got '" + text + "'";
      return std::nullopt;
    }
    buckets.push_back(value);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return buckets;
}

std::optional<CodegenOptions>
parseCodegenOptions(const CodegenOptionValues &values, std::string *error,
                    const std::set<std::string> &given) {
  CodegenOptions options{CodegenOptions::FromValues()};
  std::optional<Target> target = parseTarget(values.target, error);
  if (!target)
    return std::nullopt;
  options.target = *target;
  std::optional<format::DType> weightType =
      parseWeightType(values.dtype, error);
  if (!weightType)
    return std::nullopt;
  options.weightType = *weightType;
  if (!values.batchBuckets.empty()) {
    std::optional<std::vector<uint32_t>> buckets =
        parseBatchBuckets(values.batchBuckets, error);
    if (!buckets)
      return std::nullopt;
    options.batchBuckets = std::move(*buckets);
  }
  // The default, 0, lets the planner choose (min(512, max_seq_len)).
  if ((given.count("max-prefill-tokens") || values.maxPrefillTokens != 0) &&
      (values.maxPrefillTokens < 1 ||
       values.maxPrefillTokens > (int64_t{1} << 24))) {
    *error = "--max-prefill-tokens must be between 1 and 16777216, got " +
             std::to_string(values.maxPrefillTokens);
    return std::nullopt;
  }
  options.maxPrefillTokens = values.maxPrefillTokens;
  if (values.fewRowPrefillTokens < 0 ||
      values.fewRowPrefillTokens > kMaxFewRowPrefillTokens) {
    *error = "--few-row-prefill-tokens must be from 0 to " +
             std::to_string(kMaxFewRowPrefillTokens) + ", got " +
             std::to_string(values.fewRowPrefillTokens);
    return std::nullopt;
  }
  options.fewRowPrefillTokens = values.fewRowPrefillTokens;
  options.fuseNorms = values.normFusion;
  options.halfOperands = values.halfOperands;
  if (values.gemvQuantTiles != 1 && values.gemvQuantTiles != 2 &&
      values.gemvQuantTiles != 4) {
    *error = "--gemv-quant-tiles must be 1, 2 or 4, got " +
             std::to_string(values.gemvQuantTiles);
    return std::nullopt;
  }
  options.quantGemvTiles = values.gemvQuantTiles;
  if (values.gemvTokenGroups < 0 ||
      values.gemvTokenGroups > kernel::KernelDialect::kMaxTokenGroups) {
    *error = "--gemv-token-groups must be from 0 to " +
             std::to_string(kernel::KernelDialect::kMaxTokenGroups) + ", got " +
             std::to_string(values.gemvTokenGroups);
    return std::nullopt;
  }
  options.gemvTokenGroups = values.gemvTokenGroups;
  if (values.gemmKSplits < 0 ||
      values.gemmKSplits > kernel::KernelDialect::kMaxKSplits) {
    *error = "--gemm-k-splits must be from 0 to " +
             std::to_string(kernel::KernelDialect::kMaxKSplits) + ", got " +
             std::to_string(values.gemmKSplits);
    return std::nullopt;
  }
  options.gemmKSplits = values.gemmKSplits;
  if (values.decodeSplitKeys != 0 &&
      (values.decodeSplitKeys < 64 || values.decodeSplitKeys > 4096 ||
       values.decodeSplitKeys % 64 != 0)) {
    *error = "--decode-split-keys must be 0 or a multiple of 64 from 64 to "
             "4096, got " +
             std::to_string(values.decodeSplitKeys);
    return std::nullopt;
  }
  options.decodeSplitKeys = values.decodeSplitKeys;
  if (values.kvLayout != "contiguous" && values.kvLayout != "paged") {
    *error = "--kv-layout must be contiguous or paged, got '" +
             values.kvLayout + "'";
    return std::nullopt;
  }
  options.pagedKV = values.kvLayout == "paged";
  if (!format::KVCacheConfig::validBlockTokens(values.kvBlockTokens)) {
    *error = "--kv-block-tokens must be a power of two from 16 to 1024, got " +
             std::to_string(values.kvBlockTokens);
    return std::nullopt;
  }
  options.kvBlockTokens = values.kvBlockTokens;
  if (values.kvPoolBlocks < 0 || values.kvPoolBlocks > (int64_t{1} << 30)) {
    *error = "--kv-pool-blocks must be from 0 to 2^30, got " +
             std::to_string(values.kvPoolBlocks);
    return std::nullopt;
  }
  options.kvPoolBlocks = values.kvPoolBlocks;
  // The pool's size (at least a sequence of the capacity) is checked where
  // the cache is known (kernel-choose-kv-layout).
  if (!options.pagedKV &&
      (given.count("kv-block-tokens") || given.count("kv-pool-blocks"))) {
    *error = std::string("--") +
             (given.count("kv-block-tokens") ? "kv-block-tokens"
                                             : "kv-pool-blocks") +
             " needs --kv-layout=paged";
    return std::nullopt;
  }
  if (values.decodeKernels != "graph" && values.decodeKernels != "persistent") {
    *error = "--decode-kernels must be graph or persistent, got '" +
             values.decodeKernels + "'";
    return std::nullopt;
  }
  options.persistentDecode = values.decodeKernels == "persistent";
  if (values.persistentBlocks < 1 ||
      values.persistentBlocks > format::kMaxMultiprocessors) {
    *error = "--persistent-blocks must be from 1 to " +
             std::to_string(format::kMaxMultiprocessors) + ", got " +
             std::to_string(values.persistentBlocks);
    return std::nullopt;
  }
  options.persistentBlocks = values.persistentBlocks;
  options.persistentTrace = values.persistentTrace;
  for (const char *option : {"persistent-blocks", "persistent-trace"})
    if (!options.persistentDecode && given.count(option)) {
      *error =
          std::string("--") + option + " needs --decode-kernels=persistent";
      return std::nullopt;
    }
  return options;
}

const CodegenOptions &CodegenOptions::getDefault() {
  static const CodegenOptions defaults = [] {
    std::string error;
    std::optional<CodegenOptions> parsed =
        parseCodegenOptions(CodegenOptionValues(), &error);
    if (!parsed) {
      // A default of CodegenOptions.td that its own check refuses.
      std::fprintf(stderr, "sits: bad default code generation option: %s\n",
                   error.c_str());
      std::abort();
    }
    return *parsed;
  }();
  return defaults;
}

} // namespace sits::codegen
