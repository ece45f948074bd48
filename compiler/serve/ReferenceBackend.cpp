//===- ReferenceBackend.cpp - The serving backend on the CPU reference ----===//

#include "compiler/serve/ReferenceBackend.h"

#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsDialect.h"
#include "sits/EngineFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace sits;
using namespace sits::reference;

llvm::Expected<std::unique_ptr<ReferenceBackend>>
ReferenceBackend::create(ModuleOp module, ExecutorOptions options) {
  // The backend copies KV rows in and out of a cache (prefix blocks, paged
  // sequences), which a tensor-parallel program's other ranks would miss.
  if (int64_t ranks = getTensorParallelRanks(module); ranks > 1)
    return llvm::createStringError(
        "the program is tensor-parallel over " + std::to_string(ranks) +
        " ranks, which the reference server does not run: compile it "
        "without --tensor-parallel");
  llvm::Expected<Program> program = findProgram(module);
  if (!program)
    return program.takeError();
  if (!program->hasCache())
    return llvm::createStringError(
        "the module has no prefill/decode steps with a KV cache (compile it "
        "to the optimized stage)");
  auto prefill = module.lookupSymbol<func::FuncOp>(program->prefill);
  std::optional<KVCacheConfig> config;
  for (Type type : prefill.getArgumentTypes())
    if (auto cacheType = dyn_cast<KVCacheType>(type)) {
      llvm::Expected<KVCacheConfig> parsed = KVCacheConfig::fromType(cacheType);
      if (!parsed)
        return parsed.takeError();
      config = *parsed;
    }
  if (!config)
    return llvm::createStringError("'" + program->prefill +
                                   "' takes no KV cache");
  if (config->maxBatch < 1 || config->capacity < 2)
    return llvm::createStringError(
        "the KV cache holds no sequence of two tokens");
  return std::unique_ptr<ReferenceBackend>(
      new ReferenceBackend(module, std::move(*program), options, *config));
}

ReferenceBackend::ReferenceBackend(ModuleOp module, Program program,
                                   ExecutorOptions options,
                                   KVCacheConfig config)
    : module(module), program(std::move(program)), executor(module, options),
      slotCount(static_cast<uint32_t>(config.maxBatch)),
      capacity(static_cast<uint32_t>(config.capacity)), config(config),
      caches(slotCount) {}

void ReferenceBackend::usePagedCache(uint32_t tokens, uint32_t blocks) {
  if (!format::KVCacheConfig::validBlockTokens(tokens))
    throw Error(ErrorCode::InvalidArgument,
                "--kv-block-tokens must be a power of two from 16 to 1024, "
                "got " +
                    std::to_string(tokens));
  // As sitsc: a block of per-channel quantized keys in one pool block.
  if (config.channelBlock > 1 && tokens % config.channelBlock != 0)
    throw Error(ErrorCode::InvalidArgument,
                "a paged quantized KV cache needs --kv-block-tokens (" +
                    std::to_string(tokens) +
                    ") a multiple of the per-channel key block (" +
                    std::to_string(config.channelBlock) +
                    ", --kv-channel-block)");
  const uint32_t perSequence = (capacity + tokens - 1) / tokens;
  pages = std::make_unique<runtime::BlockAllocator>(
      slotCount, perSequence, blocks ? blocks : slotCount * perSequence,
      tokens);
}

void ReferenceBackend::release(uint32_t slot) {
  if (slot >= slotCount)
    throw Error(ErrorCode::InvalidArgument,
                "there are only " + std::to_string(slotCount) + " slots");
  caches[slot].reset();
  if (pages)
    pages->release(slot);
}

void ReferenceBackend::allocateBlockPool(uint32_t tokens, uint32_t blocks) {
  if (tokens == 0 || blocks == 0)
    throw Error(ErrorCode::InvalidArgument,
                "a prefix cache pool needs blocks of at least one token");
  if (pages && tokens != pages->tokensPerBlock())
    throw Error(ErrorCode::InvalidArgument,
                "prefix cache blocks of " + std::to_string(tokens) +
                    " tokens: the paged KV cache shares its own blocks of " +
                    std::to_string(pages->tokensPerBlock()) + " tokens");
  if (tokens >= capacity)
    throw Error(ErrorCode::InvalidArgument,
                "prefix cache blocks of " + std::to_string(tokens) +
                    " tokens do not fit the context of " +
                    std::to_string(capacity) + " tokens with a token to spare");
  blockTokens = tokens;
  pool.assign(blocks, {});
  if (pages)
    pages->setPrefixIds(blocks);
}

void ReferenceBackend::saveBlocks(uint32_t slot, uint32_t firstBlock,
                                  const std::vector<uint32_t> &poolIds) {
  auto fail = [&](const std::string &message) {
    return Error(ErrorCode::InvalidArgument, "saving blocks of slot " +
                                                 std::to_string(slot) + ": " +
                                                 message);
  };
  if (slot >= slotCount || !caches[slot])
    throw fail("the slot holds no sequence");
  uint64_t end = (uint64_t(firstBlock) + poolIds.size()) * blockTokens;
  if (blockTokens == 0 || end > uint64_t(caches[slot]->getLength(0)))
    throw fail("the slot holds " + std::to_string(caches[slot]->getLength(0)) +
               " tokens, not " + std::to_string(end));
  for (size_t i = 0; i < poolIds.size(); ++i) {
    if (poolIds[i] >= pool.size())
      throw fail("no pool block " + std::to_string(poolIds[i]));
    llvm::Expected<std::vector<float>> rows = caches[slot]->copyRows(
        0, (firstBlock + i) * int64_t(blockTokens), blockTokens);
    if (!rows)
      throw fail(llvm::toString(rows.takeError()));
    pool[poolIds[i]] = std::move(*rows);
  }
  // The rows are copied, but a paged engine's pool ids share the blocks.
  if (pages)
    pages->share(slot, firstBlock, poolIds);
}

void ReferenceBackend::loadBlocks(uint32_t slot,
                                  const std::vector<uint32_t> &poolIds,
                                  const SamplingParams &) {
  // Sampling parameters come with every step here.
  auto fail = [&](const std::string &message) {
    return Error(ErrorCode::InvalidArgument, "loading blocks into slot " +
                                                 std::to_string(slot) + ": " +
                                                 message);
  };
  if (slot >= slotCount)
    throw fail("there are only " + std::to_string(slotCount) + " slots");
  caches[slot].reset();
  for (uint32_t id : poolIds)
    if (id >= pool.size())
      throw fail("no pool block " + std::to_string(id));
  if (pages && !pages->load(slot, poolIds))
    throw fail("a pool block names no KV block (taken back for a sequence "
               "when the pool ran out)");
  auto cache = std::make_shared<KVCacheState>(config);
  if (llvm::Error error = cache->bindBatch(1))
    throw fail(llvm::toString(std::move(error)));
  for (size_t i = 0; i < poolIds.size(); ++i) {
    if (poolIds[i] >= pool.size() || pool[poolIds[i]].empty())
      throw fail("pool block " + std::to_string(poolIds[i]) + " holds nothing");
    if (llvm::Error error = cache->writeRows(0, i * int64_t(blockTokens),
                                             blockTokens, pool[poolIds[i]]))
      throw fail(llvm::toString(std::move(error)));
  }
  if (llvm::Error error =
          cache->setLength(0, int64_t(poolIds.size()) * blockTokens))
    throw fail(llvm::toString(std::move(error)));
  caches[slot] = std::move(cache);
}

std::vector<int32_t>
ReferenceBackend::step(const std::vector<serve::SlotStep> &steps) {
  // A paged engine's blocks for every slot's new rows, before anything
  // runs (a full pool fails the step; the slots keep what they held).
  for (const serve::SlotStep &step : steps) {
    if (!pages || step.slot >= slotCount)
      continue;
    if (step.position == 0)
      pages->release(step.slot);
    const uint64_t rows = uint64_t(step.position) + step.tokens.size();
    if (!pages->reserve(step.slot, rows))
      throw Error(ErrorCode::KVCacheFull,
                  pages->fullMessage(step.slot, rows) +
                      "; serve with a larger --kv-pool-blocks");
  }
  std::vector<int32_t> tokens;
  tokens.reserve(steps.size());
  for (const serve::SlotStep &step : steps)
    tokens.push_back(runSlot(step));
  return tokens;
}

int32_t ReferenceBackend::runSlot(const serve::SlotStep &step) {
  auto fail = [&](const std::string &message) {
    return Error(ErrorCode::InvalidArgument,
                 "slot " + std::to_string(step.slot) + ": " + message);
  };
  if (step.slot >= slotCount)
    throw fail("there are only " + std::to_string(slotCount) + " slots");
  if (step.tokens.empty())
    throw fail("a step needs at least one token");
  if (uint64_t(step.position) + step.tokens.size() > capacity)
    throw Error(ErrorCode::KVCacheFull,
                "slot " + std::to_string(step.slot) + ": " +
                    std::to_string(step.position + step.tokens.size()) +
                    " tokens exceed the cache's " + std::to_string(capacity));
  std::shared_ptr<KVCacheState> &cache = caches[step.slot];
  if (step.position == 0)
    cache.reset();
  int64_t held = cache ? cache->getLength(0) : 0;
  if (held != step.position)
    throw fail("the step starts at position " + std::to_string(step.position) +
               " but the cache holds " + std::to_string(held) + " tokens");

  // One token after a prompt: a decode step; otherwise a prefill (chunk),
  // which attends over what the cache holds already.
  bool decode = step.position > 0 && step.tokens.size() == 1;
  llvm::StringRef function = decode ? program.decode : program.prefill;
  Tensor ids = Tensor::fromInts(
      ElementType::I64, {1, static_cast<int64_t>(step.tokens.size())},
      std::vector<int64_t>(step.tokens.begin(), step.tokens.end()));
  // The executor updates the state in place: a failed step leaves it
  // unknown, so the slot starts over.
  std::shared_ptr<KVCacheState> input = std::move(cache);
  llvm::Expected<StepResult> result =
      runStep(executor, module, function, ids, std::move(input));
  if (!result)
    throw Error(ErrorCode::InvalidArgument,
                "slot " + std::to_string(step.slot) + ": " +
                    llvm::toString(result.takeError()));
  if (!result->cache)
    throw fail("'" + function.str() + "' returns no KV cache");
  cache = std::move(result->cache);
  if (!step.sample)
    return -1;
  const Tensor &logits = result->logits;
  int64_t vocab = logits.getRank() ? logits.getDim(-1) : 0;
  if (vocab <= 0 || logits.getNumElements() < vocab || !logits.isFloat())
    throw fail("the logits of shape " + formatShape(logits.getShape()) +
               " hold no row to sample from");
  const float *row = logits.floats().data() + logits.getNumElements() - vocab;
  // Keyed by the position of the token drawn, as on the GPU: a request's
  // draws do not depend on what else runs.
  return serve::sampleToken(row, static_cast<uint32_t>(vocab), step.sampling,
                            step.position + step.tokens.size());
}
