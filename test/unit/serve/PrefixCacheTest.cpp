//===- PrefixCacheTest.cpp - The radix tree of prompt blocks --------------===//

#include "PrefixCache.h"

#include "sits/Error.h"

#include <gtest/gtest.h>

#include <set>

using namespace sits::serve;

namespace {
/// Tokens first, first + 1, ... (count of them).
std::vector<int32_t> run(int32_t first, int count) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i)
    tokens.push_back(first + i);
  return tokens;
}

std::vector<int32_t> concat(std::vector<int32_t> a,
                            const std::vector<int32_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Caches every full block of `tokens` (as a request does once prefilled)
/// and releases them; returns the pool blocks added.
std::vector<uint32_t> put(PrefixCache &cache,
                          const std::vector<int32_t> &tokens) {
  PrefixCache::Path path = cache.match(tokens, ~0u);
  std::vector<uint32_t> pools;
  for (const PrefixCache::NewBlock &block : cache.extend(path, tokens, ~0u))
    pools.push_back(block.pool);
  cache.release(path);
  return pools;
}

size_t matched(PrefixCache &cache, const std::vector<int32_t> &tokens,
               uint32_t maxBlocks = ~0u) {
  PrefixCache::Path path = cache.match(tokens, maxBlocks);
  size_t blocks = path.size();
  cache.release(path);
  return blocks;
}
} // namespace

TEST(PrefixCache, MatchesTheLongestCachedPrefixOfWholeBlocks) {
  PrefixCache cache(4, 8);
  std::vector<int32_t> prompt = run(100, 14); // 3 full blocks and 2 tokens
  std::vector<uint32_t> added = put(cache, prompt);
  EXPECT_EQ(added.size(), 3u);
  EXPECT_EQ(std::set<uint32_t>(added.begin(), added.end()).size(), 3u);
  EXPECT_EQ(cache.usedBlocks(), 3u);
  EXPECT_EQ(cache.freeBlocks(), 5u);

  EXPECT_EQ(matched(cache, prompt), 3u);
  EXPECT_EQ(matched(cache, prompt, 2), 2u);
  EXPECT_EQ(matched(cache, run(100, 11)), 2u) << "only whole blocks";
  std::vector<int32_t> other = prompt;
  other[5] = -1; // block 1 differs
  EXPECT_EQ(matched(cache, other), 1u);
  other[0] = -1;
  EXPECT_EQ(matched(cache, other), 0u);
  EXPECT_EQ(matched(cache, {}), 0u);

  // The pool blocks of a match are those the blocks were put in, in order.
  PrefixCache::Path path = cache.match(prompt, ~0u);
  EXPECT_EQ(cache.poolIds(path), added);
  cache.release(path);
  EXPECT_TRUE(path.empty());
}

TEST(PrefixCache, SharedPrefixesShareBlocks) {
  PrefixCache cache(4, 8);
  std::vector<int32_t> shared = run(0, 8);
  put(cache, concat(shared, run(50, 4)));
  // Only the block after the shared two is new.
  EXPECT_EQ(put(cache, concat(shared, run(70, 4))).size(), 1u);
  EXPECT_EQ(cache.usedBlocks(), 4u);
  EXPECT_EQ(matched(cache, concat(shared, run(70, 4))), 3u);
  EXPECT_EQ(matched(cache, concat(shared, run(90, 4))), 2u);
}

TEST(PrefixCache, ReferencesFollowTheirHolders) {
  PrefixCache cache(2, 4);
  std::vector<int32_t> prompt = run(0, 4);
  std::vector<uint32_t> pools = put(cache, prompt);
  EXPECT_EQ(cache.references(pools[0]), 0u);
  PrefixCache::Path a = cache.match(prompt, ~0u);
  PrefixCache::Path b = cache.match(prompt, 1);
  EXPECT_EQ(cache.references(pools[0]), 2u);
  EXPECT_EQ(cache.references(pools[1]), 1u);
  cache.release(a);
  EXPECT_EQ(cache.references(pools[0]), 1u);
  EXPECT_EQ(cache.references(pools[1]), 0u);
  cache.release(b);
  EXPECT_EQ(cache.references(pools[0]), 0u);
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedLeaf) {
  PrefixCache cache(2, 3);
  std::vector<int32_t> a = run(0, 4), b = run(10, 2), c = run(20, 2);
  put(cache, a); // two blocks, a chain
  put(cache, b);
  EXPECT_EQ(cache.freeBlocks(), 0u);
  EXPECT_EQ(matched(cache, a), 2u); // a used after b
  std::vector<uint32_t> added = put(cache, c);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(matched(cache, b), 0u) << "b was the least recently used";
  EXPECT_EQ(matched(cache, c), 1u);
  EXPECT_EQ(matched(cache, a), 2u); // now a is the most recent

  // c is the oldest leaf: a new block takes it.
  put(cache, run(30, 2));
  EXPECT_EQ(matched(cache, c), 0u);
  // Then a's block 1 goes, not a's block 0, although that one is older: a
  // block is no leaf while a longer prefix through it is cached.
  put(cache, run(40, 2));
  EXPECT_EQ(matched(cache, a), 1u) << "the leaf was evicted, not its parent";
  EXPECT_EQ(cache.evictions(), 3u);
}

TEST(PrefixCache, NeverEvictsReferencedBlocks) {
  PrefixCache cache(2, 2);
  std::vector<int32_t> a = run(0, 2), b = run(10, 2);
  std::vector<uint32_t> poolA = put(cache, a), poolB = put(cache, b);
  PrefixCache::Path holdA = cache.match(a, ~0u), holdB = cache.match(b, ~0u);
  // Every block is held: a new prompt gets no block, and nothing is lost.
  PrefixCache::Path path = cache.match(run(20, 4), ~0u);
  EXPECT_TRUE(cache.extend(path, run(20, 4), ~0u).empty());
  EXPECT_TRUE(path.empty());
  EXPECT_EQ(cache.evictions(), 0u);
  EXPECT_TRUE(cache.cached(poolA[0]));
  EXPECT_TRUE(cache.cached(poolB[0]));
  // Once b is let go, its block is the one taken, and a's stays.
  cache.release(holdB);
  std::vector<PrefixCache::NewBlock> added =
      cache.extend(path, run(20, 4), ~0u);
  ASSERT_EQ(added.size(), 1u) << "one block could be freed, not two";
  EXPECT_EQ(added[0].pool, poolB[0]);
  EXPECT_EQ(cache.references(poolA[0]), 1u);
  EXPECT_EQ(matched(cache, a), 1u);
  cache.release(path);
  cache.release(holdA);
}

TEST(PrefixCache, ExtendJoinsBlocksAnotherRequestAdded) {
  // Two requests with one prompt miss together; the first to finish its
  // prefill adds the blocks, the second finds them there.
  PrefixCache cache(2, 8);
  std::vector<int32_t> prompt = run(0, 6);
  PrefixCache::Path first = cache.match(prompt, 2),
                    second = cache.match(prompt, 2);
  EXPECT_EQ(cache.extend(first, prompt, 3).size(), 3u);
  EXPECT_TRUE(cache.extend(second, prompt, 3).empty());
  EXPECT_EQ(first, second);
  EXPECT_EQ(cache.references(cache.poolIds(first)[2]), 2u);
  cache.release(first);
  cache.release(second);
  EXPECT_EQ(cache.usedBlocks(), 3u);
}

TEST(PrefixCache, DiscardFreesBlocksThatWereNotSaved) {
  PrefixCache cache(2, 4);
  put(cache, run(0, 2));
  std::vector<int32_t> prompt = run(0, 6);
  PrefixCache::Path path = cache.match(prompt, 2);
  ASSERT_EQ(path.size(), 1u);
  EXPECT_EQ(cache.extend(path, prompt, 3).size(), 2u);
  cache.discard(path, 1); // the save of blocks 1 and 2 failed
  EXPECT_EQ(path.size(), 1u);
  cache.release(path);
  EXPECT_EQ(cache.usedBlocks(), 1u);
  EXPECT_EQ(matched(cache, prompt), 1u);
}

TEST(PrefixCache, BadSizesAreRefused) {
  EXPECT_THROW(PrefixCache(0, 4), sits::Error);
  EXPECT_THROW(PrefixCache(4, 0), sits::Error);
}
