//===- emulation_launch.h - The emulator's launches -------------*- C++ -*-===//
//
// The entry points of the kernels' shared object (part of emulation.h,
// which includes it last): a launch whose blocks run one after another, and
// the persistent decode kernel's, whose blocks are all resident at once.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CODEGEN_EMULATION_LAUNCH_H
#define SITS_CODEGEN_EMULATION_LAUNCH_H

/// Sets the order threads run in between barriers (0: first to last).
extern "C" __attribute__((visibility("default"))) void
sits_emu_set_reverse_schedule(int reverse) {
  sits_emu::reverseSchedule = reverse != 0;
}

namespace sits_emu {

/// `count` fiber stacks, kept between launches (never touched until used).
inline char *fiberStacks(size_t count) {
  static std::unique_ptr<char[]> stacks;
  static size_t stackCount = 0;
  if (stackCount < count) {
    stacks.reset(new char[count * kStackStride]);
    stackCount = count;
  }
  return stacks.get();
}

/// A block of `kernel`'s launch, its threads' stacks from `stacks`.
inline void setUpBlock(Launch &l, void (*kernel)(void **), void **args,
                       const unsigned grid[3], const unsigned block[3],
                       char *stacks) {
  l.kernel = kernel;
  l.args = args;
  l.gridSize = {grid[0], grid[1], grid[2]};
  l.blockSize = {block[0], block[1], block[2]};
  const unsigned threads = block[0] * block[1] * block[2];
  l.fibers.resize(threads);
  l.warpSlots.assign(threads, 0);
  l.mmaSlots.assign(static_cast<size_t>(threads) * 6, 0);
  l.mmaSums.assign(static_cast<size_t>(threads) * 4, 0.0f);
  l.mmaDone.assign((threads + 31) / 32, 0);
  for (unsigned t = 0; t < threads; ++t) {
    Fiber &fiber = l.fibers[t];
    fiber.stack = stacks + static_cast<size_t>(t) * kStackStride;
    fiber.linear = t;
    fiber.threadIndex = {t % block[0], t / block[0] % block[1],
                         t / (block[0] * block[1])};
  }
}

inline int report(const std::string &message, char *error,
                  unsigned errorBytes) {
  activeLaunch = nullptr;
  if (message.empty())
    return 0;
  std::snprintf(error, errorBytes, "%s", message.c_str());
  return 1;
}

/// Whether the tasks sits-emulate gives a persistent decode kernel are the
/// ones its table has (the engine's decode launches, by kernel), on as many
/// blocks as the emulated GPU has multiprocessors (one resident on each).
inline bool checkTasks(unsigned taskCount, const char *const *taskKernels,
                       unsigned blocks, unsigned count,
                       const char *const *kernels, unsigned multiprocessors,
                       char *error, unsigned errorBytes) {
  std::string message;
  if (blocks > multiprocessors)
    message = "the persistent kernel's " + std::to_string(blocks) +
              " blocks cannot all be resident on " +
              std::to_string(multiprocessors) +
              " multiprocessors (one block each): give --multiprocessors " +
              std::to_string(blocks);
  else if (blocks < multiprocessors)
    message = "the persistent kernel was planned for " +
              std::to_string(blocks) + " multiprocessors, not " +
              std::to_string(multiprocessors) +
              " (the launches' grids depend on them): give --multiprocessors " +
              std::to_string(blocks);
  else if (count != taskCount)
    message = "the engine's decode step has " + std::to_string(count) +
              " launches, the persistent kernel " + std::to_string(taskCount) +
              " tasks";
  for (unsigned t = 0; message.empty() && t < count; ++t)
    if (std::strcmp(kernels[t], taskKernels[t]) != 0)
      message = "decode launch " + std::to_string(t) + " runs " + kernels[t] +
                ", but task " + std::to_string(t) +
                " of the persistent "
                "kernel runs " +
                taskKernels[t];
  if (message.empty())
    return true;
  std::snprintf(error, errorBytes, "%s", message.c_str());
  return false;
}

} // namespace sits_emu

/// Runs `kernel` (a generated __emulate wrapper) over the grid. Returns 0,
/// or 1 with the reason in `error` (NUL-terminated, `errorBytes` long).
extern "C" __attribute__((visibility("default"))) int
sits_emu_launch(void (*kernel)(void **), const unsigned grid[3],
                const unsigned block[3], unsigned sharedBytes, void **args,
                char *error, unsigned errorBytes) {
  sits_emu::Launch l;
  const unsigned threads = block[0] * block[1] * block[2];
  sits_emu::setUpBlock(l, kernel, args, grid, block,
                       sits_emu::fiberStacks(threads));
  bool ok = true;
  for (unsigned z = 0; ok && z < grid[2]; ++z)
    for (unsigned y = 0; ok && y < grid[1]; ++y)
      for (unsigned x = 0; ok && x < grid[0]; ++x) {
        l.blockIndex = {x, y, z};
        // Uninitialized shared memory reads as NaN, not as zeros.
        l.dynamicShared.assign(sharedBytes, static_cast<char>(0xff));
        ok = sits_emu::runBlock(l);
      }
  return sits_emu::report(l.error, error, errorBytes);
}

/// Runs `kernel` on `blocks` blocks of `threads` threads all resident at
/// once, as the persistent decode kernel needs: each block runs until it
/// stalls (its threads wait at barriers or for other blocks), then the
/// next; a round in which no block gets on is a deadlock, reported with
/// what each block waits for.
extern "C" __attribute__((visibility("default"))) int
sits_emu_launch_resident(void (*kernel)(void **), unsigned blocks,
                         unsigned threads, unsigned sharedBytes, void **args,
                         char *error, unsigned errorBytes) {
  using sits_emu::BlockStep;
  const unsigned grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
  char *stacks = sits_emu::fiberStacks(size_t(blocks) * threads);
  std::vector<sits_emu::Launch> all(blocks);
  std::vector<char> done(blocks, 0);
  for (unsigned b = 0; b < blocks; ++b) {
    sits_emu::Launch &l = all[b];
    sits_emu::setUpBlock(l, kernel, args, grid, block,
                         stacks + size_t(b) * threads * sits_emu::kStackStride);
    l.blockIndex = {b, 0, 0};
    l.dynamicShared.assign(sharedBytes, static_cast<char>(0xff));
    sits_emu::activeLaunch = &l;
    sits_emu::startBlock(l);
  }
  for (unsigned left = blocks; left > 0;) {
    bool progressed = false;
    for (unsigned b = 0; b < blocks; ++b) {
      if (done[b])
        continue;
      sits_emu::Launch &l = all[b];
      for (sits_emu::Fiber &fiber : l.fibers) // poll once more
        if (fiber.state == sits_emu::FiberState::Spinning)
          fiber.state = sits_emu::FiberState::Runnable;
      BlockStep step;
      while ((step = sits_emu::stepBlock(l)) == BlockStep::Progressed)
        progressed = true;
      if (step == BlockStep::Failed)
        return sits_emu::report(l.error, error, errorBytes);
      if (step == BlockStep::Done) {
        done[b] = 1;
        --left;
        progressed = true;
      }
    }
    if (left > 0 && !progressed) {
      std::string message = "persistent kernel: no block can go on:";
      for (unsigned b = 0; b < blocks; ++b)
        if (!done[b])
          message += "\n  " + sits_emu::describeStall(all[b]);
      return sits_emu::report(message, error, errorBytes);
    }
  }
  return sits_emu::report("", error, errorBytes);
}

#endif // SITS_CODEGEN_EMULATION_LAUNCH_H
