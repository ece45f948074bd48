//===- tvc_select_tests.cpp - The TVC head's radix selection on the CPU ---===//
//
// Compiled as host C++ with the emulator by emulate-tvc-select.test. Each
// case fills `sequences` lists of (key, row) entries, runs tvcRadixSelect
// and tvcCompact in one block, and compares the selected rows with the first
// `want` of a std::sort in the candidates' order (larger key, then lower
// row): distinct keys, keys from a handful of values (ties decided by the
// row), all keys equal, zero keys (padding), fewer entries than wanted, one
// wanted, sequences that are not live, and the 8B head's shape (8320 kept
// rows, 64 candidates, 1024 threads).
//
//===----------------------------------------------------------------------===//

#include "sits/tvc_select.cuh"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

std::mt19937_64 rng(20261203);
int passed = 0, failed = 0;

struct Case {
  int sequences, count, want;
  std::vector<unsigned long long> keys; ///< [sequences][count]
  std::vector<int> rows;                ///< [sequences][count]
  std::vector<int> live;                ///< [sequences]
  std::vector<int> out;                 ///< [sequences][want], -1 unwritten
};

void entry(void **args) {
  Case &c = *sits_emu::arg<Case *>(args[0]);
  SITS_DYNAMIC_SHARED(unsigned char, shared);
  unsigned *hist = reinterpret_cast<unsigned *>(shared);
  sits::TvcRadix *state =
      reinterpret_cast<sits::TvcRadix *>(hist + 256 * c.sequences);
  int *scan = reinterpret_cast<int *>(state + c.sequences);
  sits::tvcRadixSelect(
      c.sequences, c.count, c.want,
      [&](int b, int i) { return c.keys[b * c.count + i]; },
      [&](int b, int i) { return c.rows[b * c.count + i]; },
      [&](int b) { return c.live[b] != 0; }, hist, state, scan);
  for (int b = 0; b < c.sequences; ++b) {
    if (!c.live[b])
      continue;
    const sits::TvcRadix s = state[b];
    sits::tvcCompact(
        c.count, c.want,
        [&](int i) {
          return sits::tvcComparePrefix(
                     s, c.keys[b * c.count + i],
                     sits::tvcRank(c.rows[b * c.count + i])) >= 0;
        },
        [&](int k, int i) { c.out[b * c.want + k] = c.rows[b * c.count + i]; },
        scan + 2);
  }
}

/// keyValues 0: distinct random keys; otherwise keys drawn from that many
/// values (0 among them when `zeros`).
void run(const std::string &name, int sequences, int count, int want,
         int threads, int keyValues, bool zeros, bool someDead) {
  Case c;
  c.sequences = sequences, c.count = count, c.want = want;
  std::vector<unsigned long long> values(std::max(keyValues, 1));
  for (auto &v : values)
    v = rng() | (1ull << 63);
  if (zeros)
    values[0] = 0;
  for (int b = 0; b < sequences; ++b) {
    // Distinct rows in a shuffled order, as the kept lists hold them.
    std::vector<int> rows(count);
    for (int i = 0; i < count; ++i)
      rows[i] = 3 * i + b;
    std::shuffle(rows.begin(), rows.end(), rng);
    for (int i = 0; i < count; ++i) {
      c.keys.push_back(keyValues ? values[rng() % keyValues] : rng());
      c.rows.push_back(rows[i]);
    }
    c.live.push_back(someDead && b % 3 == 1 ? 0 : 1);
  }
  c.out.assign(static_cast<size_t>(sequences) * want, -1);
  Case *arg = &c;
  void *args[] = {&arg};
  unsigned grid[3] = {1, 1, 1},
           block[3] = {static_cast<unsigned>(threads), 1, 1};
  unsigned shared =
      sequences * (256 * 4 + sizeof(sits::TvcRadix)) + 4 * (threads / 32 + 2);
  char error[512];
  bool ok =
      !sits_emu_launch(entry, grid, block, shared, args, error, sizeof(error));
  if (!ok)
    std::printf("launch failed: %s\n", error);
  int wrong = 0;
  for (int b = 0; ok && b < sequences; ++b) {
    std::vector<int> order(count);
    for (int i = 0; i < count; ++i)
      order[i] = i;
    const auto *keys = &c.keys[b * count];
    const auto *rows = &c.rows[b * count];
    std::sort(order.begin(), order.end(), [&](int i, int j) {
      return keys[i] > keys[j] || (keys[i] == keys[j] && rows[i] < rows[j]);
    });
    std::vector<int> expected, got;
    for (int k = 0; k < std::min(want, count); ++k)
      expected.push_back(rows[order[k]]);
    for (int k = 0; k < want; ++k)
      got.push_back(c.out[b * want + k]);
    if (!c.live[b]) {
      wrong += std::count(got.begin(), got.end(), -1) != want; // untouched
      continue;
    }
    // Written in entry order, so compare as sets; the rest stays unwritten.
    std::vector<int> written(got.begin(), got.begin() + expected.size());
    std::sort(expected.begin(), expected.end());
    std::sort(written.begin(), written.end());
    wrong += written != expected;
    wrong += std::count(got.begin() + expected.size(), got.end(), -1) !=
             static_cast<long>(want - expected.size());
  }
  ok = ok && wrong == 0;
  (ok ? passed : failed)++;
  std::printf("%-48s %d sequences, %d entries, want %d: %s\n", name.c_str(),
              sequences, count, want, ok ? "ok" : "FAIL");
}

void cases() {
  run("distinct keys", 1, 1000, 33, 256, 0, false, false);
  run("ties: 5 key values", 1, 1000, 33, 256, 5, false, false);
  run("ties: one key value", 1, 1024, 65, 256, 1, false, false);
  run("zero keys among 3 values", 3, 700, 40, 256, 3, true, false);
  run("fewer entries than wanted", 2, 20, 33, 256, 0, false, false);
  run("one wanted", 4, 513, 1, 256, 0, false, true);
  run("batch 8, some not live", 8, 1024, 65, 256, 7, false, true);
  run("8B head: 128 chunks x 65 kept", 1, 8320, 64, 1024, 0, false, false);
  run("8B head with ties", 1, 8320, 64, 1024, 40, false, false);
}

} // namespace

int main() {
  cases();
  sits_emu_set_reverse_schedule(1);
  std::printf("reverse schedule:\n");
  cases();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
