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
// Today every kernel is its own launch: each accessor is exactly the CUDA
// built-in (inlined, so the generated code is the same).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_TILE_CUH
#define SITS_KERNELS_TILE_CUH

namespace sits {

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
// or before sm_90, both are no-ops. A persistent kernel is to make them
// no-ops too: its tiles wait for their dependencies instead.

/// Lets the next kernel of the stream start launching its blocks.
__device__ __forceinline__ void allowDependentLaunch() {
#if !defined(SITS_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the previous kernel of the stream has finished and its
/// writes are visible.
__device__ __forceinline__ void waitForPrecedingKernels() {
#if !defined(SITS_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

} // namespace sits

#endif // SITS_KERNELS_TILE_CUH
