//===- persistent_tests.cpp - The persistent kernel's walk on the CPU -----===//
//
// Compiled as host C++ with the emulator and SITS_PERSISTENT_DECODE (tile.cuh's
// persistent mode) by emulate-persistent-walk.test: a hand-made task graph
// run by sits::PersistentBlock as a generated persistent kernel runs its
// own, on 1 to 8 resident blocks, three steps on the same counters (the
// epoch), threads run first to last and last to first. Its tasks check
// what a tile sees: its coordinates in a 2-D grid, blocks of fewer threads
// than the persistent kernel's (the rest skip it), a barrier over the
// tile's threads only, and the writes of the tasks it depends on. Then a
// task that waits for a later one: the emulator reports the wait.
//
//===----------------------------------------------------------------------===//

#include "sits/persistent.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sits::syncTile;
using sits::tileDim;
using sits::tileGridDim;
using sits::tileIndex;

constexpr unsigned kThreads = 128, kValues = 64, kFillTiles = 5;

struct Buffers {
  int values[kFillTiles * kValues];
  int sums[kFillTiles];
  int coords[6];
  int total;
};

/// Task 0: values[i] = i + step, in tiles of 64 threads.
__device__ void fill(Buffers *b, int step) {
  const unsigned i = tileIndex().x * tileDim().x + threadIdx.x;
  b->values[i] = static_cast<int>(i) + step;
}

/// Task 1: a 2 x 3 grid of 32 threads writes each tile's coordinates.
__device__ void coordinates(Buffers *b) {
  if (threadIdx.x == 0)
    b->coords[tileIndex().y * tileGridDim().x + tileIndex().x] =
        static_cast<int>(tileIndex().x * 10 + tileIndex().y +
                         100 * tileGridDim().y);
}

/// Task 2: each tile of 128 threads sums a tile of values (threads past
/// 64 add zero), through shared memory and the tile's barrier.
__device__ void sum(Buffers *b) {
  __shared__ int partial[kThreads];
  const unsigned t = threadIdx.x, tile = tileIndex().x;
  partial[t] = t < kValues ? b->values[tile * kValues + t] : 0;
  syncTile();
  for (unsigned half = tileDim().x / 2; half > 0; half /= 2) {
    if (t < half)
      partial[t] += partial[t + half];
    syncTile();
  }
  if (t == 0)
    b->sums[tile] = partial[0];
}

/// Task 3: the sums and the coordinates, by one warp.
__device__ void total(Buffers *b) {
  if (threadIdx.x != 0)
    return;
  int all = 0;
  for (unsigned i = 0; i < kFillTiles; ++i)
    all += b->sums[i];
  for (int c : b->coords)
    all += c;
  b->total = all;
}

sits::PersistentTask gTasks[4];
unsigned gDeps[3];
unsigned gBlocks = 1;
unsigned gSync[sits::kPersistentSyncHeader + 4];
// The trace (sitsc --persistent-trace): each block's records, as many as
// the tiles one block runs on one block.
constexpr unsigned kTraceSlots = 2 * kFillTiles + 6 + 1;
unsigned long long gTrace[8 * kTraceSlots * sits::kPersistentTraceWords];

void kernel(Buffers *b, int step) {
  sits::PersistentBlock block(gTasks, gDeps, gSync, gBlocks, gTrace,
                              kTraceSlots);
  for (unsigned t = 0; t < 4; ++t) {
    const sits::PersistentTask &task = gTasks[t];
    for (unsigned tile = block.firstTile(task); tile < task.tiles;
         tile += gBlocks) {
      block.enterTile(task, t, tile);
      if (threadIdx.x < task.threads) {
        // As the generated task cases: the tile waits for its dependencies
        // here, after enterTile (other blocks run meanwhile).
        sits::waitForPrecedingKernels();
        if (t == 0)
          fill(b, step);
        else if (t == 1)
          coordinates(b);
        else if (t == 2)
          sum(b);
        else
          total(b);
      }
      block.leaveTile(t);
    }
  }
  block.finish();
}

void entry(void **args) {
  kernel(sits_emu::arg<Buffers *>(args[0]), sits_emu::arg<int>(args[1]));
}

/// The graph: 0 and 1 free, 2 after 0, 3 after 1 and 2 (or, `wrong`, 0
/// after 3).
void plan(unsigned blocks, bool wrong) {
  const unsigned grids[4][2] = {
      {kFillTiles, 1}, {2, 3}, {kFillTiles, 1}, {1, 1}};
  const unsigned threads[4] = {kValues, 32, kThreads, 32};
  const unsigned firstDep[4] = {0, 0, 0, 1}, depCount[4] = {0, 0, 1, 2};
  gDeps[0] = 0;
  gDeps[1] = 1;
  gDeps[2] = 2;
  unsigned dealt = 0;
  for (unsigned t = 0; t < 4; ++t) {
    sits::PersistentTask &task = gTasks[t];
    task = {0,
            grids[t][0] * grids[t][1],
            dealt % blocks,
            {grids[t][0], grids[t][1], 1},
            threads[t],
            0,
            firstDep[t],
            depCount[t]};
    dealt += task.tiles;
  }
  if (wrong) { // task 0 waits for task 3, which waits for it
    gDeps[0] = 3;
    gTasks[0].depCount = 1;
  }
  gBlocks = blocks;
  for (unsigned &word : gSync)
    word = 0;
}

int expectedTotal(int step) {
  int all = 0;
  for (unsigned i = 0; i < kFillTiles * kValues; ++i)
    all += static_cast<int>(i) + step;
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 3; ++y)
      all += x * 10 + y + 300;
  return all;
}

/// The trace of a step: each tile once, in the block it was dealt to,
/// entered before it had its dependencies and left after; and no tile of a
/// task had its dependencies before every tile of each had been left (the
/// emulator's clock ticks once a reading, in the order the blocks ran).
std::string checkTrace(unsigned blocks) {
  std::vector<unsigned long long> firstReady(4, ~0ull), lastLeave(4, 0);
  std::vector<std::vector<int>> seen(4);
  for (unsigned t = 0; t < 4; ++t)
    seen[t].assign(gTasks[t].tiles, 0);
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned slot = 0; slot < kTraceSlots; ++slot) {
      const unsigned long long *r =
          &gTrace[(b * kTraceSlots + slot) * sits::kPersistentTraceWords];
      if (r[1] == 0)
        continue;
      const unsigned task = static_cast<unsigned>(r[0] >> 32);
      const unsigned tile = static_cast<unsigned>(r[0]);
      if (task >= 4 || tile >= gTasks[task].tiles)
        return "a record of task " + std::to_string(task) + " tile " +
               std::to_string(tile);
      if ((gTasks[task].firstBlock + tile) % blocks != b)
        return "task " + std::to_string(task) + " tile " +
               std::to_string(tile) + " recorded by block " +
               std::to_string(b);
      if (!(r[1] < r[2] && r[2] < r[3]))
        return "task " + std::to_string(task) + " tile " +
               std::to_string(tile) + " out of order";
      ++seen[task][tile];
      firstReady[task] = std::min(firstReady[task], r[2]);
      lastLeave[task] = std::max(lastLeave[task], r[3]);
    }
  for (unsigned t = 0; t < 4; ++t) {
    for (int count : seen[t])
      if (count != 1)
        return "task " + std::to_string(t) + " has a tile recorded " +
               std::to_string(count) + " times";
    for (unsigned d = 0; d < gTasks[t].depCount; ++d) {
      const unsigned dep = gDeps[gTasks[t].firstDep + d];
      if (firstReady[t] < lastLeave[dep])
        return "task " + std::to_string(t) + " started before task " +
               std::to_string(dep) + " ended";
    }
  }
  return "";
}

int failures = 0;

void run(unsigned blocks, int step, bool expectError,
         const std::string &label) {
  Buffers b;
  std::memset(&b, 0xff, sizeof(b));
  std::memset(gTrace, 0, sizeof(gTrace));
  Buffers *pointer = &b;
  void *args[] = {&pointer, &step};
  char error[1024] = {0};
  int status = sits_emu_launch_resident(entry, blocks, kThreads, 0, args, error,
                                        sizeof(error));
  bool ok;
  if (expectError) {
    ok = status != 0;
    std::printf("%s: %s\n", label.c_str(), error);
  } else {
    const std::string trace = checkTrace(blocks);
    ok = status == 0 && b.total == expectedTotal(step) &&
         gSync[0] == static_cast<unsigned>(step + 1) && gSync[1] == 0 &&
         trace.empty();
    if (status)
      std::printf("%s: %s\n", label.c_str(), error);
    if (!trace.empty())
      std::printf("%s: trace: %s\n", label.c_str(), trace.c_str());
  }
  std::printf("%s %s\n", label.c_str(), ok ? "ok" : "FAIL");
  failures += !ok;
}

} // namespace

int main() {
  for (int reverse = 0; reverse < 2; ++reverse) {
    sits_emu_set_reverse_schedule(reverse);
    for (unsigned blocks : {1u, 2u, 3u, 4u, 8u}) {
      plan(blocks, false);
      for (int step = 0; step < 3; ++step)
        run(blocks, step, false,
            std::string(reverse ? "reverse " : "") + "blocks " +
                std::to_string(blocks) + " step " + std::to_string(step));
    }
  }
  sits_emu_set_reverse_schedule(0);
  plan(3, true);
  run(3, 0, true, "cycle");
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
