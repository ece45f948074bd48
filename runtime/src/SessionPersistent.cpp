//===- SessionPersistent.cpp - The persistent decode kernels --------------===//
//
// An engine of sitsc --decode-kernels=persistent carries, per decode bucket,
// one kernel that runs the decode program's launches as its tasks, on
// `blocks` blocks that must all be resident at once (docs/runtime.md). The
// session loads its own copy of their module: the kernels count finished
// tiles in `__device__` counters of the module, which would be shared by
// sessions stepping on other streams. Each bucket's argument table holds
// the decode launches' arguments, evaluated once: the device addresses are
// fixed for the session and everything else a step reads is in device
// memory. Its launch then stands in decodeByBucket for the decode
// program's, and is captured in the bucket's CUDA graph as they would be.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/Driver.h"
#include "src/SessionImpl.h"

#include <algorithm>

namespace sits {

using runtime::checkCuda;
using runtime::checkDriver;

namespace {

constexpr uint64_t kTableAlignment = 256;
constexpr uint64_t kDefaultSharedLimit = 48 * 1024;

} // namespace

void Session::Impl::loadPersistentDecode() {
  const format::PersistentDecode &pd = e.contents.persistentDecode;
  const runtime::DriverApi &api = runtime::driver();
  std::vector<const format::PersistentBucket *> used;
  for (uint32_t bucket : buckets)
    if (const format::PersistentBucket *entry = pd.find(bucket))
      used.push_back(entry);
  if (used.empty())
    return;
  persistentModule = e.loadModule(e.contents.modules[e.persistentModule]);

  // One table per bucket, in one allocation.
  std::vector<uint64_t> offsets;
  uint64_t tableBytes = 0;
  for (const format::PersistentBucket *bucket : used) {
    offsets.push_back(tableBytes);
    tableBytes += (uint64_t(bucket->argBytes) + kTableAlignment - 1) /
                  kTableAlignment * kTableAlignment;
  }
  checkCuda(cudaMalloc(&persistentTables, tableBytes),
            "allocating the persistent decode kernels' argument tables");
  std::vector<uint64_t> buffers(addresses.begin(), addresses.end());
  std::vector<uint8_t> table;
  std::string error;
  for (size_t i = 0; i < used.size(); ++i) {
    const format::PersistentBucket &bucket = *used[i];
    const std::string &name = e.contents.kernels[bucket.kernel].function;
    CUfunction function = nullptr;
    CUresult rc =
        api.moduleGetFunction(&function, persistentModule, name.c_str());
    if (rc != CUDA_SUCCESS) {
      if (runtime::isStickyError(rc))
        checkDriver(rc, "looking up a persistent decode kernel");
      throw Error(
          ErrorCode::InvalidEngine,
          "persistent decode kernel \"" + name +
              "\" is not in its module: " + runtime::driverErrorText(rc));
    }
    // Its dynamic shared memory, then whether all of its blocks fit on
    // this GPU at once with it, its static shared memory and its registers:
    // tiles wait for tiles of other blocks, so a block that is not resident
    // would hang the step.
    if (bucket.sharedBytes > kDefaultSharedLimit &&
        api.funcSetAttribute(
            function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(bucket.sharedBytes)) != CUDA_SUCCESS)
      throw Error(ErrorCode::WrongGpu,
                  "persistent decode kernel \"" + name + "\" cannot have " +
                      std::to_string(bucket.sharedBytes) +
                      " bytes of dynamic shared memory on " + e.deviceName +
                      " (with its static shared memory, over the limit)");
    int perMultiprocessor = 0;
    checkDriver(api.occupancyMaxActiveBlocksPerMultiprocessor(
                    &perMultiprocessor, function,
                    static_cast<int>(bucket.threads), bucket.sharedBytes),
                "querying the persistent decode kernel's occupancy");
    const int64_t resident = int64_t(perMultiprocessor) * e.multiprocessors;
    if (resident < pd.blocks)
      throw Error(ErrorCode::WrongGpu,
                  "persistent decode kernel \"" + name + "\" needs all " +
                      std::to_string(pd.blocks) +
                      " of its blocks resident at once, but " + e.deviceName +
                      " holds " + std::to_string(perMultiprocessor) +
                      " per multiprocessor (" + std::to_string(bucket.threads) +
                      " threads, " + std::to_string(bucket.sharedBytes) +
                      " bytes of dynamic shared memory) on " +
                      std::to_string(e.multiprocessors) +
                      " multiprocessors; compile with --persistent-blocks=" +
                      std::to_string(resident) +
                      " or less, or with --decode-kernels=graph");
    if (!format::fillPersistentArguments(e.contents, bucket, buffers, &table,
                                         &error))
      throw Error(ErrorCode::InvalidEngine, error);
    char *device = static_cast<char *>(persistentTables) + offsets[i];
    checkCuda(
        cudaMemcpy(device, table.data(), table.size(), cudaMemcpyHostToDevice),
        "copying a persistent decode kernel's argument table");

    PreparedProgram program(1);
    PreparedLaunch &launch = program[0];
    launch.function = function;
    launch.name = &name;
    launch.grid[0] = pd.blocks;
    launch.block[0] = bucket.threads;
    launch.sharedBytes = bucket.sharedBytes;
    // Its tiles wait for their dependencies themselves, and for nothing of
    // the previous kernel: it starts when that one has ended.
    launch.programmatic = false;
    launch.values = {reinterpret_cast<uint64_t>(device)};
    PreparedProgram &stored = decodeByBucket[bucket.batch];
    stored = std::move(program);
    stored[0].params = {&stored[0].values[0]};
    persistentBuckets.push_back(bucket.batch);
  }
}

PersistentTrace Session::persistentTrace(uint32_t batch) {
  Impl &s = *state;
  const format::PersistentDecode &pd = s.e.contents.persistentDecode;
  const format::PersistentBucket *bucket = pd.find(batch);
  if (!bucket || !s.isPersistentBucket(batch))
    throw Error(ErrorCode::InvalidArgument,
                "bucket " + std::to_string(batch) +
                    " has no persistent decode kernel in this session");
  // The kernel's records: `blocks` x slots of kPersistentTraceWords words
  // (backends/cuda/kernels/persistent.cuh), under the kernel's name.
  constexpr uint64_t kWords = format::kPersistentTraceWords;
  const std::string name =
      s.e.contents.kernels[bucket->kernel].function + "_trace";
  CUdeviceptr records = 0;
  size_t bytes = 0;
  CUresult rc = runtime::driver().moduleGetGlobal(
      &records, &bytes, s.persistentModule, name.c_str());
  if (rc == CUDA_ERROR_NOT_FOUND)
    throw Error(ErrorCode::InvalidArgument,
                "this engine's persistent decode kernels keep no trace "
                "(compile with sitsc --persistent-trace)");
  checkDriver(rc, "looking up a persistent decode kernel's trace");
  const uint64_t recordBytes = kWords * sizeof(uint64_t);
  if (bytes % (recordBytes * pd.blocks) != 0)
    throw Error(ErrorCode::InvalidEngine,
                name + " has " + std::to_string(bytes) +
                    " bytes, not whole records for " +
                    std::to_string(pd.blocks) + " blocks");
  std::vector<uint64_t> words(bytes / sizeof(uint64_t));
  checkCuda(cudaStreamSynchronize(s.stream), "waiting for the session");
  checkCuda(cudaMemcpy(words.data(), reinterpret_cast<void *>(records), bytes,
                       cudaMemcpyDeviceToHost),
            "reading a persistent decode kernel's trace");

  PersistentTrace trace;
  const format::Program &decode = s.e.contents.programs[s.decodeProgram];
  for (const format::Launch &launch : decode.launches)
    trace.taskKernels.push_back(s.e.contents.kernels[launch.kernel].function);
  const uint64_t slots = bytes / recordBytes / pd.blocks;
  for (uint64_t r = 0; r < words.size() / kWords; ++r) {
    const uint64_t *record = &words[r * kWords];
    if (record[1] == 0) // a slot no tile of the last step used
      continue;
    PersistentTileTime tile;
    tile.task = static_cast<uint32_t>(record[0] >> 32);
    tile.tile = static_cast<uint32_t>(record[0]);
    tile.block = static_cast<uint32_t>(r / slots);
    tile.enterNs = record[1];
    tile.readyNs = record[2];
    tile.leaveNs = record[3];
    trace.tiles.push_back(tile);
  }
  return trace;
}

void Session::Impl::releasePersistentDecode() {
  // Teardown ignores errors: it may run while an exception unwinds.
  if (persistentTables)
    cudaFree(persistentTables);
  persistentTables = nullptr;
  if (persistentModule)
    runtime::driver().moduleUnload(persistentModule);
  persistentModule = nullptr;
}

} // namespace sits
