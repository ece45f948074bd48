//===- tile.cuh - A kernel's place in its launch --------------------------===//
//
// Every kernel reads its block's coordinates and the block and grid sizes,
// synchronizes its block and orders itself after the previous kernel only
// through the accessors below, never through blockIdx, blockDim, gridDim,
// __syncthreads or griddepcontrol directly (tile-accessors.test checks it).
//
// Why: a persistent decode kernel (docs/codegen.md) is to run each launch's
// blocks as tiles of its own blocks, one after another. A tile's coordinates
// and sizes are then the ones its launch would have had, given by the
// persistent kernel, and its barriers cover the tile's threads only. Giving
// the kernels those here leaves their arithmetic untouched.
//
// Graph mode (every kernel its own launch): each accessor is exactly the
// CUDA built-in (inlined, so the generated code is the same). Persistent
// mode (SITS_PERSISTENT_DECODE, the translation unit of the persistent
// decode kernels, persistent.cuh): the running tile's coordinates and sizes
// are in shared memory, set per tile by the persistent kernel, syncTile is
// a barrier over the tile's threads only, the wait for the preceding
// kernels waits for the tile's dependencies, and letting dependents launch
// is a no-op.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_TILE_CUH
#define SITS_KERNELS_TILE_CUH

// Reads of bytes other blocks of the same kernel may have written. Graph
// mode: every such byte was written by an earlier launch, so kernels take
// `const SITS_RESTRICT` pointers and explicit `.nc` loads, the read-only
// (non-coherent) path. Persistent mode: a task reads what other blocks of
// the same launch wrote (activations, the workspace, the KV cache), which
// that path may serve stale, so pointers lose `__restrict__` (the compiler
// may no longer turn their loads into ld.global.nc) and the explicit loads
// drop `.nc` (the streaming ones too: they read the KV cache as well as
// weights). Only weight rows keep it there, through load16's __ldg.
#ifndef SITS_PERSISTENT_DECODE
#define SITS_RESTRICT __restrict__
#define SITS_LD_NC ".nc"
#else
#define SITS_RESTRICT
#define SITS_LD_NC ""
#endif

namespace sits {

#ifndef SITS_PERSISTENT_DECODE

// Each built-in is read member by member: copying the whole of one reads
// all three registers where the copy stands, which moves the reads and
// lets the compiler order the arithmetic differently (the PTX changes).

/// The coordinates of this tile in its launch's grid (`blockIdx`).
__device__ __forceinline__ uint3 tileIndex() {
  return {blockIdx.x, blockIdx.y, blockIdx.z};
}

/// The threads of one tile, per dimension (`blockDim`).
__device__ __forceinline__ dim3 tileDim() {
  return {blockDim.x, blockDim.y, blockDim.z};
}

/// The tiles of this tile's launch, per dimension (`gridDim`).
__device__ __forceinline__ dim3 tileGridDim() {
  return {gridDim.x, gridDim.y, gridDim.z};
}

/// Waits until every thread of this tile has arrived, and makes their
/// shared and global memory writes visible to each other (`__syncthreads`).
__device__ __forceinline__ void syncTile() { __syncthreads(); }

#else // SITS_PERSISTENT_DECODE

struct PersistentTask;

/// The tile a block of the persistent kernel runs: what its launch's block
/// would have had; its first `threads` threads run it. Plain words, as a
/// __shared__ variable takes no constructor (dim3 has one). The rest is
/// what waitForPrecedingKernels needs to wait for the tile's dependencies
/// (persistent.cuh).
struct RunningTile {
  unsigned index[3];
  unsigned size[3];
  unsigned grid[3];
  unsigned threads;
  unsigned task, tile; ///< the task's id and the tile's index in it
  unsigned epoch;      ///< the step's, as the block read it
  const PersistentTask *tasks;
  const unsigned *deps, *depsEnd; ///< the task's dependencies
  unsigned *sync;                 ///< the bucket's counters
  unsigned long long *trace;      ///< the tile's record, or null
  unsigned long long *nextTrace;  ///< the block's next record, or null
};

/// One per block. (In the emulator the block's own bytes: blocks switch
/// while a tile waits for its dependencies, after the tile was set.)
#ifdef SITS_EMULATE
#define sitsRunningTile (::sits_emu::blockShared<::sits::RunningTile>())
#else
__shared__ RunningTile sitsRunningTile;
#endif

__device__ __forceinline__ uint3 tileIndex() {
  const RunningTile &tile = sitsRunningTile;
  return {tile.index[0], tile.index[1], tile.index[2]};
}
__device__ __forceinline__ dim3 tileDim() {
  const RunningTile &tile = sitsRunningTile;
  return {tile.size[0], tile.size[1], tile.size[2]};
}
__device__ __forceinline__ dim3 tileGridDim() {
  const RunningTile &tile = sitsRunningTile;
  return {tile.grid[0], tile.grid[1], tile.grid[2]};
}

/// A barrier over the tile's threads (named barrier 1): the threads beyond
/// them skip the tile and wait at the block's barrier (0) instead.
__device__ __forceinline__ void syncTile() {
#ifdef SITS_EMULATE
  sits_emu::namedBarrier(1, sitsRunningTile.threads);
#else
  asm volatile("bar.sync 1, %0;" ::"r"(sitsRunningTile.threads) : "memory");
#endif
}

/// The persistent kernel's own block (persistent.cuh), and the barrier of
/// all its threads.
__device__ __forceinline__ unsigned persistentBlockIndex() {
  return blockIdx.x;
}
__device__ __forceinline__ void syncPersistentBlock() { __syncthreads(); }

/// Waits until every tile of the running tile's dependencies has finished
/// (persistent.cuh, which common.cuh includes in persistent mode).
__device__ void waitForTileDependencies();

#endif // SITS_PERSISTENT_DECODE

//===----------------------------------------------------------------------===//
// Programmatic dependent launch (sm_90 and newer)
//===----------------------------------------------------------------------===//
//
// The runtime may launch an engine's kernels so that each can start while
// the one before it is still running (docs/runtime.md). Every entry point
// therefore lets the next kernel launch early and waits for the previous
// one to finish, with its memory visible, before it reads or writes any
// buffer another kernel touches; only constant weights may be read before.
// Every kernel waits unconditionally, so that finishing a kernel implies
// that all kernels before it have finished. Without the launch attribute,
// or before sm_90, both are no-ops. In the persistent kernel the wait is
// for the tile's dependencies (the tasks that write what it reads, or read
// what it writes), so that a tile starts its weight copies before them as a
// kernel does before its predecessors; every thread of the tile calls it
// once.

/// Lets the next kernel of the stream start launching its blocks.
__device__ __forceinline__ void allowDependentLaunch() {
#if !defined(SITS_EMULATE) && !defined(SITS_PERSISTENT_DECODE) &&              \
    defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the previous kernel of the stream has finished and its
/// writes are visible.
__device__ __forceinline__ void waitForPrecedingKernels() {
#if defined(SITS_PERSISTENT_DECODE)
  waitForTileDependencies();
#elif !defined(SITS_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

} // namespace sits

#endif // SITS_KERNELS_TILE_CUH
