//===- persistent.cuh - The persistent decode kernel's walk over its tiles ===//
//
// With sitsc --decode-kernels=persistent, the decode step of each batch
// bucket is one kernel of `blocks` blocks, all resident at once, that runs
// the tiles of the step's launches (tasks) itself (docs/codegen.md). The
// generated kernel (CudaEmitter.cpp) holds the bucket's schedule as a
// constant table of PersistentTask and, per kernel the tasks run, the call
// its graph-mode entry makes; this header is the rest:
//
//   for each task t, for each tile j of t dealt to this block:
//     enterTile(t, j)                    the tile's coordinates, a barrier
//     if (threadIdx.x < t.threads) the task's kernel body, which calls
//       waitForPrecedingKernels() once:  thread 0 waits for each dependency
//                                        of t (acquire loads), a barrier
//     leaveTile(t)                       a barrier, then thread 0 releases
//
// The body waits where its graph-mode kernel waits for the kernels before
// it: the GEMVs after starting their first weight copies, so that those
// are in flight while the tile waits; the other kernels at once.
//
// Counters: `sync` (one array per bucket, in global memory, zero when the
// module loads) holds the epoch, the blocks that finished this step, and
// per task the tiles that finished, counted across steps and never reset.
// A step waits for (epoch + 1) x tiles; the last block to finish a step
// increments the epoch, so a graph replay needs no memset (comparisons are
// modulo 2^32). Progress needs no grid barrier: every dependency comes
// earlier in the task order, and so does every tile a block runs before the
// one it waits in.
//
// Compiled only with SITS_PERSISTENT_DECODE (tile.cuh's persistent mode).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_PERSISTENT_CUH
#define SITS_KERNELS_PERSISTENT_CUH

#include "sits/common.cuh"

#ifndef SITS_PERSISTENT_DECODE
#error                                                                         \
    "persistent.cuh needs SITS_PERSISTENT_DECODE (tile.cuh's persistent mode)"
#endif

namespace sits {

/// One task of a bucket's schedule: a launch of the graph-mode decode step,
/// evaluated for the bucket. Tile j runs on block (firstBlock + j) % blocks.
struct PersistentTask {
  unsigned kernel;     ///< the case of the kernel's switch that runs it
  unsigned tiles;      ///< grid[0] x grid[1] x grid[2]
  unsigned firstBlock; ///< the block of tile 0
  unsigned grid[3];    ///< the launch's grid
  unsigned threads;    ///< the launch's block (one dimension)
  unsigned argOffset;  ///< its argument block, in the kernel's table
  unsigned firstDep;   ///< its dependencies: deps[firstDep, + depCount)
  unsigned depCount;
};

/// Words of a bucket's `sync` array before the tasks' counters.
constexpr unsigned kPersistentSyncHeader = 2;

__device__ __forceinline__ unsigned loadAcquire(const unsigned *address) {
#ifdef SITS_EMULATE
  return *static_cast<const volatile unsigned *>(address);
#else
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
               : "=r"(value)
               : "l"(address)
               : "memory");
  return value;
#endif
}

/// Adds 1 to `counter` after every write the block made before the barrier
/// that precedes it (the wait's acquire load pairs with it): a release
/// fence at GPU scope, lighter than __threadfence's sequentially
/// consistent one, and a reduction that returns nothing to wait for.
__device__ __forceinline__ void addRelease(unsigned *counter) {
#ifdef SITS_EMULATE
  atomicAdd(counter, 1u);
#else
  asm volatile("fence.acq_rel.gpu;\n\t"
               "red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(counter)
               : "memory");
#endif
}

/// Words of a tile's record in a trace (sitsc --persistent-trace): its
/// task << 32 | its tile, then the times (ns) it was entered, had its
/// dependencies, and was left.
constexpr unsigned kPersistentTraceWords = 4;

/// The GPU's clock in ns (the emulator's: one tick a reading).
__device__ __forceinline__ unsigned long long persistentClock() {
#ifdef SITS_EMULATE
  return sits_emu::nextTick();
#else
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
#endif
}

/// The walk of one block of the persistent kernel.
class PersistentBlock {
public:
  /// `trace`, when not null, has `traceSlots` records a block (the most
  /// tiles a block runs), block b's from record b x traceSlots: each step
  /// writes its tiles' in the order the block runs them.
  __device__ PersistentBlock(const PersistentTask *tasks, const unsigned *deps,
                             unsigned *sync, unsigned blocks,
                             unsigned long long *trace = nullptr,
                             unsigned traceSlots = 0)
      : deps(deps), sync(sync), blocks(blocks), block(persistentBlockIndex()) {
    // The step's epoch: the last block of the previous step raised it
    // before that launch ended.
    if (threadIdx.x == 0) {
      RunningTile &running = sitsRunningTile;
      running.epoch = loadAcquire(&sync[0]);
      running.tasks = tasks;
      running.sync = sync;
      // Thread 0 keeps the trace in shared memory, not in every thread's
      // registers.
      running.trace = nullptr;
      running.nextTrace = trace
                              ? trace + static_cast<unsigned long long>(block) *
                                            traceSlots * kPersistentTraceWords
                              : nullptr;
    }
  }

  /// The first tile of `task` this block runs (then every blocks-th).
  __device__ unsigned firstTile(const PersistentTask &task) const {
    return (block + blocks - task.firstBlock) % blocks;
  }

  /// Gives the tile its launch's coordinates and sizes, and its
  /// dependencies for waitForTileDependencies.
  __device__ void enterTile(const PersistentTask &task, unsigned id,
                            unsigned tile) {
    if (threadIdx.x == 0) {
      RunningTile &running = sitsRunningTile;
      running.index[0] = tile % task.grid[0];
      running.index[1] = tile / task.grid[0] % task.grid[1];
      running.index[2] = tile / (task.grid[0] * task.grid[1]);
      running.size[0] = task.threads;
      running.size[1] = running.size[2] = 1;
      for (int i = 0; i < 3; ++i)
        running.grid[i] = task.grid[i];
      running.threads = task.threads;
      running.task = id;
      running.tile = tile;
      running.deps = deps + task.firstDep;
      running.depsEnd = deps + task.firstDep + task.depCount;
      if (unsigned long long *record = running.nextTrace) {
        record[0] = static_cast<unsigned long long>(id) << 32 | tile;
        record[1] = persistentClock();
        running.trace = record;
      }
    }
    syncPersistentBlock();
  }

  /// Counts the tile as finished once every thread is done with it.
  __device__ void leaveTile(unsigned id) {
    syncPersistentBlock();
    if (threadIdx.x == 0) {
      RunningTile &running = sitsRunningTile;
      if (unsigned long long *record = running.trace) {
        record[3] = persistentClock();
        running.nextTrace = record + kPersistentTraceWords;
      }
      addRelease(&sync[kPersistentSyncHeader + id]);
    }
  }

  /// After the last tile: the last block of the step raises the epoch.
  __device__ void finish() {
    if (threadIdx.x != 0)
      return;
    __threadfence();
    if (atomicAdd(&sync[1], 1u) == blocks - 1) {
      atomicExch(&sync[1], 0u);
      __threadfence();
      atomicAdd(&sync[0], 1u);
    }
  }

private:
  const unsigned *deps;
  unsigned *sync;
  unsigned blocks, block;
};

/// Thread 0 spins until every tile of each dependency of the running tile's
/// task has finished this step (a step waits for (epoch + 1) x tiles), then
/// the tile's threads meet at its barrier: what thread 0 acquired is then
/// visible to all of them.
__device__ void waitForTileDependencies() {
  if (threadIdx.x == 0) {
    const RunningTile &running = sitsRunningTile;
    for (const unsigned *dep = running.deps; dep != running.depsEnd; ++dep) {
      const unsigned tiles = running.tasks[*dep].tiles;
      const unsigned target = (running.epoch + 1) * tiles;
      const unsigned *counter = &running.sync[kPersistentSyncHeader + *dep];
      for (unsigned seen;
           static_cast<int>((seen = loadAcquire(counter)) - target) < 0;) {
#ifdef SITS_EMULATE
        // Lets the other blocks run; a wait no block can end is reported.
        sits_emu::spinWait(running.task, running.tile, *dep,
                           seen - running.epoch * tiles, tiles);
#else
        (void)seen;
        asm volatile("nanosleep.u32 32;");
#endif
      }
    }
    if (running.trace)
      running.trace[2] = persistentClock();
  }
  syncTile();
}

} // namespace sits

#endif // SITS_KERNELS_PERSISTENT_CUH
