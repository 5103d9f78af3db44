// The paged KV cache's bookkeeping (include/wick/models/kv_blocks.h): tables that grow by blocks,
// prefix-cache hits on whole blocks of a prompt, least-recently-used eviction, copy-on-write after a
// fork, and a long run of random operations checked against a simulated cache: every sequence must
// read back its own tokens through its table, hits included, and the counts must add up.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "test_util.h"
#include "wick/models/kv_blocks.h"

namespace wick::test {
namespace {

using models::KvBlocks;

std::vector<int32_t> iota(int n, int32_t from = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Sequence id of `tokens` added, reserved and committed whole.
void written(KvBlocks& pool, KvBlocks::SeqId id, const std::vector<int32_t>& tokens) {
  const int64_t found = pool.add(id, tokens);
  ASSERT_TRUE(pool.reserve(id, static_cast<int64_t>(tokens.size())));
  pool.commit(id, std::span(tokens).subspan(static_cast<size_t>(found)));
}

TEST(KvBlocks, TablesGrowByBlocksAndGiveThemBack) {
  KvBlocks pool(8, 16, false);
  const std::vector<int32_t> prompt = iota(20);
  EXPECT_EQ(pool.add(1, prompt), 0);
  EXPECT_TRUE(pool.table(1).empty());
  ASSERT_TRUE(pool.reserve(1, 20));
  EXPECT_EQ(pool.table(1).size(), 2u);
  pool.commit(1, prompt);
  EXPECT_EQ(pool.committed(1), 20);
  ASSERT_TRUE(pool.reserve(1, 33));
  EXPECT_EQ(pool.table(1).size(), 3u);
  EXPECT_EQ(pool.used_blocks(), 3);
  EXPECT_EQ(pool.free_blocks(), 5);
  // Six more blocks than the pool has free: refused, nothing changed.
  pool.add(2, prompt);
  EXPECT_FALSE(pool.reserve(2, 6 * 16));
  EXPECT_TRUE(pool.table(2).empty());
  EXPECT_EQ(pool.free_blocks(), 5);
  ASSERT_TRUE(pool.reserve(2, 5 * 16));
  EXPECT_EQ(pool.free_blocks(), 0);
  pool.remove(1);
  pool.remove(2);
  EXPECT_EQ(pool.free_blocks(), 8);
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_EQ(pool.cached_blocks(), 0);  // no prefix cache: nothing kept
}

TEST(KvBlocks, PromptsReuseTheWholeBlocksOfTheirLongestCachedPrefix) {
  KvBlocks pool(16, 16);
  const std::vector<int32_t> first = iota(40);
  written(pool, 1, first);
  const std::vector<int32_t> held = pool.table(1);
  // A prompt sharing 37 tokens: two whole blocks found, shared with the running sequence.
  std::vector<int32_t> second = iota(37);
  second.push_back(1000);
  EXPECT_EQ(pool.add(2, second), 32);
  EXPECT_EQ(pool.table(2), std::vector<int32_t>(held.begin(), held.begin() + 2));
  EXPECT_EQ(pool.committed(2), 32);
  // The last prompt token is always computed: a prompt of exactly 32 cached tokens finds 16.
  EXPECT_EQ(pool.add(3, iota(32)), 16);
  // Another first block: no hit, even though later blocks agree.
  std::vector<int32_t> other = iota(40);
  other[3] = -5;
  EXPECT_EQ(pool.add(4, other), 0);
  EXPECT_EQ(pool.stats().lookups, 4);
  EXPECT_EQ(pool.stats().hit_tokens, 48);
  // Once every sequence ends the cached blocks wait for reuse; a new prompt still finds them.
  for (KvBlocks::SeqId id : {1, 2, 3, 4}) pool.remove(id);
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_EQ(pool.add(5, first), 32);
  EXPECT_EQ(pool.cached_blocks(), 0);
  EXPECT_EQ(pool.used_blocks(), 2);
}

TEST(KvBlocks, CachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  KvBlocks pool(4, 2);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5};
  written(pool, 1, a);
  pool.remove(1);  // [1 2] and [3 4] cached; the chain's head is the most recently used
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_EQ(pool.free_blocks(), 2);
  pool.add(2, std::vector<int32_t>{9, 9, 9, 9, 9, 9});
  ASSERT_TRUE(pool.reserve(2, 6));  // two free blocks, then the chain's tail is evicted
  EXPECT_EQ(pool.stats().evictions, 1);
  EXPECT_EQ(pool.add(3, a), 2);  // the head is still there
  pool.remove(2);
  pool.remove(3);
  // A pool that must evict everything: prompts then find nothing of what was evicted.
  pool.add(4, std::vector<int32_t>{7, 7, 7, 7, 7, 7, 7, 7});
  ASSERT_TRUE(pool.reserve(4, 8));
  EXPECT_EQ(pool.cached_blocks(), 0);
  pool.remove(4);
  EXPECT_EQ(pool.add(5, a), 0);
}

TEST(KvBlocks, AForkSharesBlocksAndCopiesTheOneItWrites) {
  KvBlocks pool(8, 4);
  written(pool, 1, iota(5));
  pool.fork(1, 2);
  EXPECT_EQ(pool.table(2), pool.table(1));
  EXPECT_EQ(pool.committed(2), 5);
  EXPECT_EQ(pool.used_blocks(), 2);
  // The child writes position 5, in the shared partial block: it gets a copy of its own.
  ASSERT_TRUE(pool.reserve(2, 6));
  const auto copies = pool.take_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].first, pool.table(1)[1]);
  EXPECT_EQ(copies[0].second, pool.table(2)[1]);
  EXPECT_EQ(pool.table(2)[0], pool.table(1)[0]);  // the full block stays shared
  EXPECT_TRUE(pool.take_copies().empty());
  // The parent alone holds its partial block now: no copy.
  ASSERT_TRUE(pool.reserve(1, 6));
  EXPECT_TRUE(pool.take_copies().empty());
  EXPECT_EQ(pool.used_blocks(), 3);
}

TEST(KvBlocks, MisuseIsAnError) {
  WICK_EXPECT_ERROR(KvBlocks(0, 16), ShapeError, "KvBlocks", "0 blocks");
  WICK_EXPECT_ERROR(KvBlocks(4, 0), ShapeError, "KvBlocks", "0 positions");
  KvBlocks pool(4, 4);
  WICK_EXPECT_ERROR(pool.add(1, {}), Error, "KvBlocks::add", "empty prompt");
  pool.add(1, iota(3));
  WICK_EXPECT_ERROR(pool.add(1, iota(3)), Error, "KvBlocks::add", "sequence 1", "present");
  WICK_EXPECT_ERROR(pool.reserve(7, 4), Error, "KvBlocks::reserve", "no sequence 7");
  WICK_EXPECT_ERROR(pool.commit(1, iota(1)), Error, "KvBlocks::commit", "0 reserved");
  ASSERT_TRUE(pool.reserve(1, 3));
  pool.commit(1, iota(3));
  WICK_EXPECT_ERROR(pool.reserve(1, 2), Error, "KvBlocks::reserve", "3 committed");
  WICK_EXPECT_ERROR(pool.fork(1, 1), Error, "KvBlocks::fork", "present");
  WICK_EXPECT_ERROR(pool.remove(9), Error, "KvBlocks::remove", "no sequence 9");
  WICK_EXPECT_ERROR((void)pool.table(9), Error, "KvBlocks::table");
}

// Random operations against a simulated cache: each block's slots hold the token written there.
TEST(KvBlocks, RandomOperationsKeepEverySequencesTokens) {
  std::mt19937 rng(11);
  for (const bool prefix : {true, false}) {
    const int64_t bs = 4, total = 24;
    KvBlocks pool(total, bs, prefix);
    std::vector<std::vector<int32_t>> device(static_cast<size_t>(total), std::vector<int32_t>(bs, -1));
    std::map<KvBlocks::SeqId, std::vector<int32_t>> tokens;  // each sequence's committed tokens
    std::map<KvBlocks::SeqId, std::vector<int32_t>> prompts;
    KvBlocks::SeqId next = 0;
    auto read_back = [&](KvBlocks::SeqId id) {
      std::vector<int32_t> got;
      for (int64_t p = 0; p < pool.committed(id); ++p)
        got.push_back(device[size_t(pool.table(id)[size_t(p / bs)])][size_t(p % bs)]);
      return got;
    };
    for (int step = 0; step < 4000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 3 || tokens.empty()) {  // a new sequence; prompts from a few shared beginnings
        std::vector<int32_t> prompt;
        const int32_t family = static_cast<int32_t>(rng() % 3);
        const int n = 1 + static_cast<int>(rng() % 14);
        for (int i = 0; i < n; ++i) prompt.push_back(i < 9 ? family * 100 + i : static_cast<int32_t>(rng() % 5));
        const KvBlocks::SeqId id = next++;
        const int64_t found = pool.add(id, prompt);
        ASSERT_EQ(found % bs, 0);
        ASSERT_LT(found, static_cast<int64_t>(prompt.size()));
        tokens[id] = std::vector<int32_t>(prompt.begin(), prompt.begin() + found);
        prompts[id] = prompt;
        ASSERT_EQ(read_back(id), tokens[id]) << "a prefix hit holds other tokens";
      } else if (op < 7) {  // a step: reserve, write through the copies, commit
        auto it = tokens.begin();
        std::advance(it, rng() % tokens.size());
        const KvBlocks::SeqId id = it->first;
        const int n = 1 + static_cast<int>(rng() % 6);
        if (!pool.reserve(id, pool.committed(id) + n)) continue;
        for (const auto& [src, dst] : pool.take_copies()) device[size_t(dst)] = device[size_t(src)];
        std::vector<int32_t> fresh;
        const std::vector<int32_t>& prompt = prompts[id];
        for (int i = 0; i < n; ++i) {
          const int64_t p = pool.committed(id) + i;  // the prompt's tokens first, then generated ones
          fresh.push_back(p < static_cast<int64_t>(prompt.size()) ? prompt[size_t(p)] : static_cast<int32_t>(rng() % 7));
          device[size_t(pool.table(id)[size_t(p / bs)])][size_t(p % bs)] = fresh.back();
        }
        pool.commit(id, fresh);
        it->second.insert(it->second.end(), fresh.begin(), fresh.end());
      } else if (op < 8) {  // a fork
        auto it = tokens.begin();
        std::advance(it, rng() % tokens.size());
        pool.fork(it->first, next);
        prompts[next] = prompts[it->first];
        tokens[next++] = it->second;
      } else {  // an end
        auto it = tokens.begin();
        std::advance(it, rng() % tokens.size());
        pool.remove(it->first);
        prompts.erase(it->first);
        tokens.erase(it);
      }
      // Every sequence reads its own tokens; the blocks add up.
      int64_t held = 0;
      for (const auto& [id, want] : tokens) {
        ASSERT_EQ(read_back(id), want) << "sequence " << id << " at step " << step;
        held += static_cast<int64_t>(pool.table(id).size());
      }
      ASSERT_EQ(pool.used_blocks() + pool.cached_blocks() + pool.free_blocks(), total);
      ASSERT_LE(pool.used_blocks(), held);
      if (!prefix) {
        ASSERT_EQ(pool.cached_blocks(), 0);
      }
    }
    for (const auto& [id, want] : tokens) pool.remove(id);
    EXPECT_EQ(pool.used_blocks(), 0);
    if (prefix) {
      EXPECT_GT(pool.stats().hit_tokens, 0);
      EXPECT_GT(pool.stats().evictions, 0);
    }
  }
}

}  // namespace
}  // namespace wick::test
