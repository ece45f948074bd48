//===- BlockAllocatorTest.cpp - The blocks of a paged KV cache ------------===//
//
// The host side of a paged session (runtime/src/BlockAllocator.h): blocks
// handed out as sequences grow and back when they restart, the table each
// sequence's rows are read through, prefix ids sharing blocks with
// reference counts, blocks only a prefix id holds taken back when the pool
// runs out, and a pool with nothing left refused. A random workload keeps
// the invariants: no block in two places unless shared, counts match the
// holders, free + held = the pool.
//
//===----------------------------------------------------------------------===//

#include "src/BlockAllocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

using sits::runtime::BlockAllocator;

namespace {

/// 4 sequences of up to 64 tokens in blocks of 16 (4 blocks each).
constexpr uint32_t kSeqs = 4, kMaxBlocks = 4, kB = 16;

std::vector<int32_t> rowOf(const BlockAllocator &a, uint32_t seq) {
  const auto &t = a.table();
  return std::vector<int32_t>(t.begin() + seq * kMaxBlocks,
                              t.begin() + (seq + 1) * kMaxBlocks);
}

TEST(BlockAllocator, SequencesGrowAndGiveBlocksBack) {
  BlockAllocator a(kSeqs, kMaxBlocks, 10, kB);
  EXPECT_TRUE(a.takeChanged()); // the first upload
  EXPECT_FALSE(a.takeChanged());
  ASSERT_TRUE(a.reserve(0, 1));
  EXPECT_EQ(rowOf(a, 0), (std::vector<int32_t>{0, -1, -1, -1}));
  ASSERT_TRUE(a.reserve(2, 33)); // 3 blocks
  EXPECT_EQ(rowOf(a, 2), (std::vector<int32_t>{1, 2, 3, -1}));
  ASSERT_TRUE(a.reserve(0, 16)); // still one block
  EXPECT_EQ(a.blocksOf(0), 1u);
  ASSERT_TRUE(a.reserve(0, 17));
  EXPECT_EQ(rowOf(a, 0), (std::vector<int32_t>{0, 4, -1, -1}));
  EXPECT_TRUE(a.takeChanged());
  EXPECT_EQ(a.freeBlocks(), 5u);
  a.release(2);
  EXPECT_EQ(rowOf(a, 2), (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(a.freeBlocks(), 8u);
  // Given back blocks are handed out again, the last freed first.
  ASSERT_TRUE(a.reserve(1, 64));
  EXPECT_EQ(rowOf(a, 1), (std::vector<int32_t>{3, 2, 1, 5}));
  EXPECT_EQ(a.freeBlocks(), 4u);
  a.reset();
  EXPECT_EQ(a.freeBlocks(), 10u);
  EXPECT_EQ(a.blocksOf(1), 0u);
}

TEST(BlockAllocator, AFullPoolIsRefusedAndKeepsWhatWasTaken) {
  BlockAllocator a(kSeqs, kMaxBlocks, 5, kB);
  ASSERT_TRUE(a.reserve(0, 64));
  EXPECT_FALSE(a.reserve(1, 40)); // needs 3, 1 free
  EXPECT_EQ(a.blocksOf(1), 1u);
  EXPECT_EQ(a.freeBlocks(), 0u);
  EXPECT_FALSE(a.reserve(2, 1));
  a.release(0);
  EXPECT_TRUE(a.reserve(1, 40));
  EXPECT_TRUE(a.reserve(2, 1));
  // Past the capacity of a sequence: refused, nothing taken.
  EXPECT_FALSE(a.reserve(3, 65));
  EXPECT_EQ(a.blocksOf(3), 1u);
}

TEST(BlockAllocator, PrefixIdsShareBlocks) {
  BlockAllocator a(kSeqs, kMaxBlocks, 8, kB);
  a.setPrefixIds(4);
  ASSERT_TRUE(a.reserve(0, 40)); // blocks 0, 1, 2
  a.share(0, 0, {3, 1});         // ids 3 and 1 name blocks 0 and 1
  EXPECT_EQ(a.prefixBlock(3), 0);
  EXPECT_EQ(a.prefixBlock(1), 1);
  EXPECT_EQ(a.references(0), 2u);
  // A sequence loads them: its first entries are those blocks.
  ASSERT_TRUE(a.load(2, {3, 1}));
  EXPECT_EQ(rowOf(a, 2), (std::vector<int32_t>{0, 1, -1, -1}));
  EXPECT_EQ(a.references(0), 3u);
  ASSERT_TRUE(a.reserve(2, 40)); // its own third block
  EXPECT_EQ(rowOf(a, 2), (std::vector<int32_t>{0, 1, 3, -1}));
  // Both sequences restart: the ids still hold the shared blocks.
  a.release(0);
  a.release(2);
  EXPECT_EQ(a.references(0), 1u);
  EXPECT_EQ(a.references(1), 1u);
  EXPECT_EQ(a.freeBlocks(), 6u);
  // Saving again under the same id keeps the count; another block drops
  // the old one.
  ASSERT_TRUE(a.load(1, {3}));
  a.share(1, 0, {3});
  EXPECT_EQ(a.references(0), 2u);
  ASSERT_TRUE(a.reserve(1, 32));
  a.share(1, 1, {3}); // id 3 now names block 1's neighbour
  EXPECT_EQ(a.references(0), 1u);
  // An id naming nothing cannot be loaded; the sequence is left empty.
  EXPECT_FALSE(a.load(1, {3, 0}));
  EXPECT_EQ(a.blocksOf(1), 0u);
  // New ids drop the old ones' blocks.
  a.setPrefixIds(2);
  EXPECT_EQ(a.freeBlocks(), 8u);
}

TEST(BlockAllocator, BlocksOnlyAPrefixHoldsAreTakenBackWhenThePoolRunsOut) {
  BlockAllocator a(kSeqs, kMaxBlocks, 4, kB);
  a.setPrefixIds(2);
  ASSERT_TRUE(a.reserve(0, 32));
  a.share(0, 0, {0, 1});
  a.release(0); // the ids alone hold blocks 0 and 1
  ASSERT_TRUE(a.reserve(1, 32));
  EXPECT_EQ(a.freeBlocks(), 0u);
  ASSERT_TRUE(a.load(2, {0})); // a sequence holds id 0's block too
  // A block: only id 1's can be taken; then none.
  ASSERT_TRUE(a.reserve(2, 32));
  EXPECT_EQ(a.prefixBlock(1), -1);
  EXPECT_EQ(a.prefixBlock(0), 0);
  EXPECT_FALSE(a.reserve(2, 48));
  EXPECT_FALSE(a.load(3, {1}));
}

TEST(BlockAllocator, AvailableBlocksCountThoseAPrefixAloneHolds) {
  BlockAllocator a(kSeqs, kMaxBlocks, 6, kB);
  a.setPrefixIds(3);
  EXPECT_EQ(a.totalBlocks(), 6u);
  EXPECT_EQ(a.tokensPerBlock(), kB);
  ASSERT_TRUE(a.reserve(0, 48)); // blocks 0, 1, 2
  a.share(0, 0, {2, 0});         // ids 2 and 0 name blocks 0 and 1
  // Held by the sequence too: not available.
  EXPECT_EQ(a.availableBlocks(), 3u);
  a.release(0);
  // Now blocks 0 and 1 are the ids' alone: reserve would take them back.
  EXPECT_EQ(a.freeBlocks(), 4u);
  EXPECT_EQ(a.availableBlocks(), 6u);
  // Unless a sequence is about to load one of them (ids outside the pool
  // name nothing).
  EXPECT_EQ(a.availableBlocks({2}), 5u);
  EXPECT_EQ(a.availableBlocks({2, 0, 7}), 4u);
  ASSERT_TRUE(a.load(1, {2}));
  EXPECT_EQ(a.availableBlocks(), 5u);
  // That many can indeed be reserved, and no more.
  ASSERT_TRUE(a.reserve(3, 4 * kB));
  ASSERT_TRUE(a.reserve(2, kB));
  EXPECT_EQ(a.availableBlocks(), 0u);
  EXPECT_FALSE(a.reserve(2, kB + 1));
  EXPECT_NE(a.fullMessage(2, 17).find("pool of 6 blocks of 16 tokens has "
                                      "none free for slot 2 (17 tokens)"),
            std::string::npos)
      << a.fullMessage(2, 17);
}

/// A quantized cache's load: the named blocks below copyFrom shared, those
/// from it on new blocks of the sequence's own, paired with their sources.
TEST(BlockAllocator, LoadCopiesTheBlocksASequenceWritesAgain) {
  BlockAllocator a(kSeqs, kMaxBlocks, 6, kB);
  a.setPrefixIds(4);
  ASSERT_TRUE(a.reserve(0, 48)); // blocks 0, 1, 2
  a.share(0, 0, {0, 1, 2});
  std::vector<std::pair<int32_t, int32_t>> copies;
  ASSERT_TRUE(a.load(1, {0, 1, 2}, 1, &copies));
  EXPECT_EQ(rowOf(a, 1), (std::vector<int32_t>{0, 3, 4, -1}));
  EXPECT_EQ(copies, (std::vector<std::pair<int32_t, int32_t>>{{1, 3}, {2, 4}}));
  EXPECT_EQ(a.references(0), 3u); // seq 0, its id, seq 1
  EXPECT_EQ(a.references(1), 2u); // seq 0 and its id: seq 1 has a copy
  EXPECT_EQ(a.references(3), 1u);
  EXPECT_EQ(a.freeBlocks(), 1u);

  // Too few blocks for the copies: nothing taken, the sequence empty.
  ASSERT_TRUE(a.load(2, {0, 1, 2}, 2, &copies));
  EXPECT_EQ(a.freeBlocks(), 0u);
  EXPECT_FALSE(a.load(3, {0, 1, 2}, 1, &copies));
  EXPECT_EQ(rowOf(a, 3), (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(a.blocksOf(3), 0u);
  EXPECT_EQ(a.freeBlocks(), 0u);
  EXPECT_EQ(a.references(1), 3u); // seq 0, its id and seq 2, not seq 3
  // An id naming nothing fails before taking anything.
  EXPECT_FALSE(a.load(3, {3}, 0, &copies));
  EXPECT_TRUE(copies.empty());
  // Giving the sequences back frees their copies, not the shared blocks.
  a.release(1);
  a.release(2);
  EXPECT_EQ(a.freeBlocks(), 3u);
  EXPECT_EQ(a.references(0), 2u);
}

/// The rule of which loaded tokens a quantized cache's sequence writes or
/// reads as FP16 again, against a brute force over the kernels' rules:
/// firstRewritten(P) is the least token that a sequence resuming at P
/// quantizes (values at t + N, keys at last(t) + N, from position P on) or
/// reads hot (value t while p - t < N, key t while p - last(t) < N).
TEST(QuantPrefixRule, FirstRewrittenIsTheLeastTokenTouchedAgain) {
  for (uint32_t n : {1u, 3u, 4u, 16u, 64u})
    for (uint32_t cb : {1u, 4u, 8u, 16u})
      for (uint64_t p = 1; p < 160; ++p) {
        sits::runtime::QuantPrefixRule rule{16, n, cb};
        uint64_t least = p;
        for (uint64_t t = 0; t < p; ++t) {
          const uint64_t last = t / cb * cb + cb - 1;
          // Positions q >= p: quantized there, or read hot there.
          const bool values = t + n >= p;
          const bool keys = last + n >= p;
          if (values || keys) {
            least = t;
            break;
          }
        }
        ASSERT_EQ(rule.firstRewritten(p), least)
            << "P " << p << " N " << n << " CB " << cb;
      }
  sits::runtime::QuantPrefixRule rule{16, 4, 8};
  // 64 tokens: token 56 on is touched again, so blocks 0-2 stay shared.
  EXPECT_EQ(rule.firstRewritten(64), 56u);
  EXPECT_EQ(rule.sharedBlocks(4), 3u);
  EXPECT_EQ(rule.sharedBlocks(1), 0u);
}

TEST(BlockAllocator, RandomWorkKeepsTheCounts) {
  const uint32_t blocks = 12;
  BlockAllocator a(kSeqs, kMaxBlocks, blocks, kB);
  a.setPrefixIds(6);
  std::mt19937 rng(5);
  std::vector<uint64_t> rows(kSeqs, 0);
  for (int step = 0; step < 5000; ++step) {
    const uint32_t seq = rng() % kSeqs;
    switch (rng() % 5) {
    case 0:
      a.release(seq);
      rows[seq] = 0;
      break;
    case 1:
    case 2: {
      const uint64_t want = std::min<uint64_t>(64, rows[seq] + rng() % 20);
      if (a.reserve(seq, want))
        rows[seq] = want;
      break;
    }
    case 3:
      if (rows[seq] >= kB) {
        const uint32_t full = uint32_t(rows[seq] / kB);
        const uint32_t first = rng() % full;
        a.share(seq, first, {rng() % 6u});
      }
      break;
    case 4: {
      std::vector<uint32_t> ids = {rng() % 6u};
      rows[seq] = a.load(seq, ids) ? kB : 0;
      break;
    }
    }
    // Every holder counted, every block held or free, never both.
    std::map<int32_t, uint32_t> holders;
    for (uint32_t s = 0; s < kSeqs; ++s) {
      std::vector<int32_t> row = rowOf(a, s);
      for (uint32_t i = 0; i < kMaxBlocks; ++i) {
        ASSERT_EQ(row[i] >= 0, i < a.blocksOf(s)) << "step " << step;
        if (row[i] >= 0)
          ++holders[row[i]];
      }
    }
    for (uint32_t id = 0; id < 6; ++id)
      if (a.prefixBlock(id) >= 0)
        ++holders[a.prefixBlock(id)];
    uint32_t held = 0;
    for (int32_t b = 0; b < int32_t(blocks); ++b) {
      ASSERT_EQ(a.references(b), holders[b]) << "block " << b;
      held += holders[b] > 0;
    }
    ASSERT_EQ(held + a.freeBlocks(), blocks) << "step " << step;
    // Available: free, or held by one prefix id and nothing else.
    uint32_t prefixOnly = 0;
    for (uint32_t id = 0; id < 6; ++id)
      prefixOnly += a.prefixBlock(id) >= 0 && holders[a.prefixBlock(id)] == 1;
    ASSERT_EQ(a.availableBlocks(), a.freeBlocks() + prefixOnly);
  }
}

} // namespace
