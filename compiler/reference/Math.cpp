//===- Math.cpp - Numeric building blocks of the reference executor -------===//

#include "compiler/reference/Math.h"

#include <algorithm>
#include <thread>
#include <vector>

using namespace sits::reference;

float sits::reference::dotF32(const float *a, const float *b, int64_t count) {
  constexpr int64_t kLanes = 8;
  float lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t body = count - count % kLanes;
  for (int64_t k = 0; k < body; k += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] += a[k + l] * b[k + l];
  float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
              ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (int64_t k = body; k < count; ++k)
    sum += a[k] * b[k];
  return sum;
}

float sits::reference::sumF32(const float *values, int64_t count) {
  constexpr int64_t kLanes = 8;
  float lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t body = count - count % kLanes;
  for (int64_t k = 0; k < body; k += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] += values[k + l];
  float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
              ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (int64_t k = body; k < count; ++k)
    sum += values[k];
  return sum;
}

void sits::reference::parallelFor(
    int64_t count, double workPerItem, unsigned numThreads,
    const std::function<void(int64_t, int64_t)> &body) {
  // Starting a thread costs tens of microseconds: only split work of a few
  // million multiply-adds or more.
  constexpr double kMinWorkPerThread = 1 << 20;
  int64_t threads = std::min<int64_t>(
      {static_cast<int64_t>(std::max(1u, numThreads)), count,
       static_cast<int64_t>(workPerItem * count / kMinWorkPerThread) + 1});
  if (threads <= 1) {
    if (count > 0)
      body(0, count);
    return;
  }
  std::vector<std::thread> workers;
  int64_t chunk = (count + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    int64_t begin = t * chunk, end = std::min(count, begin + chunk);
    if (begin < end)
      workers.emplace_back(body, begin, end);
  }
  body(0, std::min(count, chunk));
  for (std::thread &worker : workers)
    worker.join();
}

void sits::reference::matmulTransposedB(const float *a, const float *b,
                                        float *c, int64_t m, int64_t n,
                                        int64_t k, unsigned numThreads) {
  // Split over output columns (weight rows): each thread streams its part of
  // the weight once per block of input rows.
  constexpr int64_t kRowBlock = 8;
  parallelFor(n, static_cast<double>(m) * k, numThreads,
              [&](int64_t begin, int64_t end) {
                for (int64_t row0 = 0; row0 < m; row0 += kRowBlock) {
                  int64_t row1 = std::min(m, row0 + kRowBlock);
                  for (int64_t j = begin; j < end; ++j) {
                    const float *weightRow = b + j * k;
                    for (int64_t i = row0; i < row1; ++i)
                      c[i * n + j] = dotF32(a + i * k, weightRow, k);
                  }
                }
              });
}

void sits::reference::matmulPlain(const float *a, const float *b, float *c,
                                  int64_t m, int64_t n, int64_t k,
                                  unsigned numThreads) {
  // i-k-j order: the inner loop runs along rows of b and c, contiguous. The
  // columns go in blocks so that a block of b ([k, kColumnBlock]) stays in
  // cache while every row of a passes over it, instead of streaming all of b
  // once per row. The threads split the columns, so a single row (decode)
  // splits too; each element is still summed in k order.
  constexpr int64_t kColumnBlock = 256;
  parallelFor(n, static_cast<double>(m) * k, numThreads,
              [&](int64_t begin, int64_t end) {
                for (int64_t j0 = begin; j0 < end; j0 += kColumnBlock) {
                  int64_t width = std::min(kColumnBlock, end - j0);
                  for (int64_t i = 0; i < m; ++i) {
                    float *out = c + i * n + j0;
                    std::fill(out, out + width, 0.0f);
                    for (int64_t p = 0; p < k; ++p) {
                      float scale = a[i * k + p];
                      const float *row = b + p * n + j0;
                      for (int64_t j = 0; j < width; ++j)
                        out[j] += scale * row[j];
                    }
                  }
                }
              });
}
