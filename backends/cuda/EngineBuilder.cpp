//===- EngineBuilder.cpp - From a plan and its kernels to an engine -------===//

#include "backends/cuda/EngineBuilder.h"
#include "backends/cuda/WeightSection.h"

#include "sits/Json.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>
#include <set>

namespace sits::codegen {

using format::BufferDesc;
using format::BufferRole;
using format::DType;

namespace {

/// Indices of the non-weight buffers in the engine's buffer table.
struct BufferIndices {
  uint32_t workspace = 0, keyCache = 0, valueCache = 0, tokenIds = 0,
           pastLengths = 0, stepLengths = 0, logits = 0, counters = 0,
           kvStats = 0, tvcScratch = 0, tvcCounters = 0, blockTable = 0;
};

std::vector<uint64_t> toDims(const std::vector<int64_t> &shape) {
  return std::vector<uint64_t>(shape.begin(), shape.end());
}

/// The engine's launches of one program, with arguments resolved.
format::Program buildProgram(const ProgramPlan &plan,
                             const std::vector<uint32_t> &weightBuffers,
                             const BufferIndices &buffers) {
  format::Program program;
  program.name = plan.name;
  for (const LaunchPlan &launch : plan.launches) {
    format::Launch out;
    out.kernel = launch.kernel;
    out.grid = launch.grid;
    out.block = launch.block;
    out.sharedBytes = launch.sharedBytes;
    for (const ArgBinding &arg : launch.args) {
      if (arg.kind == ArgBinding::Kind::Int32) {
        out.args.push_back(format::LaunchArg::int32(arg.expr));
        continue;
      }
      uint32_t buffer = 0;
      uint64_t offset = arg.byteOffset;
      switch (arg.buffer) {
      case BufferKind::Weight:
        buffer = weightBuffers[arg.index];
        break;
      case BufferKind::Workspace:
        buffer = buffers.workspace;
        offset += plan.values[arg.index].offset;
        break;
      case BufferKind::KeyCache:
        buffer = buffers.keyCache;
        break;
      case BufferKind::ValueCache:
        buffer = buffers.valueCache;
        break;
      case BufferKind::TokenIds:
        buffer = buffers.tokenIds;
        break;
      case BufferKind::PastLengths:
        buffer = buffers.pastLengths;
        break;
      case BufferKind::StepLengths:
        buffer = buffers.stepLengths;
        break;
      case BufferKind::Logits:
        buffer = buffers.logits;
        break;
      case BufferKind::Counters:
        buffer = buffers.counters;
        break;
      case BufferKind::KVStats:
        buffer = buffers.kvStats;
        break;
      case BufferKind::TvcScratch:
        buffer = buffers.tvcScratch;
        break;
      case BufferKind::TvcCounters:
        buffer = buffers.tvcCounters;
        break;
      case BufferKind::BlockTable:
        buffer = buffers.blockTable;
        break;
      }
      out.args.push_back(format::LaunchArg::bufferAddress(buffer, offset));
    }
    program.launches.push_back(std::move(out));
  }
  return program;
}

json::Value workspaceJson(const ProgramPlan &program) {
  json::Value out = json::Value::object();
  uint64_t unshared = 0;
  for (const WorkspaceValue &value : program.values)
    unshared += value.bytes;
  out.set("launches", static_cast<uint64_t>(program.launches.size()));
  out.set("max_tokens", program.maxTokens);
  out.set("values", static_cast<uint64_t>(program.values.size()));
  out.set("values_bytes", unshared);
  out.set("peak_bytes", program.peakBytes);
  return out;
}

} // namespace

uint64_t weightSectionBytes(const EnginePlan &plan) {
  uint64_t total = 0;
  for (const WeightPlan &weight : plan.weights)
    total = (total + format::kWeightAlignment - 1) / format::kWeightAlignment *
                format::kWeightAlignment +
            weight.bytes;
  return total;
}

std::string buildMetadata(const EnginePlan &plan, const EngineSource &source) {
  const ModelConfig &m = plan.model;
  const char *cacheType = format::dtypeName(m.cacheType);
  json::Value root = json::Value::object();
  root.set("format", "sits-engine");
  root.set("generator", "sitsc");

  json::Value model = json::Value::object();
  model.set("name", source.modelName);
  model.set("source", source.path);
  model.set("source_sha256", format::hashToHex(source.sha256));
  model.set("vocab_size", m.vocab);
  model.set("hidden_size", m.hidden);
  model.set("num_layers", m.layers);
  model.set("num_heads", m.heads);
  model.set("num_kv_heads", m.kvHeads);
  model.set("head_dim", m.headDim);
  if (m.intermediate)
    model.set("intermediate_size", m.intermediate);
  model.set("norm", m.norm);
  if (!m.activation.empty())
    model.set("activation", m.activation);
  if (m.rotaryDim) {
    model.set("rotary_dim", m.rotaryDim);
    model.set("rope_style", m.ropeStyle);
  }
  model.set("tied_lm_head", m.tiedLMHead);
  model.set("linear_bias", m.hasLinearBias);
  if (m.window)
    model.set("sliding_window", m.window);
  if (m.softcap > 0.0f)
    model.set("attention_softcap", static_cast<double>(m.softcap));
  model.set("dtype", weightTypeName(plan.options.weightType));
  model.set("max_seq_len", m.maxSeqLen);
  model.set("max_batch", m.maxBatch);
  model.set("max_prefill_tokens", m.maxPrefillTokens);
  root.set("model", std::move(model));

  json::Value limits = json::Value::object();
  limits.set("max_batch", m.maxBatch);
  limits.set("max_prefill_tokens", m.maxPrefillTokens);
  limits.set("max_seq_len", m.maxSeqLen);
  root.set("limits", std::move(limits));

  json::Value kv = json::Value::object();
  kv.set("layers", m.layers);
  kv.set("max_batch", m.maxBatch);
  kv.set("kv_heads", m.kvHeads);
  kv.set("capacity", m.maxSeqLen);
  kv.set("head_dim", m.headDim);
  kv.set("dtype", cacheType);
  const format::KVCacheConfig &cache = plan.kvCache;
  kv.set("layout", cache.layout);
  if (cache.paged()) {
    kv.set("block_tokens", static_cast<uint64_t>(cache.blockTokens));
    kv.set("blocks", static_cast<uint64_t>(cache.blocks));
    kv.set("block_table", cache.blockTable);
  }
  if (cache.coldBits) {
    kv.set("dtype", format::dtypeName(cache.dtype));
    kv.set("bytes_per_token", cache.bytesPerToken());
    kv.set("bytes", cache.bufferBytes(true) + cache.bufferBytes(false));
    json::Value quant = json::Value::object();
    quant.set("bits", static_cast<uint64_t>(cache.coldBits));
    quant.set("hot_window", static_cast<uint64_t>(cache.hotWindow));
    quant.set("hot_rows", static_cast<uint64_t>(cache.hotRows));
    quant.set("group_size", static_cast<uint64_t>(cache.groupSize));
    quant.set("keys", cache.perChannelKeys ? "per_channel" : "per_token");
    quant.set("channel_block", static_cast<uint64_t>(cache.channelBlock));
    quant.set("scale_type", "f16");
    quant.set("calibration_buffer", "kv_calibration");
    kv.set("quant", std::move(quant));
  } else {
    kv.set("bytes_per_token",
           static_cast<uint64_t>(2 * m.layers * m.kvHeads * m.headDim) *
               format::dtypeBytes(m.cacheType));
    kv.set("bytes", 2 * plan.cacheBufferBytes);
  }
  root.set("kv_cache", std::move(kv));

  // The runtime reads the kind and the EOS ids; the rest summarizes the
  // tokenizer section for readers of the metadata.
  json::Value tokenizer = json::Value::object();
  json::Value eosIds = json::Value::array();
  if (const ModelTokenizer *text = source.tokenizer.get()) {
    tokenizer.set("kind", "huggingface");
    tokenizer.set("model", text->kind());
    tokenizer.set("vocab_size", static_cast<uint64_t>(text->vocabSize()));
    if (text->bosTokenId())
      tokenizer.set("bos_token_id", static_cast<int64_t>(*text->bosTokenId()));
    for (int32_t id : text->eosTokenIds())
      eosIds.push(static_cast<int64_t>(id));
    tokenizer.set("chat_template", text->hasChatTemplate());
  } else {
    tokenizer.set("kind", m.vocab == 256 ? "bytes" : "none");
  }
  for (int32_t id : source.configEosIds)
    if (llvm::none_of(eosIds.elements(), [&](const json::Value &known) {
          return known.getInteger() == id;
        }))
      eosIds.push(static_cast<int64_t>(id));
  tokenizer.set("eos_token_ids", std::move(eosIds));
  root.set("tokenizer", std::move(tokenizer));

  if (!plan.options.batchBuckets.empty()) {
    json::Value decode = json::Value::object();
    json::Value buckets = json::Value::array();
    for (uint32_t bucket : plan.options.batchBuckets)
      buckets.push(bucket);
    decode.set("batch_buckets", std::move(buckets));
    root.set("decode", std::move(decode));
  }
  // Every generated entry point waits for the kernel before it
  // (CudaEmitter.cpp), so the runtime may overlap their launches; the
  // kernels that address a step's tokens by sequence take its StepRows.
  json::Value launch = json::Value::object();
  launch.set("programmatic_dependent", true);
  launch.set("packed_steps", true);
  if (plan.prefillFew)
    launch.set("few_rows_max_tokens",
               static_cast<uint64_t>(plan.prefillFew->maxTokens));
  root.set("launch", std::move(launch));

  json::Value inputs = json::Value::array();
  json::Value ids = json::Value::object();
  ids.set("name", "input_ids");
  ids.set("buffer", "token_ids");
  ids.set("dtype", "i32");
  json::Value idsShape = json::Value::array();
  idsShape.push("batch");
  idsShape.push("seq");
  ids.set("shape", std::move(idsShape));
  inputs.push(std::move(ids));
  root.set("inputs", std::move(inputs));
  json::Value outputs = json::Value::array();
  json::Value logits = json::Value::object();
  logits.set("name", "logits");
  logits.set("buffer", "logits");
  logits.set("dtype", "f32");
  json::Value logitsShape = json::Value::array();
  logitsShape.push("batch");
  logitsShape.push(m.vocab);
  logits.set("shape", std::move(logitsShape));
  logits.set("rows", "each sequence's last new token");
  outputs.push(std::move(logits));
  root.set("outputs", std::move(outputs));

  json::Value options = json::Value::object();
  options.set("target", plan.options.target.getName());
  options.set("dtype", weightTypeName(plan.options.weightType));
  options.set("max_seq_len", m.maxSeqLen);
  options.set("max_batch", m.maxBatch);
  options.set("max_prefill_tokens", m.maxPrefillTokens);
  if (!plan.options.batchBuckets.empty()) {
    std::string buckets;
    for (uint32_t bucket : plan.options.batchBuckets)
      buckets += (buckets.empty() ? "" : ",") + std::to_string(bucket);
    options.set("batch_buckets", buckets);
  }
  if (!source.sitscOptions.empty())
    options.set("command_line", source.sitscOptions);
  root.set("options", std::move(options));

  if (plan.tvc) {
    // The runtime reads exact_top (sampling without top-k, or with a larger
    // one, needs the full head) and finds the counters by name.
    json::Value tvc = json::Value::object();
    tvc.set("rank", plan.tvc->rank);
    tvc.set("candidates", plan.tvc->candidates);
    tvc.set("exact_top", plan.tvc->exactTop);
    tvc.set("preview_bytes", plan.tvc->previewBytes);
    tvc.set("scratch_bytes", plan.tvc->scratchBytes);
    tvc.set("counters", "tvc_counters");
    root.set("tvc", std::move(tvc));
  }

  json::Value workspace = json::Value::object();
  workspace.set("bytes", plan.workspaceBytes);
  workspace.set("unshared_bytes", plan.unsharedBytes);
  workspace.set("alignment", static_cast<uint64_t>(256));
  for (const ProgramPlan *program : plan.programs())
    workspace.set(program->name, workspaceJson(*program));
  root.set("workspace", std::move(workspace));

  // Weights only the embedding gathers from (a decode step reads B rows):
  // sits-bench leaves them out of the bytes a step reads. With quantized
  // weights the LM head reads its own copy, so a tied table is one of them.
  std::set<unsigned> gathered, read;
  for (const ProgramPlan *program : plan.programs())
    for (const LaunchPlan &launch : program->launches)
      for (const ArgBinding &arg : launch.args)
        if (arg.kind == ArgBinding::Kind::Buffer &&
            arg.buffer == BufferKind::Weight)
          (plan.kernels[launch.kernel].family == "embedding" ? gathered : read)
              .insert(arg.index);
  uint64_t gatherOnly = 0;
  for (unsigned index : gathered)
    if (!read.count(index))
      gatherOnly += plan.weights[index].bytes;
  json::Value weights = json::Value::object();
  weights.set("gather_only_bytes", gatherOnly);
  root.set("weights", std::move(weights));

  json::Value codegen = json::Value::object();
  codegen.set("kernels", static_cast<uint64_t>(plan.kernels.size()));
  codegen.set("weight_bytes", weightSectionBytes(plan));
  codegen.set("weights", static_cast<uint64_t>(plan.weights.size()));
  root.set("codegen", std::move(codegen));
  return root.write(2);
}

/// The persistent decode section: per bucket its kernel (module 1) and
/// where each decode launch's arguments lie in its table, checked against
/// the layout the runtime computes from the launch's arguments.
static llvm::Error addPersistentDecode(const EnginePlan &plan,
                                       format::EngineContents &contents) {
  const PersistentDecodePlan &persistent = *plan.persistentDecode;
  const format::Program &decode =
      contents.programs[contents.findProgram(format::kDecodeProgram)];
  format::PersistentDecode &out = contents.persistentDecode;
  out.blocks = persistent.blocks;
  std::vector<uint32_t> offsets;
  for (const PersistentDecodePlan::Bucket &bucket : persistent.buckets) {
    format::PersistentBucket entry;
    entry.batch = bucket.batch;
    entry.kernel = static_cast<uint32_t>(contents.kernels.size());
    contents.kernels.push_back(
        {1, "sits_decode_b" + std::to_string(bucket.batch)});
    entry.threads = static_cast<uint32_t>(bucket.threads);
    entry.sharedBytes = static_cast<uint32_t>(bucket.sharedBytes);
    entry.argBytes = static_cast<uint32_t>(bucket.argBytes);
    if (bucket.tasks.size() != decode.launches.size())
      return llvm::createStringError(
          "the persistent decode plan has " +
          std::to_string(bucket.tasks.size()) + " tasks for " +
          std::to_string(decode.launches.size()) + " decode launches");
    for (auto [t, task] : llvm::enumerate(bucket.tasks)) {
      const KernelSpec &spec = plan.kernels[task.kernel];
      std::optional<ArgumentBlock> planned = getArgumentBlock(spec);
      uint64_t bytes =
          format::getArgumentBlockLayout(decode.launches[t], &offsets);
      if (!planned || planned->bytes != bytes ||
          !std::equal(offsets.begin(), offsets.end(), planned->offsets.begin(),
                      planned->offsets.end()))
        return llvm::createStringError(
            "task " + std::to_string(t) + " (" + spec.name +
            "): the engine's launch arguments do not lay out as the "
            "persistent kernel's argument block");
      entry.argOffsets.push_back(static_cast<uint32_t>(task.argOffset));
    }
    out.buckets.push_back(std::move(entry));
  }
  contents.formatMinor = format::kPersistentDecodeMinor;
  return llvm::Error::success();
}

llvm::Expected<format::StreamedEngine>
buildEngine(const EnginePlan &plan, CompiledModule module,
            const EngineSource &source,
            std::optional<CompiledModule> persistent) {
  const ModelConfig &m = plan.model;
  format::StreamedEngine engine;
  format::EngineContents &contents = engine.contents;
  contents.formatMinor =
      plan.kvCache.paged() ? format::kPagedKVCacheMinor : uint16_t(1);
  contents.targetSm = plan.options.target.getSm();
  contents.cudaVersion = source.cudaVersion;
  contents.sourceModelHash = source.sha256;
  contents.metadataJson = buildMetadata(plan, source);
  if (source.tokenizer)
    for (const auto &file : source.tokenizer->files())
      contents.tokenizerFiles.push_back({file.first, file.second});

  format::ModuleImage image;
  image.name = "kernels";
  image.sm = contents.targetSm;
  image.cubin = std::move(module.cubin);
  image.ptx = std::move(module.ptx);
  contents.modules.push_back(std::move(image));
  for (const KernelSpec &spec : plan.kernels)
    contents.kernels.push_back({0, spec.name});
  if (plan.persistentDecode) {
    if (!persistent)
      return llvm::createStringError(
          "the persistent decode kernels were not compiled");
    format::ModuleImage second;
    second.name = "persistent_decode";
    second.sm = contents.targetSm;
    second.cubin = std::move(persistent->cubin);
    second.ptx = std::move(persistent->ptx);
    contents.modules.push_back(std::move(second));
  }

  // Weights: laid out here, made from the model's constants (converted to
  // their storage type) while the engine is written.
  llvm::Expected<WeightSection> section = WeightSection::create(plan.weights);
  if (!section)
    return section.takeError();
  std::vector<uint32_t> weightBuffers;
  for (auto [index, weight] : llvm::enumerate(plan.weights)) {
    BufferDesc desc;
    desc.name = weight.name;
    desc.role = BufferRole::Weight;
    desc.dtype = weight.type;
    desc.offset = section->offsetOf(index);
    desc.bytes = weight.bytes;
    desc.shape = toDims(weight.shape);
    weightBuffers.push_back(static_cast<uint32_t>(contents.buffers.size()));
    contents.buffers.push_back(std::move(desc));
  }
  engine.weightBytes = section->size();
  engine.fill =
      [section = std::make_shared<WeightSection>(std::move(*section))](
          uint64_t offset, uint8_t *out, uint64_t size, std::string *error) {
        return section->fill(offset, out, size, error);
      };

  auto addBuffer = [&](std::string name, BufferRole role, DType type,
                       uint64_t bytes, std::vector<uint64_t> shape) {
    BufferDesc desc;
    desc.name = std::move(name);
    desc.role = role;
    desc.dtype = type;
    desc.bytes = bytes;
    desc.shape = std::move(shape);
    contents.buffers.push_back(std::move(desc));
    return static_cast<uint32_t>(contents.buffers.size() - 1);
  };
  uint64_t batch = m.maxBatch, prefill = m.maxPrefillTokens;
  BufferIndices buffers;
  buffers.workspace =
      addBuffer("workspace", BufferRole::Activation, DType::F32,
                std::max<uint64_t>(plan.workspaceBytes, 256),
                {std::max<uint64_t>(plan.workspaceBytes, 256) / 4});
  std::vector<uint64_t> cacheShape = {
      static_cast<uint64_t>(m.layers), batch, static_cast<uint64_t>(m.kvHeads),
      static_cast<uint64_t>(m.maxSeqLen), static_cast<uint64_t>(m.headDim)};
  if (plan.kvCache.paged()) {
    // The table the runtime writes: [max_batch, blocks a full sequence].
    const format::KVCacheConfig &kv = plan.kvCache;
    buffers.blockTable = addBuffer(kv.blockTable, BufferRole::Activation,
                                   DType::I32, batch * kv.maxBlocksPerSeq() * 4,
                                   {batch, kv.maxBlocksPerSeq()});
  }
  if (plan.kvCache.coldBits) {
    // Per layer: the hot ring, the cold rows, the scales (bytes; the cold
    // parts in the pool's blocks when paged).
    uint64_t layer = plan.kvCache.quantLayout(true).layerBytes;
    buffers.keyCache =
        addBuffer("key_cache", BufferRole::KeyCache, plan.kvCache.dtype,
                  plan.kvCache.bufferBytes(true),
                  {static_cast<uint64_t>(m.layers), layer});
    buffers.valueCache =
        addBuffer("value_cache", BufferRole::ValueCache, plan.kvCache.dtype,
                  plan.kvCache.bufferBytes(false),
                  {static_cast<uint64_t>(m.layers), layer});
    // Calibration counters: zeroed by the runtime at each request.
    uint64_t words = static_cast<uint64_t>(m.layers) * m.kvHeads * 2 * 8;
    buffers.kvStats = addBuffer("kv_calibration", BufferRole::Activation,
                                DType::I64, words * 8,
                                {static_cast<uint64_t>(m.layers),
                                 static_cast<uint64_t>(m.kvHeads), 2, 8});
  } else {
    if (plan.kvCache.paged()) {
      // [layers, blocks, kv_heads, block_tokens, head_dim].
      const format::KVCacheConfig &kv = plan.kvCache;
      cacheShape = {static_cast<uint64_t>(m.layers), kv.blocks,
                    static_cast<uint64_t>(m.kvHeads), kv.blockTokens,
                    static_cast<uint64_t>(m.headDim)};
    }
    buffers.keyCache = addBuffer("key_cache", BufferRole::KeyCache, m.cacheType,
                                 plan.cacheBufferBytes, cacheShape);
    buffers.valueCache =
        addBuffer("value_cache", BufferRole::ValueCache, m.cacheType,
                  plan.cacheBufferBytes, cacheShape);
  }
  buffers.tokenIds = addBuffer("token_ids", BufferRole::TokenIds, DType::I32,
                               batch * prefill * 4, {batch, prefill});
  buffers.pastLengths = addBuffer("past_lengths", BufferRole::PastLengths,
                                  DType::I32, batch * 4, {batch});
  buffers.stepLengths = addBuffer("step_lengths", BufferRole::StepLengths,
                                  DType::I32, batch * 4, {batch});
  buffers.logits = addBuffer("logits", BufferRole::Logits, DType::F32,
                             batch * static_cast<uint64_t>(m.vocab) * 4,
                             {batch, static_cast<uint64_t>(m.vocab)});
  // Zero at allocation, and every kernel that counts leaves them at zero.
  if (plan.counterInts)
    buffers.counters =
        addBuffer("sync_counters", BufferRole::Activation, DType::I32,
                  plan.counterInts * 4, {plan.counterInts});
  if (plan.tvc) {
    // Scratch that every step writes before it reads, and u64 counters
    // [proved, fallback, mode] that start at zero.
    buffers.tvcScratch =
        addBuffer("tvc_scratch", BufferRole::Activation, DType::F32,
                  plan.tvc->scratchBytes, {plan.tvc->scratchBytes / 4});
    buffers.tvcCounters = addBuffer("tvc_counters", BufferRole::Activation,
                                    DType::I32, 3 * 8, {6});
  }

  for (const ProgramPlan *program : plan.programs())
    contents.programs.push_back(buildProgram(*program, weightBuffers, buffers));
  if (plan.persistentDecode)
    if (llvm::Error error = addPersistentDecode(plan, contents))
      return std::move(error);

  format::RuntimeConfig config;
  std::string error;
  if (!format::parseRuntimeConfig(contents.metadataJson, &config, &error) ||
      !format::validateStreamedEngine(engine, config, &error))
    return llvm::createStringError("the generated engine is invalid: " + error);
  return engine;
}

} // namespace sits::codegen
