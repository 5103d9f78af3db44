// The bookkeeping of a paged KV cache: a pool of blocks of `block_size` positions each, shared by
// reference count; per sequence, a block table (the pool's blocks that hold its positions, in
// order); and a prefix cache of full blocks keyed by the chain of their tokens, so that a sequence
// whose prompt begins as an earlier one's did reuses that one's keys and values instead of
// computing them again. Blocks are numbers here: the device memory they stand for is the paged
// cache's, which reads the tables. Not thread-safe: the engine's scheduler owns it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wick::models {

class KvBlocks {
 public:
  using SeqId = int64_t;

  // A pool of `blocks` blocks (at least 1) of `block_size` positions (at least 1); ShapeError
  // otherwise. Without `prefix_cache`, a sequence's blocks are free again as soon as it ends.
  KvBlocks(int64_t blocks, int64_t block_size, bool prefix_cache = true);

  int64_t block_size() const { return block_size_; }
  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Blocks in some sequence's table; blocks in no table that the prefix cache keeps (reused on a
  // hit, evicted least recently used first when a block is needed); blocks holding nothing.
  int64_t used_blocks() const { return used_; }
  int64_t cached_blocks() const { return static_cast<int64_t>(evictable_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Blocks a sequence of `positions` positions needs.
  int64_t blocks_for(int64_t positions) const { return (positions + block_size_ - 1) / block_size_; }

  // A new sequence `id` whose first tokens will be `prompt`: its table starts with the cached
  // blocks of the longest prefix of prompt that the cache holds in whole blocks, at most
  // prompt.size() - 1 positions (the last prompt token is always computed: its logits are the
  // first new token's). Returns the positions found, which count as committed. An Error for an id
  // already present or an empty prompt; nothing is allocated beyond the blocks found.
  int64_t add(SeqId id, std::span<const int32_t> prompt);
  // Makes sequence id's table hold `positions` positions (in all), taking free blocks, then cached
  // ones least recently used first; a shared block the sequence will write into is replaced by a
  // copy of its own (take_copies() lists those). false, with nothing changed, where the pool
  // cannot give the blocks.
  bool reserve(SeqId id, int64_t positions);
  // `tokens`, whose keys and values the cache now holds at the positions after those committed
  // before (within the reserved ones): each block they fill enters the prefix cache.
  void commit(SeqId id, std::span<const int32_t> tokens);
  // A new sequence `child` sharing every block of `parent` and its committed positions (parallel
  // samples of one prompt). Error for an unknown parent or a child already present.
  void fork(SeqId parent, SeqId child);
  // Ends sequence id (an unknown one is an Error): its blocks go back, those the prefix cache keeps
  // at the most recently used end.
  void remove(SeqId id);

  bool contains(SeqId id) const { return seqs_.count(id) != 0; }
  // The blocks holding sequence id's positions: position p lies in block table[p / block_size]
  // at slot p % block_size.
  const std::vector<int32_t>& table(SeqId id) const;
  // Positions of sequence id whose keys and values are written (committed, or found in the cache).
  int64_t committed(SeqId id) const;
  // The copies (source block, destination block) that reserve() decided, in order, taken once: the
  // paged cache must copy those blocks' keys and values before the step that writes them.
  std::vector<std::pair<int32_t, int32_t>> take_copies();

  struct Stats {
    int64_t lookups = 0;       // prompts looked up in the prefix cache
    int64_t looked_tokens = 0; // their tokens that a hit could have covered
    int64_t hit_tokens = 0;    // positions found in the cache
    int64_t evictions = 0;     // cached blocks taken for other positions
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Block {
    int32_t refs = 0;
    uint32_t generation = 0;  // bumped when the block is given new contents
    bool keyed = false;       // in the prefix cache under `key`
    uint64_t key = 0;
    int32_t parent = -1;  // the block before it in its chain, and that block's generation
    uint32_t parent_generation = 0;
    std::vector<int32_t> tokens;  // a keyed block's tokens, compared on every hit
    std::list<int32_t>::iterator lru;
  };
  struct Seq {
    std::vector<int32_t> table;
    int64_t committed = 0;
    std::vector<int32_t> partial;  // committed tokens of the last block, not yet full
  };

  Seq& seq(SeqId id, const char* op);
  const Seq& seq(SeqId id, const char* op) const;
  int32_t take_block();
  void hold(int32_t b);
  void drop(int32_t b);
  // The cached block for `tokens` after the block `parent` (-1: the first), or -1.
  int32_t find(int32_t parent, std::span<const int32_t> tokens) const;
  uint64_t key_of(int32_t parent, std::span<const int32_t> tokens) const;

  int64_t block_size_;
  bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;       // holding nothing
  std::list<int32_t> evictable_;    // keyed, in no table: least recently used first
  std::unordered_multimap<uint64_t, int32_t> cache_;  // key -> keyed block
  std::unordered_map<SeqId, Seq> seqs_;
  std::vector<std::pair<int32_t, int32_t>> copies_;
  int64_t used_ = 0;
  Stats stats_;
};

}  // namespace wick::models
