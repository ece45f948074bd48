//===- Session.cpp - Buffers, the launch-plan executor, CUDA graphs -------===//
//
// A step is: the engine's launches for the program (prefill or decode) with
// the step's symbols, then the runtime's sampling kernel, then the advance
// kernel (lengths += step lengths, sampled tokens become the next input),
// then a copy of the sampled tokens to pinned host memory.
// A decode step is captured once per batch bucket into a CUDA graph and
// replayed: everything that changes between steps is in device memory. A
// bucket with a persistent decode kernel (SessionPersistent.cpp) captures
// that one launch in place of the decode program's.
//
//===----------------------------------------------------------------------===//

#include "sits/KVCalibration.h"
#include "src/CudaCheck.h"
#include "src/Driver.h"
#include "src/EngineImpl.h"
#include "src/NamedBuffers.h"
#include "src/PrefillPlan.h"
#include "src/Sampling.h"
#include "src/SessionImpl.h"
#include "src/Tvc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

namespace sits {

using format::ArgKind;
using format::BufferRole;
using runtime::checkCuda;
using runtime::checkDriver;

namespace {

constexpr uint64_t kArenaAlignment = 256;
constexpr uint64_t kDefaultSharedLimit = 48 * 1024;

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

Session::Impl::Impl(std::shared_ptr<Engine> engineIn,
                    const SessionOptions &optionsIn)
    : engine(std::move(engineIn)), e(engine->impl()), config(e.config),
      options(optionsIn) {
  buckets =
      options.batchBuckets.empty() ? config.batchBuckets : options.batchBuckets;
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  for (uint32_t b : buckets)
    if (b == 0 || b > config.maxBatch)
      throw Error(ErrorCode::InvalidArgument,
                  "batch bucket " + std::to_string(b) + " is outside 1.." +
                      std::to_string(config.maxBatch));
  if (buckets.empty() || buckets.back() != config.maxBatch)
    buckets.push_back(config.maxBatch);
  prefillProgram = e.contents.findProgram(format::kPrefillProgram);
  fewRowPrefillProgram = e.contents.findProgram(format::kFewRowPrefillProgram);
  decodeProgram = e.contents.findProgram(format::kDecodeProgram);

  checkCuda(cudaSetDevice(e.device), "cudaSetDevice");
  // Only where every kernel of the engine waits for its predecessor
  // (common.cuh), on sm_90 and newer, with a driver that has
  // cuLaunchKernelEx.
  programmaticLaunch = options.useProgrammaticLaunch &&
                       config.programmaticLaunch && e.deviceSm >= 90 &&
                       runtime::driver().launchKernelEx;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "creating a CUDA stream");
  allocate();
  if (options.usePersistentDecode && !e.contents.persistentDecode.empty()) {
    try {
      loadPersistentDecode();
    } catch (...) {
      releasePersistentDecode();
      throw;
    }
  }
  int init = e.contents.findProgram(format::kInitProgram);
  if (init >= 0) {
    run(prepare(init, config.maxBatch, 1));
    checkCuda(cudaStreamSynchronize(stream), "running the init program");
  }
}

Session::Impl::~Impl() {
  for (auto &entry : graphs)
    cudaGraphExecDestroy(entry.second);
  releasePersistentDecode();
  if (arena)
    cudaFree(arena);
  if (blockPool)
    cudaFree(blockPool);
  if (hostTokens)
    cudaFreeHost(hostTokens);
  if (stream)
    cudaStreamDestroy(stream);
  cudaGetLastError();
}

void Session::Impl::allocate() {
  const auto &buffers = e.contents.buffers;
  // Offsets in one arena: every non-weight buffer, then the runtime's own.
  std::vector<uint64_t> offsets(buffers.size(), 0);
  uint64_t cursor = 0;
  auto reserve = [&](uint64_t bytes) {
    uint64_t offset = (cursor + kArenaAlignment - 1) & ~(kArenaAlignment - 1);
    if (offset < cursor || offset + bytes < offset)
      throw Error(ErrorCode::InvalidEngine, "buffers too large to address");
    cursor = offset + bytes;
    return offset;
  };
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].role != BufferRole::Weight)
      offsets[i] = reserve(buffers[i].bytes);
  uint64_t sampledOffset = reserve(uint64_t(config.maxBatch) * 4);
  uint64_t paramsOffset = reserve(uint64_t(config.maxBatch) *
                                  sizeof(runtime::DeviceSamplingParams));
  arenaBytes = cursor;

  checkCuda(cudaMalloc(&arena, arenaBytes),
            "allocating the session's buffers and KV cache on the GPU");
  checkCuda(cudaMemset(arena, 0, arenaBytes), "clearing the session buffers");
  checkCuda(cudaMallocHost(reinterpret_cast<void **>(&hostTokens),
                           uint64_t(config.maxBatch) * 4),
            "allocating pinned host memory");

  CUdeviceptr base = reinterpret_cast<CUdeviceptr>(arena);
  CUdeviceptr weights = reinterpret_cast<CUdeviceptr>(e.weights);
  addresses.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const format::BufferDesc &buffer = buffers[i];
    addresses[i] = buffer.role == BufferRole::Weight ? weights + buffer.offset
                                                     : base + offsets[i];
    void *p = reinterpret_cast<void *>(addresses[i]);
    switch (buffer.role) {
    case BufferRole::TokenIds:
      tokenIds = static_cast<int32_t *>(p);
      break;
    case BufferRole::PastLengths:
      pastLengths = static_cast<int32_t *>(p);
      break;
    case BufferRole::StepLengths:
      stepLengths = static_cast<int32_t *>(p);
      break;
    case BufferRole::Logits:
      logits = static_cast<float *>(p);
      break;
    default:
      break;
    }
  }
  runtime::NamedBuffers named =
      runtime::findNamedBuffers(buffers, config.kvCache.coldBits != 0);
  if (named.kvCalibration >= 0) {
    kvStats = reinterpret_cast<uint64_t *>(addresses[named.kvCalibration]);
    kvStatsBytes = buffers[named.kvCalibration].bytes;
  }
  if (named.tvcCounters >= 0)
    tvcCounters = reinterpret_cast<uint64_t *>(addresses[named.tvcCounters]);
  // A paged cache's block table (the validator checked that it exists).
  const format::KVCacheConfig &kv = config.kvCache;
  for (size_t i = 0; i < buffers.size() && paged(); ++i)
    if (buffers[i].name == kv.blockTable)
      deviceTable = reinterpret_cast<int32_t *>(addresses[i]);
  if (paged())
    pages = std::make_unique<runtime::BlockAllocator>(
        kv.maxBatch, kv.maxBlocksPerSeq(), kv.blocks, kv.blockTokens);
  tvcExactTop = runtime::tvcExactTop(e.contents.metadataJson);
  char *bytes = static_cast<char *>(arena);
  sampled = reinterpret_cast<int32_t *>(bytes + sampledOffset);
  samplingParams =
      reinterpret_cast<runtime::DeviceSamplingParams *>(bytes + paramsOffset);
}

PreparedProgram Session::Impl::prepare(int programIndex, uint32_t batch,
                                       uint32_t seq) {
  return prepare(programIndex, batch, seq, uint64_t(batch) * seq);
}

PreparedProgram Session::Impl::prepare(int programIndex, uint32_t batch,
                                       uint32_t seq, uint64_t tokens) {
  const format::Program &program = e.contents.programs[programIndex];
  format::SymbolValues symbols =
      format::makePackedSymbols(batch, seq, tokens, e.multiprocessors);
  PreparedProgram prepared;
  prepared.reserve(program.launches.size());
  auto fail = [&](size_t index, const std::string &why) -> Error {
    return Error(ErrorCode::InvalidEngine,
                 "launch " + std::to_string(index) + " of program \"" +
                     program.name + "\" at B=" + std::to_string(batch) +
                     ", S=" + std::to_string(seq) +
                     ", T=" + std::to_string(tokens) + ": " + why);
  };
  for (size_t i = 0; i < program.launches.size(); ++i) {
    const format::Launch &launch = program.launches[i];
    PreparedLaunch out;
    out.function = e.functions[launch.kernel];
    out.name = &e.contents.kernels[launch.kernel].function;
    std::string why;
    int64_t value;
    for (int d = 0; d < 3; ++d) {
      if (!format::evalExpr(launch.grid[d], symbols, &value, &why))
        throw fail(i, why);
      if (value < 1 || value > (d == 0 ? 0x7fffffff : 65535))
        throw fail(i, "grid size " + std::to_string(value) + " is invalid");
      out.grid[d] = static_cast<unsigned>(value);
      if (!format::evalExpr(launch.block[d], symbols, &value, &why))
        throw fail(i, why);
      if (value < 1 || value > 1024)
        throw fail(i, "block size " + std::to_string(value) + " is invalid");
      out.block[d] = static_cast<unsigned>(value);
    }
    if (uint64_t(out.block[0]) * out.block[1] * out.block[2] > 1024)
      throw fail(i, "block exceeds 1024 threads");
    if (!format::evalExpr(launch.sharedBytes, symbols, &value, &why))
      throw fail(i, why);
    if (value < 0 ||
        uint64_t(value) > std::max(e.maxSharedOptin, kDefaultSharedLimit))
      throw fail(i, std::to_string(value) +
                        " bytes of shared memory exceed this GPU's " +
                        std::to_string(e.maxSharedOptin));
    out.sharedBytes = static_cast<unsigned>(value);
    if (out.sharedBytes > e.sharedOptedIn[launch.kernel]) {
      CUresult result = runtime::driver().funcSetAttribute(
          out.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          static_cast<int>(out.sharedBytes));
      if (result != CUDA_SUCCESS)
        throw fail(i, "kernel '" + *out.name + "' cannot have " +
                          std::to_string(out.sharedBytes) +
                          " bytes of dynamic shared memory on this GPU "
                          "(with its static shared memory, over the limit)");
      e.sharedOptedIn[launch.kernel] = out.sharedBytes;
    }
    out.values.resize(launch.args.size());
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const format::LaunchArg &arg = launch.args[a];
      uint64_t slot = 0;
      switch (arg.kind) {
      case ArgKind::BufferAddress:
        slot = addresses[arg.buffer] + arg.offset;
        break;
      case ArgKind::Int32:
      case ArgKind::Int64: {
        if (!format::evalExpr(arg.expr, symbols, &value, &why))
          throw fail(i, "argument " + std::to_string(a) + ": " + why);
        if (arg.kind == ArgKind::Int32) {
          if (value < INT32_MIN || value > INT32_MAX)
            throw fail(i, "argument " + std::to_string(a) +
                              " does not fit an int32");
          int32_t narrow = static_cast<int32_t>(value);
          std::memcpy(&slot, &narrow, 4);
        } else {
          std::memcpy(&slot, &value, 8);
        }
        break;
      }
      case ArgKind::Float32:
        std::memcpy(&slot, &arg.f32, 4);
        break;
      }
      out.values[a] = slot;
    }
    prepared.push_back(std::move(out));
  }
  // Pointers into `values` are taken last: the vectors no longer move.
  for (PreparedLaunch &launch : prepared)
    for (uint64_t &slot : launch.values)
      launch.params.push_back(&slot);
  return prepared;
}

void Session::Impl::run(const PreparedProgram &program) {
  const runtime::DriverApi &api = runtime::driver();
  CUlaunchAttribute overlap = {};
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  for (const PreparedLaunch &l : program) {
    CUresult result;
    if (programmaticLaunch && l.programmatic) {
      CUlaunchConfig launch = {};
      launch.gridDimX = l.grid[0];
      launch.gridDimY = l.grid[1];
      launch.gridDimZ = l.grid[2];
      launch.blockDimX = l.block[0];
      launch.blockDimY = l.block[1];
      launch.blockDimZ = l.block[2];
      launch.sharedMemBytes = l.sharedBytes;
      launch.hStream = stream;
      launch.attrs = &overlap;
      launch.numAttrs = 1;
      result = api.launchKernelEx(
          &launch, l.function, const_cast<void **>(l.params.data()), nullptr);
    } else {
      result = api.launchKernel(l.function, l.grid[0], l.grid[1], l.grid[2],
                                l.block[0], l.block[1], l.block[2],
                                l.sharedBytes, stream,
                                const_cast<void **>(l.params.data()), nullptr);
    }
    if (result != CUDA_SUCCESS)
      checkDriver(
          result,
          ("launching kernel '" + *l.name + "' (grid " +
           std::to_string(l.grid[0]) + "x" + std::to_string(l.grid[1]) + "x" +
           std::to_string(l.grid[2]) + ", block " + std::to_string(l.block[0]) +
           "x" + std::to_string(l.block[1]) + "x" + std::to_string(l.block[2]) +
           ", " + std::to_string(l.sharedBytes) + " bytes of shared memory)")
              .c_str());
  }
}

void Session::Impl::upload(void *to, const void *from, uint64_t bytes,
                           const char *what) {
  checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream),
            what);
}

void Session::Impl::stepTail(uint32_t batch, bool sample) {
  if (sample)
    checkCuda(runtime::launchSample(logits, batch, config.vocabSize,
                                    config.vocabSize, samplingParams,
                                    pastLengths, stepLengths, sampled, stream),
              "launching the sampling kernel");
  checkCuda(runtime::launchAdvance(pastLengths, stepLengths, batch,
                                   sample ? sampled : nullptr, tokenIds,
                                   stream),
            "launching the advance kernel");
  if (sample)
    checkCuda(cudaMemcpyAsync(hostTokens, sampled, uint64_t(batch) * 4,
                              cudaMemcpyDeviceToHost, stream),
              "copying sampled tokens to the host");
}

uint32_t Session::Impl::bucketFor(uint32_t batch) const {
  for (uint32_t b : buckets)
    if (b >= batch)
      return b;
  return buckets.back();
}

const PreparedProgram &Session::Impl::preparedDecode(uint32_t bucket) {
  auto prepared = decodeByBucket.find(bucket);
  if (prepared == decodeByBucket.end())
    prepared =
        decodeByBucket.emplace(bucket, prepare(decodeProgram, bucket, 1)).first;
  return prepared->second;
}

cudaGraphExec_t Session::Impl::decodeGraph(uint32_t bucket) {
  auto graph = graphs.find(bucket);
  if (graph != graphs.end())
    return graph->second;
  const PreparedProgram &program = preparedDecode(bucket);
  // Capturing records the launches; nothing runs until the graph does.
  checkCuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            "starting CUDA graph capture");
  cudaGraph_t captured = nullptr;
  try {
    run(program);
    stepTail(bucket, true);
  } catch (...) {
    cudaStreamEndCapture(stream, &captured);
    if (captured)
      cudaGraphDestroy(captured);
    cudaGetLastError();
    throw;
  }
  checkCuda(cudaStreamEndCapture(stream, &captured),
            "capturing the decode step");
  cudaGraphExec_t exec = nullptr;
  cudaError_t rc = cudaGraphInstantiate(&exec, captured, 0);
  cudaGraphDestroy(captured);
  checkCuda(rc, "instantiating the decode graph");
  return graphs.emplace(bucket, exec).first->second;
}

void Session::Impl::decodeStep(uint32_t bucket) {
  uploadTable(); // outside the graph: its launches read the buffer
  if (!options.useCudaGraphs) {
    run(preparedDecode(bucket));
    stepTail(bucket, true);
    return;
  }
  checkCuda(cudaGraphLaunch(decodeGraph(bucket), stream),
            "launching the decode graph");
}

/// Fresh state for a request: empty cache, and `sampling` for the first
/// `batch` sequences (greedy for the rest), each its own random stream.
void Session::Impl::resetSequences(uint32_t batch,
                                   const SamplingParams &sampling) {
  const uint32_t maxBatch = config.maxBatch;
  std::vector<runtime::DeviceSamplingParams> sp(maxBatch);
  for (uint32_t b = 0; b < maxBatch; ++b)
    sp[b] = deviceSampling(b < batch ? sampling : SamplingParams(), b);
  checkCuda(cudaMemsetAsync(pastLengths, 0, maxBatch * 4, stream),
            "resetting lengths");
  resetPages();
  slotLengths.assign(maxBatch, 0);
  slotLive.assign(maxBatch, false);
  // Calibration counts the request's quantization (read once at its end).
  if (kvStats)
    checkCuda(cudaMemsetAsync(kvStats, 0, kvStatsBytes, stream),
              "resetting the KV calibration counters");
  checkCuda(cudaMemcpyAsync(samplingParams, sp.data(),
                            sp.size() * sizeof(sp[0]), cudaMemcpyHostToDevice,
                            stream),
            "uploading sampling parameters");
}

/// Prefills `prompts` in chunks of at most max_prefill_tokens per sequence,
/// arranged so that every sequence's last prompt token is in the final
/// chunk (whose logits are sampled when `sampleLast`); a sequence with
/// nothing in a chunk has length 0. Returns the number of chunks.
uint32_t
Session::Impl::prefill(const std::vector<std::vector<int32_t>> &prompts,
                       bool sampleLast) {
  const uint32_t batch = static_cast<uint32_t>(prompts.size());
  const uint32_t maxBatch = config.maxBatch;
  std::vector<uint32_t> promptLengths;
  for (const auto &p : prompts)
    promptLengths.push_back(static_cast<uint32_t>(p.size()));
  const std::vector<std::vector<uint32_t>> counts =
      runtime::planPrefillChunks(promptLengths, config.maxPrefillTokens);
  const uint32_t chunks = static_cast<uint32_t>(counts.size());
  std::vector<uint32_t> done(batch, 0);
  std::vector<int32_t> stepLengthsHost(maxBatch, 0);
  for (uint32_t c = 0; c < chunks; ++c) {
    uint32_t seq = *std::max_element(counts[c].begin(), counts[c].end());
    std::vector<int32_t> ids(uint64_t(batch) * seq, 0);
    for (uint32_t b = 0; b < batch; ++b) {
      std::copy_n(prompts[b].begin() + done[b], counts[c][b],
                  ids.begin() + uint64_t(b) * seq);
      done[b] += counts[c][b];
      stepLengthsHost[b] = static_cast<int32_t>(counts[c][b]);
    }
    checkCuda(cudaMemcpyAsync(tokenIds, ids.data(), ids.size() * 4,
                              cudaMemcpyHostToDevice, stream),
              "uploading prompt tokens");
    checkCuda(cudaMemcpyAsync(stepLengths, stepLengthsHost.data(), maxBatch * 4,
                              cudaMemcpyHostToDevice, stream),
              "uploading step lengths");
    uploadTable();
    run(prepare(prefillProgramFor(uint64_t(batch) * seq), batch, seq));
    stepTail(batch, sampleLast && c + 1 == chunks);
    // Pageable uploads are staged before the call returns, but the next
    // chunk's ids must not race this chunk's kernels reading tokenIds.
    checkCuda(cudaStreamSynchronize(stream), "running the prefill");
  }
  return chunks;
}

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

Session::Session(std::shared_ptr<Engine> engine,
                 const SessionOptions &options) {
  if (!engine)
    throw Error(ErrorCode::InvalidArgument, "Session needs a loaded engine");
  state.reset(new Impl(std::move(engine), options));
}

Session::~Session() = default;

uint64_t Session::deviceBytes() const { return state->arenaBytes; }

std::vector<uint64_t> Session::kvCalibrationWords() {
  Impl &s = *state;
  if (!s.kvStats)
    return {};
  std::vector<uint64_t> words(s.kvStatsBytes / 8);
  checkCuda(cudaMemcpyAsync(words.data(), s.kvStats, words.size() * 8,
                            cudaMemcpyDeviceToHost, s.stream),
            "reading the KV calibration counters");
  checkCuda(cudaStreamSynchronize(s.stream),
            "reading the KV calibration counters");
  return words;
}
uint32_t Session::capturedGraphs() const {
  return static_cast<uint32_t>(state->graphs.size());
}
std::vector<uint32_t> Session::persistentBuckets() const {
  return state->persistentBuckets;
}

uint32_t Session::captureDecodeGraphs() {
  for (uint32_t bucket : state->buckets) {
    if (state->options.useCudaGraphs)
      state->decodeGraph(bucket);
    else
      state->preparedDecode(bucket);
  }
  return capturedGraphs();
}

Session::TvcCounts Session::tvcCounts() const {
  TvcCounts counts;
  if (!state->tvcCounters)
    return counts;
  uint64_t host[2];
  checkCuda(cudaMemcpyAsync(host, state->tvcCounters, sizeof(host),
                            cudaMemcpyDeviceToHost, state->stream),
            "reading the TVC counters");
  checkCuda(cudaStreamSynchronize(state->stream), "reading the TVC counters");
  counts.proved = host[0];
  counts.fallback = host[1];
  return counts;
}

double Session::timeLMHead(uint32_t batch, uint32_t repeats) {
  Impl &s = *state;
  const uint32_t bucket = s.bucketFor(batch);
  PreparedProgram head;
  for (PreparedLaunch &launch : s.prepare(s.decodeProgram, bucket, 1))
    if (launch.name->find("lm_head") != std::string::npos ||
        launch.name->find("sits_tvc_") != std::string::npos)
      head.push_back(std::move(launch));
  if (head.empty() || repeats == 0)
    return 0;
  // The launches keep pointers to their own argument slots: rebuild them.
  for (PreparedLaunch &launch : head) {
    launch.params.clear();
    for (uint64_t &slot : launch.values)
      launch.params.push_back(&slot);
  }
  cudaEvent_t begin, end;
  checkCuda(cudaEventCreate(&begin), "creating a CUDA event");
  checkCuda(cudaEventCreate(&end), "creating a CUDA event");
  s.run(head); // warm-up
  checkCuda(cudaEventRecord(begin, s.stream), "recording a CUDA event");
  for (uint32_t i = 0; i < repeats; ++i)
    s.run(head);
  checkCuda(cudaEventRecord(end, s.stream), "recording a CUDA event");
  checkCuda(cudaEventSynchronize(end), "timing the LM head");
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, begin, end), "timing the LM head");
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return double(ms) / repeats;
}

void Session::disableTvcFallbackForBenchmark(bool disabled) {
  if (!state->tvcCounters)
    return;
  uint64_t mode = disabled ? 1 : 0;
  checkCuda(cudaMemcpyAsync(state->tvcCounters + 2, &mode, sizeof(mode),
                            cudaMemcpyHostToDevice, state->stream),
            "setting the TVC mode");
  checkCuda(cudaStreamSynchronize(state->stream), "setting the TVC mode");
}

const std::shared_ptr<Engine> &Session::engine() const { return state->engine; }

void checkSamplingParams(const SamplingParams &sp, uint32_t tvcExactTop) {
  if (!std::isfinite(sp.temperature) || sp.temperature < 0)
    throw Error(ErrorCode::InvalidArgument,
                "temperature must be a finite number >= 0");
  if (!std::isfinite(sp.topP) || sp.topP <= 0 || sp.topP > 1)
    throw Error(ErrorCode::InvalidArgument, "top-p must be in (0, 1]");
  runtime::checkTvcSampling(tvcExactTop, sp.temperature, sp.topK);
}

static void checkRequest(const format::RuntimeConfig &config,
                         const std::vector<std::vector<int32_t>> &prompts,
                         const GenerateParams &params,
                         uint32_t tvcExactTop = 0) {
  if (prompts.empty() || prompts.size() > config.maxBatch)
    throw Error(ErrorCode::InvalidArgument,
                "batch of " + std::to_string(prompts.size()) +
                    " prompts; this engine takes 1 to " +
                    std::to_string(config.maxBatch));
  for (size_t s = 0; s < prompts.size(); ++s) {
    const std::vector<int32_t> &prompt = prompts[s];
    std::string which = prompts.size() > 1 ? " " + std::to_string(s) : "";
    if (prompt.empty())
      throw Error(ErrorCode::InvalidArgument, "prompt" + which + " is empty");
    if (prompt.size() > config.maxSeqLen)
      throw Error(ErrorCode::PromptTooLong,
                  "prompt" + which + " has " + std::to_string(prompt.size()) +
                      " tokens, more than the KV cache capacity of " +
                      std::to_string(config.maxSeqLen));
    for (size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || uint32_t(prompt[i]) >= config.vocabSize)
        throw Error(ErrorCode::TokenOutOfVocab,
                    "token id " + std::to_string(prompt[i]) + " at position " +
                        std::to_string(i) + " of prompt" + which +
                        " is outside the vocabulary (0.." +
                        std::to_string(config.vocabSize - 1) + ")");
  }
  if (params.maxNewTokens < 1)
    throw Error(ErrorCode::InvalidArgument,
                "max new tokens must be at least 1");
  checkSamplingParams(params.sampling, tvcExactTop);
}

GenerateResult
Session::generate(const std::vector<std::vector<int32_t>> &prompts,
                  const GenerateParams &params, const TokenCallback &callback) {
  Impl &s = *state;
  const format::RuntimeConfig &config = s.config;
  checkRequest(config, prompts, params, s.tvcExactTop);
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  const TvcCounts tvcBefore = tvcCounts();

  const uint32_t batch = static_cast<uint32_t>(prompts.size());
  const uint32_t bucket = s.bucketFor(batch);
  const uint32_t maxBatch = config.maxBatch;
  GenerateResult result;
  result.tokens.resize(batch);
  GenerateStats &stats = result.stats;
  stats.batch = batch;
  stats.bucket = bucket;
  stats.cudaGraph = s.options.useCudaGraphs;
  stats.programmaticLaunch = s.programmaticLaunch;
  stats.persistentDecode = s.isPersistentBucket(bucket);

  s.resetSequences(batch, params.sampling);
  // A paged cache: the blocks of each sequence's longest run up front.
  for (uint32_t b = 0; b < batch; ++b)
    s.reserveRows(b,
                  std::min<uint64_t>(config.maxSeqLen,
                                     prompts[b].size() + params.maxNewTokens));
  for (const auto &p : prompts)
    stats.promptTokens += static_cast<uint32_t>(p.size());
  auto start = std::chrono::steady_clock::now();
  stats.prefillChunks = s.prefill(prompts, true);
  stats.prefillMs = msSince(start);
  std::vector<int32_t> stepLengths(maxBatch, 0);

  std::vector<uint32_t> lengths(batch);
  std::vector<bool> active(batch, true);
  for (uint32_t b = 0; b < batch; ++b)
    lengths[b] = static_cast<uint32_t>(prompts[b].size());
  auto deliver = [&]() {
    bool anyActive = false;
    for (uint32_t b = 0; b < batch; ++b) {
      if (!active[b])
        continue;
      int32_t token = s.hostTokens[b];
      result.tokens[b].push_back(token);
      ++stats.generatedTokens;
      if ((callback && !callback(b, token)) ||
          result.tokens[b].size() >= params.maxNewTokens ||
          (params.stopAtEos &&
           std::find(config.eosTokenIds.begin(), config.eosTokenIds.end(),
                     token) != config.eosTokenIds.end()))
        active[b] = false;
      anyActive |= active[b];
    }
    return anyActive;
  };

  bool more = deliver();
  // Decode: active sequences step by one token, the rest (finished ones and
  // the bucket's padding) by zero, so they never write the cache.
  auto uploadStepLengths = [&]() {
    for (uint32_t b = 0; b < maxBatch; ++b)
      stepLengths[b] = b < batch && active[b] ? 1 : 0;
    checkCuda(cudaMemcpyAsync(s.stepLengths, stepLengths.data(), maxBatch * 4,
                              cudaMemcpyHostToDevice, s.stream),
              "uploading step lengths");
  };
  if (more) {
    uploadStepLengths();
    if (bucket > batch)
      checkCuda(cudaMemsetAsync(s.tokenIds + batch, 0, (bucket - batch) * 4,
                                s.stream),
                "clearing padded token ids");
  }
  auto decodeStart = std::chrono::steady_clock::now();
  while (more) {
    for (uint32_t b = 0; b < batch; ++b)
      if (active[b] && lengths[b] + 1 > config.maxSeqLen)
        throw Error(ErrorCode::KVCacheFull,
                    "KV cache full: sequence " + std::to_string(b) + " holds " +
                        std::to_string(lengths[b]) +
                        " tokens, the capacity; generated " +
                        std::to_string(result.tokens[b].size()) + " of " +
                        std::to_string(params.maxNewTokens) + " tokens");
    std::vector<bool> before = active;
    s.decodeStep(bucket);
    checkCuda(cudaStreamSynchronize(s.stream), "running a decode step");
    ++stats.decodeSteps;
    for (uint32_t b = 0; b < batch; ++b)
      lengths[b] += active[b] ? 1 : 0;
    more = deliver();
    if (more && before != active)
      uploadStepLengths();
  }
  stats.decodeMs = stats.decodeSteps ? msSince(decodeStart) : 0;
  if (stats.decodeSteps) {
    stats.decodeMsPerStep = stats.decodeMs / stats.decodeSteps;
    uint32_t decoded = stats.generatedTokens - batch;
    stats.tokensPerSecond = decoded / (stats.decodeMs / 1000.0);
  }
  stats.weightBytes = s.e.weightBytes;
  stats.sessionBytes = s.arenaBytes;
  size_t freeBytes = 0, totalBytes = 0;
  checkCuda(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
  stats.deviceUsedBytes = totalBytes - freeBytes;
  stats.deviceTotalBytes = totalBytes;
  if (s.tvcCounters) {
    const TvcCounts tvcAfter = tvcCounts();
    stats.tvc = true;
    stats.tvcProvedRows = tvcAfter.proved - tvcBefore.proved;
    stats.tvcFallbackRows = tvcAfter.fallback - tvcBefore.fallback;
  }
  return result;
}

std::vector<std::vector<std::vector<float>>>
Session::scoreTokens(const std::vector<std::vector<int32_t>> &sequences,
                     uint32_t prefillTokens) {
  Impl &s = *state;
  const format::RuntimeConfig &config = s.config;
  GenerateParams greedy; // checks ids and lengths; sampling stays greedy
  checkRequest(config, sequences, greedy);
  size_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (prefillTokens < 1 || sequences[i].size() < prefillTokens)
      throw Error(ErrorCode::InvalidArgument,
                  "sequence " + std::to_string(i) + " has " +
                      std::to_string(sequences[i].size()) +
                      " tokens, fewer than the " +
                      std::to_string(prefillTokens) + " to prefill");
    longest = std::max(longest, sequences[i].size());
  }
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  const uint32_t batch = static_cast<uint32_t>(sequences.size());
  const uint32_t bucket = s.bucketFor(batch);
  const uint32_t maxBatch = config.maxBatch;
  const uint64_t vocab = config.vocabSize;

  std::vector<std::vector<std::vector<float>>> result(batch);
  std::vector<float> host(uint64_t(batch) * vocab);
  auto collect = [&](const std::vector<bool> &active) {
    checkCuda(cudaMemcpyAsync(host.data(), s.logits, host.size() * 4,
                              cudaMemcpyDeviceToHost, s.stream),
              "copying logits to the host");
    checkCuda(cudaStreamSynchronize(s.stream), "scoring a step");
    for (uint32_t b = 0; b < batch; ++b)
      if (active[b])
        result[b].emplace_back(host.begin() + b * vocab,
                               host.begin() + (b + 1) * vocab);
  };

  s.resetSequences(batch, greedy.sampling);
  for (uint32_t b = 0; b < batch; ++b)
    s.reserveRows(b, std::min<uint64_t>(config.maxSeqLen, sequences[b].size()));
  std::vector<std::vector<int32_t>> prefixes;
  for (const auto &sequence : sequences)
    prefixes.emplace_back(sequence.begin(), sequence.begin() + prefillTokens);
  s.prefill(prefixes, true);
  collect(std::vector<bool>(batch, true));

  std::vector<int32_t> stepLengths(maxBatch, 0), ids(bucket, 0);
  std::vector<bool> active(batch);
  for (size_t position = prefillTokens; position < longest; ++position) {
    if (position + 1 > config.maxSeqLen)
      throw Error(ErrorCode::KVCacheFull,
                  "KV cache full: scoring " + std::to_string(longest) +
                      " tokens needs a capacity of at least that");
    for (uint32_t b = 0; b < batch; ++b) {
      active[b] = position < sequences[b].size();
      stepLengths[b] = active[b] ? 1 : 0;
      ids[b] = active[b] ? sequences[b][position] : 0;
    }
    // The forced tokens replace what the previous step sampled.
    checkCuda(cudaMemcpyAsync(s.stepLengths, stepLengths.data(), maxBatch * 4,
                              cudaMemcpyHostToDevice, s.stream),
              "uploading step lengths");
    checkCuda(cudaMemcpyAsync(s.tokenIds, ids.data(), bucket * 4,
                              cudaMemcpyHostToDevice, s.stream),
              "uploading forced tokens");
    s.decodeStep(bucket);
    collect(active);
  }
  return result;
}

} // namespace sits
