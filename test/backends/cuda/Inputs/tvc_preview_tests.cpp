//===- tvc_preview_tests.cpp - The TVC head's previews on the CPU ---------===//
//
// Compiled as host C++ with the emulator by emulate-tvc-preview.test.
//
// tvcProject and tvcResidual: random T [R, K] and input rows; z = T h (f32)
// and a_r = g(H) sum_k |T_rk h_k| against float64, and each residual
// block's |e|^2 and |h|^2 (e = h - T^T z with the kernel's z) against
// float64 (K a multiple of 4 or not, ranks 36 and 128, a sequence with no
// new token left untouched).
//
// tvcPreview: random P [V, R] and z [B, R], zero bounds (so a row's bound
// is its preview, p_v = P_v . z, up to 2^-50 |p_v|), every chunk; what each
// chunk keeps for each live sequence against float64 previews: every kept
// key is the row's preview (to f32 summation accuracy), the kept rows are
// the chunk's kKeep largest (up to near ties), padding rows only where a
// chunk has fewer rows, and a sequence with no new token is left
// untouched. Ranks of 128 (one slice of 16-byte loads), 36 (not a multiple
// of 4: 4-byte loads) and 200 (two slices); vocabularies that end inside a
// chunk.
//
//===----------------------------------------------------------------------===//

#include "sits/tvc.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

std::mt19937_64 rng(20261203);
int passed = 0, failed = 0;

template <int Vocab, int Rank, int Batch, int Chunk, int Keep> struct Cfg {
  static constexpr int kVocab = Vocab, kRank = Rank, kMaxBatch = Batch;
  static constexpr int kChunk = Chunk, kKeep = Keep;
  static constexpr int kChunks = (Vocab + Chunk - 1) / Chunk;
  static constexpr int kResidualBlocks = 1;
  static constexpr double kSqrtHidden = 1.0, kTau = 0.0, kGammaRank = 0.0,
                          kGammaDot = 0.0;
  // Scratch regions, [kMaxBatch][...] each, 8-byte aligned.
  static constexpr long kOffZ = 0;
  static constexpr long kOffA = kOffZ + 8L * Batch * ((Rank + 1) / 2);
  static constexpr long kOffNorms = kOffA + 8L * Batch * Rank;
  static constexpr long kOffKeys = kOffNorms + 8L * Batch * 2;
  static constexpr long kOffRows = kOffKeys + 8L * Batch * kChunks * Keep;
  static constexpr long kOffNaN =
      kOffRows + 8L * Batch * ((kChunks * Keep + 1) / 2);
  static constexpr long kBytes = kOffNaN + 8L * Batch * kChunks;
};

template <class C> void entry(void **args) {
  sits::tvcPreview<C>(sits_emu::arg<const float *>(args[0]),
                      sits_emu::arg<const float *>(args[1]),
                      sits_emu::arg<void *>(args[2]),
                      sits_emu::arg<int>(args[3]),
                      sits_emu::arg<const int *>(args[4]));
}

template <class C> void run(const std::string &name) {
  constexpr int V = C::kVocab, R = C::kRank, B = C::kMaxBatch;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> left(size_t(V) * R), bounds(size_t(V) * 4, 0.0f);
  for (float &x : left)
    x = uniform(rng);
  std::vector<unsigned char> scratch(C::kBytes, 0xff); // poisoned
  std::vector<int> steps(B);
  for (int b = 0; b < B; ++b) {
    steps[b] = b == 1 ? 0 : 1 + b; // sequence 1 has no new token
    float *z = reinterpret_cast<float *>(scratch.data() + C::kOffZ) + b * R;
    for (int r = 0; r < R; ++r)
      z[r] = uniform(rng);
    std::memset(scratch.data() + C::kOffA + 8L * b * R, 0, 8L * R);
    std::memset(scratch.data() + C::kOffNorms + 16L * b, 0, 16);
  }
  std::vector<unsigned char> before = scratch;
  const float *lp = left.data(), *bp = bounds.data();
  void *sp = scratch.data();
  int tokens = B;
  const int *tp = steps.data();
  void *args[] = {&lp, &bp, &sp, &tokens, &tp};
  unsigned grid[3] = {C::kChunks, 1, 1}, block[3] = {sits::kTvcThreads, 1, 1};
  char error[512];
  bool ok = !sits_emu_launch(entry<C>, grid, block,
                             sits::tvcPreviewSharedBytes(B, C::kChunk, R), args,
                             error, sizeof(error));
  if (!ok)
    std::printf("launch failed: %s\n", error);
  double worstValue = 0.0, worstOrder = 0.0;
  int wrong = 0;
  for (int b = 0; ok && b < B; ++b) {
    const float *z =
        reinterpret_cast<const float *>(scratch.data() + C::kOffZ) + b * R;
    const long kept = long(C::kChunks) * C::kKeep;
    const auto *keys = reinterpret_cast<const unsigned long long *>(
                           scratch.data() + C::kOffKeys) +
                       b * kept;
    const int *rows =
        reinterpret_cast<const int *>(scratch.data() + C::kOffRows) + b * kept;
    if (steps[b] <= 0) { // untouched
      wrong += std::memcmp(keys, before.data() + C::kOffKeys + 8 * b * kept,
                           8 * kept) != 0;
      continue;
    }
    for (int c = 0; c < C::kChunks; ++c) {
      const int first = c * C::kChunk;
      std::vector<double> preview(C::kChunk, -INFINITY);
      double magnitude = 0.0; // the scale of the f32 summation error
      for (int i = 0; i < C::kChunk && first + i < V; ++i) {
        double sum = 0.0, abs = 0.0;
        for (int r = 0; r < R; ++r) {
          sum += double(left[size_t(first + i) * R + r]) * z[r];
          abs += std::fabs(double(left[size_t(first + i) * R + r]) * z[r]);
        }
        preview[i] = sum;
        magnitude = std::max(magnitude, abs);
      }
      const double tolerance = 1e-6 * magnitude;
      std::vector<bool> isKept(C::kChunk, false);
      double keptMin = INFINITY;
      for (int k = 0; k < C::kKeep; ++k) {
        const int row = rows[c * C::kKeep + k], i = row - first;
        if (i < 0 || i >= C::kChunk || isKept[i]) {
          ++wrong; // outside the chunk, or twice
          continue;
        }
        isKept[i] = true;
        if (row >= V) { // padding: key 0, only once the real rows are kept
          wrong += keys[c * C::kKeep + k] != 0;
          keptMin = -INFINITY;
          continue;
        }
        const double got = sits::tvcKeyValue(keys[c * C::kKeep + k]);
        worstValue = std::max(worstValue, std::fabs(got - preview[i]));
        wrong += !(std::fabs(got - preview[i]) <= tolerance);
        keptMin = std::min(keptMin, preview[i]);
      }
      for (int i = 0; i < C::kChunk && first + i < V; ++i)
        if (!isKept[i] && preview[i] > keptMin) {
          worstOrder = std::max(worstOrder, preview[i] - keptMin);
          wrong += preview[i] - keptMin > 2 * tolerance;
        }
    }
  }
  ok = ok && wrong == 0;
  (ok ? passed : failed)++;
  std::printf("%-44s error %.3g, order %.3g: %s\n", name.c_str(), worstValue,
              worstOrder, ok ? "ok" : "FAIL");
}

/// tvcProject and tvcResidual's constants: K inputs, rank R, B sequences.
template <int K, int Rank, int Batch> struct ProjectCfg {
  static constexpr int kK = K, kRank = Rank, kMaxBatch = Batch;
  static constexpr int kResidualBlocks = (K + 31) / 32;
  static constexpr bool kRoundInput = false;
  static constexpr double kGammaH = 0x1p-10; // any factor: checked as given
  static constexpr long kOffZ = 0;
  static constexpr long kOffA = kOffZ + 8L * Batch * ((Rank + 1) / 2);
  static constexpr long kOffNorms = kOffA + 8L * Batch * Rank;
  static constexpr long kBytes = kOffNorms + 16L * Batch * kResidualBlocks;
};

template <class C> void projectEntry(void **args) {
  sits::tvcProject<C>(sits_emu::arg<const float *>(args[0]),
                      sits_emu::arg<const float *>(args[1]),
                      sits_emu::arg<void *>(args[2]),
                      sits::StepRows{sits_emu::arg<const int *>(args[4]),
                                     sits_emu::arg<int>(args[3]), 0});
}
template <class C> void residualEntry(void **args) {
  sits::tvcResidual<C>(sits_emu::arg<const float *>(args[0]),
                       sits_emu::arg<const float *>(args[1]),
                       sits_emu::arg<void *>(args[2]),
                       sits::StepRows{sits_emu::arg<const int *>(args[4]),
                                      sits_emu::arg<int>(args[3]), 0});
}

template <class C> void runProject(const std::string &name) {
  constexpr int K = C::kK, R = C::kRank, B = C::kMaxBatch, kSeq = 2;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> right(size_t(R) * K), x(size_t(B) * kSeq * K);
  for (float &v : right)
    v = uniform(rng);
  for (float &v : x)
    v = uniform(rng);
  std::vector<int> steps(B);
  for (int b = 0; b < B; ++b)
    steps[b] = b == 1 ? 0 : 1 + b % kSeq; // sequence 1 has no new token
  std::vector<unsigned char> scratch(C::kBytes, 0xff), before = scratch;
  const float *xp = x.data(), *rp = right.data();
  void *sp = scratch.data();
  int seq = kSeq;
  const int *tp = steps.data();
  void *args[] = {&xp, &rp, &sp, &seq, &tp};
  char error[512];
  unsigned block[3] = {sits::kTvcThreads, 1, 1};
  unsigned projectGrid[3] = {(R + 1) / 2, B, 1};
  unsigned residualGrid[3] = {C::kResidualBlocks, B, 1};
  bool ok = !sits_emu_launch(projectEntry<C>, projectGrid, block, 0, args,
                             error, sizeof(error)) &&
            !sits_emu_launch(residualEntry<C>, residualGrid, block, 0, args,
                             error, sizeof(error));
  if (!ok)
    std::printf("launch failed: %s\n", error);
  double worstZ = 0.0, worstNorm = 0.0;
  int wrong = 0;
  for (int b = 0; ok && b < B; ++b) {
    const float *z =
        reinterpret_cast<const float *>(scratch.data() + C::kOffZ) + b * R;
    const double *a =
        reinterpret_cast<const double *>(scratch.data() + C::kOffA) + b * R;
    const double *norms =
        reinterpret_cast<const double *>(scratch.data() + C::kOffNorms) +
        b * 2 * C::kResidualBlocks;
    if (steps[b] <= 0) {
      wrong +=
          std::memcmp(z, before.data() + C::kOffZ + 4L * b * R, 4L * R) != 0;
      continue;
    }
    const float *h = x.data() + (size_t(b) * kSeq + steps[b] - 1) * K;
    for (int r = 0; r < R; ++r) {
      double sum = 0.0, abs = 0.0;
      for (int k = 0; k < K; ++k) {
        sum += double(right[size_t(r) * K + k]) * h[k];
        abs += std::fabs(double(right[size_t(r) * K + k]) * h[k]);
      }
      worstZ = std::max(worstZ, std::fabs(z[r] - sum));
      wrong += !(std::fabs(z[r] - sum) <= 1e-6 * abs);
      wrong += !(std::fabs(a[r] - C::kGammaH * abs) <= 1e-12 * abs);
    }
    for (int i = 0; i < C::kResidualBlocks; ++i) {
      double e2 = 0.0, h2 = 0.0;
      for (int k = 32 * i; k < std::min(K, 32 * i + 32); ++k) {
        double e = h[k];
        for (int r = 0; r < R; ++r)
          e -= double(right[size_t(r) * K + k]) * double(z[r]);
        e2 += e * e;
        h2 += double(h[k]) * h[k];
      }
      const double error = std::max(std::fabs(norms[2 * i] - e2),
                                    std::fabs(norms[2 * i + 1] - h2));
      worstNorm = std::max(worstNorm, error);
      wrong += !(error <= 1e-9 * (e2 + h2 + 1.0));
    }
  }
  ok = ok && wrong == 0;
  (ok ? passed : failed)++;
  std::printf("%-44s z %.3g, norms %.3g: %s\n", name.c_str(), worstZ, worstNorm,
              ok ? "ok" : "FAIL");
}

void cases() {
  runProject<ProjectCfg<256, 128, 3>>("project/residual K=256 R=128 B=3");
  runProject<ProjectCfg<200, 36, 3>>("project/residual K=200 R=36 B=3");
  runProject<ProjectCfg<1030, 17, 2>>("project/residual K=1030 R=17 B=2");
  run<Cfg<1000, 128, 3, 128, 17>>("V=1000 R=128 B=3 chunks of 128 keep 17");
  run<Cfg<700, 36, 3, 256, 33>>("V=700 R=36 B=3 chunks of 256 keep 33");
  run<Cfg<300, 200, 3, 128, 65>>("V=300 R=200 B=3 chunks of 128 keep 65");
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
