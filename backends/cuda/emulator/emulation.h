//===- emulation.h - Runs the generated CUDA kernels on the CPU -*- C++ -*-===//
//
// Force-included (g++ -include) when sits-emulate compiles the generated
// CUDA source as host C++ with -DSITS_EMULATE. It provides the CUDA
// built-ins the kernel library uses and runs every thread of a block as a
// fiber: __syncthreads and the warp shuffles switch fibers, so block and
// warp synchronization behave as on the GPU, and a kernel that would hang
// or read a lane that has exited is reported instead.
//
// Checks a GPU would not make: 16-byte loads must be 16-byte aligned;
// dynamic shared memory starts as NaN; threads of a block that wait at
// different barriers are an error.
//
// A launch's blocks run one after another, except the persistent decode
// kernel's (sits_emu_launch_resident): all its blocks are resident, and a
// block runs until each of its threads waits, for a barrier or for another
// block (spinWait); a wait no block can end is reported.
//
// Header-only: it is compiled once, into the kernels' shared object, which
// exports sits_emu_launch (and sits_emu_launch_resident).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CODEGEN_EMULATION_H
#define SITS_CODEGEN_EMULATION_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

//===----------------------------------------------------------------------===//
// CUDA keywords and types
//===----------------------------------------------------------------------===//

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
/// blockIdx's type, as on the GPU (tile.cuh's tileIndex returns one).
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}

namespace sits_emu {

//===----------------------------------------------------------------------===//
// Fibers
//===----------------------------------------------------------------------===//

enum class FiberState {
  Runnable,
  AtBlockBarrier,
  AtNamedBarrier, ///< bar.sync id, count (Fiber::barrier)
  AtWarpBarrier,
  Spinning, ///< polls memory another block is to write (spinWait)
  Done
};

struct Fiber {
#if defined(__x86_64__)
  void *stackPointer = nullptr;
#else
  ucontext_t context;
#endif
  char *stack = nullptr;
  dim3 threadIndex;
  unsigned linear = 0;
  unsigned barrier = 0; ///< the named barrier it waits at
  FiberState state = FiberState::Runnable;
};

/// A named barrier's threads, as the first to arrive gave them.
constexpr unsigned kNamedBarriers = 16;

struct Launch {
  void (*kernel)(void **) = nullptr;
  void **args = nullptr;
  dim3 gridSize, blockSize;
  uint3 blockIndex;
  std::vector<Fiber> fibers;
  std::vector<uint64_t> warpSlots; ///< one per thread, for shuffles
  std::vector<uint32_t> mmaSlots;  ///< six per thread, for mma operands
  std::vector<float> mmaSums;      ///< four per thread, mma accumulators
  std::vector<char> mmaDone;       ///< per warp: this mma's sums are made
  std::vector<char> dynamicShared;
  /// Bytes of blockShared<T>(): one block's own __shared__ state where
  /// blocks switch mid-tile (the persistent kernel's running tile).
  alignas(16) unsigned char blockBytes[128] = {};
  unsigned namedCounts[kNamedBarriers] = {};
  std::string waitsFor; ///< what its spinning thread waits for
  Fiber *current = nullptr;
#if defined(__x86_64__)
  void *schedulerStackPointer = nullptr;
#else
  ucontext_t scheduler;
#endif
  std::string error;
};

inline Launch *activeLaunch = nullptr;
/// Run the threads of a block from the last to the first between barriers,
/// so that a read of shared memory that is missing a barrier before it sees
/// stale data whichever thread writes (one order hides what the other shows).
inline bool reverseSchedule = false;
constexpr size_t kStackBytes = 256 * 1024;
/// Fibers' stacks lie this far apart: not a power of two, so that their
/// tops (touched at every switch) fall in different cache sets; 256 KiB
/// apart they all map to one set of L1 and L2 and every switch misses.
constexpr size_t kStackStride = kStackBytes + 4096 + 64;

inline Launch &launch() { return *activeLaunch; }
inline Fiber &current() { return *launch().current; }

/// A __shared__ variable of the running block's own. A plain `__shared__`
/// is a static shared by every block, right only while no other block runs
/// between its write and its reads: the persistent kernel's blocks switch
/// while a tile waits for its dependencies, after the tile was set.
/// The persistent kernel's clock (--persistent-trace): one tick a reading,
/// so that a trace of an emulated step orders its events as they ran.
inline unsigned long long nextTick() {
  static unsigned long long ticks = 0;
  return ++ticks;
}

template <class T> T &blockShared() {
  static_assert(sizeof(T) <= sizeof(Launch::blockBytes) && alignof(T) <= 16,
                "Launch::blockBytes holds it");
  return *reinterpret_cast<T *>(launch().blockBytes);
}

#if defined(__x86_64__)
// Saves the callee-saved registers and the stack pointer of the running
// context in *save, and resumes the context whose stack pointer is `next`.
// The SSE and x87 control words are not switched: nothing in the emulated
// kernels changes them, and loading them costs more than the rest of a
// switch (fibers are switched at every warp barrier).
extern "C" void sits_emu_switch(void **save, void *next);
asm(R"(
  .text
  .p2align 4
  .globl sits_emu_switch
  .hidden sits_emu_switch
  .type sits_emu_switch,@function
sits_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sits_emu_switch, .-sits_emu_switch
)");
#endif

/// Runs the kernel in the current fiber, then returns to the scheduler.
[[noreturn]] inline void fiberMain() {
  Launch &l = launch();
  l.kernel(l.args);
  l.current->state = FiberState::Done;
#if defined(__x86_64__)
  void *unused;
  sits_emu::sits_emu_switch(&unused, l.schedulerStackPointer);
#else
  setcontext(&l.scheduler);
#endif
  std::abort();
}

inline void startFiber(Fiber &fiber) {
#if defined(__x86_64__)
  // The stack as sits_emu_switch leaves it: six registers, then the return
  // address (fiberMain), 16-byte aligned as at a call.
  uintptr_t top =
      reinterpret_cast<uintptr_t>(fiber.stack + kStackBytes) & ~uintptr_t(15);
  uint64_t *slot = reinterpret_cast<uint64_t *>(top - 16);
  slot[0] = reinterpret_cast<uint64_t>(&fiberMain);
  slot[1] = 0;
  uint64_t *registers = slot - 6;
  for (int i = 0; i < 6; ++i)
    registers[i] = 0;
  fiber.stackPointer = registers;
#else
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack;
  fiber.context.uc_stack.ss_size = kStackBytes;
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, reinterpret_cast<void (*)()>(&fiberMain), 0);
#endif
}

inline void resume(Fiber &fiber) {
  Launch &l = launch();
  l.current = &fiber;
#if defined(__x86_64__)
  sits_emu_switch(&l.schedulerStackPointer, fiber.stackPointer);
#else
  swapcontext(&l.scheduler, &fiber.context);
#endif
  l.current = nullptr;
}

/// Parks the running fiber in `state` and returns to the scheduler.
inline void yield(FiberState state) {
  Launch &l = launch();
  Fiber &fiber = *l.current;
  fiber.state = state;
#if defined(__x86_64__)
  sits_emu_switch(&fiber.stackPointer, l.schedulerStackPointer);
#else
  swapcontext(&fiber.context, &l.scheduler);
#endif
}

inline void fail(const std::string &message) {
  Launch &l = launch();
  if (l.error.empty())
    l.error = message;
}

enum class BlockStep { Done, Progressed, Stalled, Failed };

/// Runs every runnable fiber of a block until it waits or ends, then
/// releases the barriers whose threads have all arrived. Stalled: nothing
/// ran but threads polling for other blocks, and nothing was released.
inline BlockStep stepBlock(Launch &l) {
  activeLaunch = &l;
  const unsigned threads = static_cast<unsigned>(l.fibers.size());
  bool ran = false;
  for (unsigned i = 0; i < threads; ++i) {
    Fiber &fiber = l.fibers[reverseSchedule ? threads - 1 - i : i];
    if (fiber.state == FiberState::Runnable) {
      resume(fiber);
      ran |= fiber.state != FiberState::Spinning;
    }
  }
  if (!l.error.empty())
    return BlockStep::Failed;
  unsigned done = 0, atBlock = 0, atNamed[kNamedBarriers] = {};
  for (const Fiber &fiber : l.fibers) {
    done += fiber.state == FiberState::Done;
    atBlock += fiber.state == FiberState::AtBlockBarrier;
    if (fiber.state == FiberState::AtNamedBarrier)
      ++atNamed[fiber.barrier];
  }
  if (done == threads)
    return BlockStep::Done;
  bool released = false;
  auto release = [&](FiberState state, unsigned barrier) {
    for (Fiber &fiber : l.fibers)
      if (fiber.state == state && fiber.barrier == barrier)
        fiber.state = FiberState::Runnable;
    released = true;
  };
  if (atBlock > 0 && atBlock + done == threads)
    release(FiberState::AtBlockBarrier, 0);
  for (unsigned id = 0; id < kNamedBarriers; ++id) {
    if (atNamed[id] == 0 || atNamed[id] < l.namedCounts[id])
      continue;
    if (atNamed[id] > l.namedCounts[id]) {
      l.error = "more threads than its count wait at named barrier " +
                std::to_string(id);
      return BlockStep::Failed;
    }
    l.namedCounts[id] = 0;
    release(FiberState::AtNamedBarrier, id);
  }
  for (unsigned w = 0; w * 32 < threads; ++w) {
    unsigned end = std::min(threads, (w + 1) * 32), waiting = 0, live = 0;
    for (unsigned t = w * 32; t < end; ++t) {
      live += l.fibers[t].state != FiberState::Done;
      waiting += l.fibers[t].state == FiberState::AtWarpBarrier;
    }
    if (waiting > 0 && waiting == live) {
      for (unsigned t = w * 32; t < end; ++t)
        if (l.fibers[t].state == FiberState::AtWarpBarrier)
          l.fibers[t].state = FiberState::Runnable;
      released = true;
    }
  }
  return released || ran ? BlockStep::Progressed : BlockStep::Stalled;
}

inline std::string describeBlock(const Launch &l) {
  return "block (" + std::to_string(l.blockIndex.x) + ", " +
         std::to_string(l.blockIndex.y) + ", " +
         std::to_string(l.blockIndex.z) + ")";
}

/// Why a stalled block cannot go on by itself.
inline std::string describeStall(const Launch &l) {
  if (!l.waitsFor.empty())
    return describeBlock(l) + ": " + l.waitsFor;
  return "deadlock in " + describeBlock(l) +
         ": threads wait at different barriers (__syncthreads, a named "
         "barrier or a warp shuffle in divergent code)";
}

inline void startBlock(Launch &l) {
  for (Fiber &fiber : l.fibers) {
    fiber.state = FiberState::Runnable;
    startFiber(fiber);
  }
}

/// Runs one block to its end (the blocks of a launch run one after another).
inline bool runBlock(Launch &l) {
  startBlock(l);
  while (true) {
    switch (stepBlock(l)) {
    case BlockStep::Done:
      return true;
    case BlockStep::Failed:
      return false;
    case BlockStep::Stalled:
      l.error = describeStall(l);
      return false;
    case BlockStep::Progressed:
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Built-ins
//===----------------------------------------------------------------------===//

inline void syncthreads() {
  current().barrier = 0;
  yield(FiberState::AtBlockBarrier);
}
inline void syncwarp() { yield(FiberState::AtWarpBarrier); }

/// bar.sync id, count: the first `count` threads to arrive pass together.
inline void namedBarrier(unsigned id, unsigned count) {
  Launch &l = launch();
  if (id == 0 || id >= kNamedBarriers || count == 0 || count % 32 != 0 ||
      count > l.fibers.size())
    fail("named barrier " + std::to_string(id) + " with " +
         std::to_string(count) +
         " threads: ids are 1 to 15, counts whole "
         "warps of the block");
  else if (l.namedCounts[id] != 0 && l.namedCounts[id] != count)
    fail("threads wait at named barrier " + std::to_string(id) +
         " with different counts");
  l.namedCounts[id] = count;
  current().barrier = id;
  yield(FiberState::AtNamedBarrier);
}

/// One poll of a wait for another block (persistent.cuh): lets the other
/// blocks run. Tile `tile` of task `task` waits for task `dep`, of which
/// `finished` of `tiles` tiles have finished.
inline void spinWait(unsigned task, unsigned tile, unsigned dep,
                     unsigned finished, unsigned tiles) {
  launch().waitsFor = "tile " + std::to_string(tile) + " of task " +
                      std::to_string(task) + " waits for task " +
                      std::to_string(dep) + " (" + std::to_string(finished) +
                      " of its " + std::to_string(tiles) + " tiles finished)";
  yield(FiberState::Spinning);
  launch().waitsFor.clear();
}

template <class T> T shuffle(unsigned mask, T value, int sourceLane) {
  static_assert(sizeof(T) <= 8, "shuffles move 4 or 8 bytes");
  Launch &l = launch();
  Fiber &self = current();
  if (mask != 0xffffffffu)
    fail("the emulator only runs full-warp shuffles");
  unsigned warpBase = self.linear / 32 * 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  l.warpSlots[self.linear] = bits;
  syncwarp();
  unsigned source = warpBase + (static_cast<unsigned>(sourceLane) & 31u);
  if (source >= l.fibers.size() || l.fibers[source].state == FiberState::Done)
    fail("a warp shuffle reads lane " + std::to_string(sourceLane & 31) +
         " of warp " + std::to_string(warpBase / 32) +
         ", which has exited or does not exist");
  bits = source < l.warpSlots.size() ? l.warpSlots[source] : 0;
  syncwarp(); // nobody overwrites a slot before every lane has read it
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

inline float halfToFloat(uint16_t bits);

/// Every half's float, for the operands of mma.sync (made on first use).
inline const float *halfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> values(65536);
    for (uint32_t bits = 0; bits < 65536; ++bits)
      values[bits] = halfToFloat(static_cast<uint16_t>(bits));
    return values;
  }();
  return table.data();
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: every lane publishes its
/// operand registers and accumulators; the first lane to run after the
/// barrier decodes the warp's A (16 x 16) and B (16 x 8) once and computes
/// all 128 accumulators (a lane computing only its own four would decode
/// every operand 32 times: most of an emulated run's time), then every lane
/// takes its four. The fragment layout is the PTX ISA's (see mma16816 in
/// kernels/common.cuh). Products of two halves are exact in f32; each sum
/// starts from the accumulator and runs over k in order.
inline void mma16816(bool bf16, float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                     uint32_t a3, uint32_t b0, uint32_t b1) {
  Launch &l = launch();
  Fiber &self = current();
  const unsigned lane = self.linear % 32, base = self.linear - lane,
                 warp = self.linear / 32;
  uint32_t *mine = &l.mmaSlots[6 * self.linear];
  mine[0] = a0;
  mine[1] = a1;
  mine[2] = a2;
  mine[3] = a3;
  mine[4] = b0;
  mine[5] = b1;
  float *sums = &l.mmaSums[4 * self.linear];
  for (unsigned i = 0; i < 4; ++i)
    sums[i] = c[i];
  syncwarp();
  if (!l.mmaDone[warp]) {
    for (unsigned other = base; other < base + 32; ++other)
      if (other >= l.fibers.size() || l.fibers[other].state == FiberState::Done)
        fail("mma.sync with lane " + std::to_string(other - base) +
             " of warp " + std::to_string(warp) +
             " exited or missing: every lane must take part");
    auto element = [&](unsigned owner, unsigned reg, unsigned k) {
      uint32_t word = l.mmaSlots[6 * (base + owner) + reg];
      uint16_t bits =
          static_cast<uint16_t>(k % 2 ? word >> 16 : word & 0xffffu);
      if (!bf16)
        return halfTable()[bits];
      uint32_t wide = static_cast<uint32_t>(bits) << 16;
      float value;
      std::memcpy(&value, &wide, 4);
      return value;
    };
    // A[row][k] sits in lane (row % 8) * 4 + (k % 8) / 2, register
    // (row >= 8) + 2 * (k >= 8); B[k][n] in lane n * 4 + (k % 8) / 2,
    // register 4 + (k >= 8); the even k in the low half.
    float a[16][16], b[16][8];
    for (unsigned k = 0; k < 16; ++k) {
      for (unsigned row = 0; row < 16; ++row)
        a[row][k] = element((row % 8) * 4 + (k % 8) / 2,
                            (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0), k);
      for (unsigned col = 0; col < 8; ++col)
        b[k][col] = element(col * 4 + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0), k);
    }
    // C[row][col] is accumulator (row >= 8) * 2 + col % 2 of lane
    // (row % 8) * 4 + col / 2. A row's eight sums advance together (the
    // compiler vectorizes over columns; each sum still runs over k in order).
    for (unsigned row = 0; row < 16; ++row) {
      float sum[8];
      for (unsigned col = 0; col < 8; ++col)
        sum[col] = l.mmaSums[4 * (base + (row % 8) * 4 + col / 2) +
                             (row >= 8 ? 2 : 0) + col % 2];
      for (unsigned k = 0; k < 16; ++k)
        for (unsigned col = 0; col < 8; ++col)
          sum[col] += a[row][k] * b[k][col];
      for (unsigned col = 0; col < 8; ++col)
        l.mmaSums[4 * (base + (row % 8) * 4 + col / 2) + (row >= 8 ? 2 : 0) +
                  col % 2] = sum[col];
    }
    l.mmaDone[warp] = 1;
  }
  for (unsigned i = 0; i < 4; ++i)
    c[i] = sums[i];
  // Nobody overwrites its operands before every lane has read its sums;
  // every lane clears the flag (the first to reach the next mma.sync waits
  // at its barrier for the last to clear it).
  syncwarp();
  l.mmaDone[warp] = 0;
}

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16 (see loadMatrix4 in
/// kernels/common.cuh): lanes publish their row addresses, then each reads
/// its words of the four matrices.
inline void ldmatrix4(const void *row, uint32_t *r, bool transposed = false) {
  Launch &l = launch();
  Fiber &self = current();
  const unsigned lane = self.linear % 32, base = self.linear - lane;
  uint64_t address = reinterpret_cast<uintptr_t>(row);
  if (address % 16 != 0)
    fail("ldmatrix row address not 16-byte aligned");
  l.warpSlots[self.linear] = address;
  syncwarp();
  uint32_t out[4];
  auto rowOf = [&](unsigned matrix, unsigned rowIndex) {
    const unsigned owner = base + matrix * 8 + rowIndex;
    if (owner >= l.fibers.size() || l.fibers[owner].state == FiberState::Done)
      fail("ldmatrix with an exited lane");
    return reinterpret_cast<const char *>(
        static_cast<uintptr_t>(l.warpSlots[owner]));
  };
  for (unsigned j = 0; j < 4; ++j) {
    if (!transposed) {
      std::memcpy(&out[j], rowOf(j, lane / 4) + (lane % 4) * 4, 4);
    } else {
      uint16_t lo, hi;
      std::memcpy(&lo, rowOf(j, 2 * (lane % 4)) + (lane / 4) * 2, 2);
      std::memcpy(&hi, rowOf(j, 2 * (lane % 4) + 1) + (lane / 4) * 2, 2);
      out[j] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
  syncwarp();
  for (unsigned j = 0; j < 4; ++j)
    r[j] = out[j];
}

template <class T> T arg(void *slot) {
  T value;
  std::memcpy(&value, slot, sizeof(T));
  return value;
}

inline void *dynamicShared() { return launch().dynamicShared.data(); }

inline float halfToFloat(uint16_t bits) {
  uint32_t sign = (bits & 0x8000u) << 16, exponent = (bits >> 10) & 0x1f,
           mantissa = bits & 0x3ffu, out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {
      int shift = 0;
      while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        ++shift;
      }
      out = sign | ((113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, 4);
  return value;
}

inline uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) // rounds to 65520 or more: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { // subnormal half (or zero)
    float scaled;
    float absolute;
    std::memcpy(&absolute, &magnitude, 4);
    scaled = absolute * 16777216.0f; // 2^24: units of the smallest subnormal
    uint32_t units = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | units);
  }
  uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t exponent = (magnitude >> 23) - 112;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

} // namespace sits_emu

#define threadIdx (::sits_emu::current().threadIndex)
#define blockIdx (::sits_emu::launch().blockIndex)
#define blockDim (::sits_emu::launch().blockSize)
#define gridDim (::sits_emu::launch().gridSize)

inline void __syncthreads() { sits_emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { sits_emu::syncwarp(); }
template <class T> T __shfl_sync(unsigned mask, T value, int lane, int = 32) {
  return sits_emu::shuffle(mask, value, lane);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int = 32) {
  return sits_emu::shuffle(mask, value,
                           static_cast<int>(sits_emu::current().linear % 32) ^
                               laneMask);
}
/// Whether `predicate` holds in every lane of the (whole) warp.
inline bool __all_sync(unsigned mask, bool predicate) {
  bool all = true;
  for (int lane = 0; lane < 32; ++lane)
    all = sits_emu::shuffle(mask, predicate ? 1 : 0, lane) && all;
  return all;
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int = 32) {
  unsigned lane = sits_emu::current().linear % 32;
  T shifted = sits_emu::shuffle(mask, value,
                                static_cast<int>(std::min(31u, lane + delta)));
  return lane + delta < 32 ? shifted : value;
}

template <class T> T __ldg(const T *pointer) {
  if (reinterpret_cast<uintptr_t>(pointer) % alignof(T) != 0) {
    std::fprintf(stderr, "sits-emulate: %zu-byte load at misaligned %p\n",
                 alignof(T), static_cast<const void *>(pointer));
    std::abort();
  }
  return *pointer;
}

#define SITS_DYNAMIC_SHARED(type, name)                                        \
  type *name = reinterpret_cast<type *>(::sits_emu::dynamicShared())
// A misaligned vector access faults on the GPU: stop at once.
#define SITS_ASSERT_ALIGNED(pointer, bytes)                                    \
  do {                                                                         \
    if (reinterpret_cast<uintptr_t>(pointer) % (bytes) != 0) {                 \
      std::fprintf(stderr,                                                     \
                   "sits-emulate: %d-byte access at misaligned %p "            \
                   "(%s:%d)\n",                                                \
                   (bytes), static_cast<const void *>(pointer), __FILE__,      \
                   __LINE__);                                                  \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

inline float __uint_as_float(unsigned bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
inline float __int_as_float(int bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
inline unsigned __float_as_uint(float value) {
  unsigned bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
inline float __fmul_rn(float a, float b) { return a * b; }
// Threads are fibers, switched only where they wait: a fence orders nothing
// that is not ordered already, and an atomic is a plain update.
inline void __threadfence() {}
template <class T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}
template <class T> T atomicExch(T *address, T value) {
  T old = *address;
  *address = value;
  return old;
}
template <class T> T atomicMax(T *address, T value) {
  T old = *address;
  *address = old > value ? old : value;
  return old;
}
template <class T> T __ldcg(const T *pointer) { return *pointer; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }

// The entry points sits-emulate calls.
#include "emulation_launch.h"

#endif // SITS_CODEGEN_EMULATION_H
