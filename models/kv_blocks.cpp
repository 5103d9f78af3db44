// The paged KV cache's bookkeeping (include/wick/models/kv_blocks.h). A block is in one of three
// states: held (in some table: refs > 0), cached (no table, but keyed in the prefix cache: it waits
// in `evictable_`, least recently used first), or free. A keyed block is full and never written
// again: a sequence writes only into blocks it alone holds (reserve() copies a shared one first).
#include "wick/models/kv_blocks.h"

#include <algorithm>

#include "wick/error.h"

namespace wick::models {

namespace {

// SplitMix64's finaliser: the key of a block mixes its parent's identity and its tokens.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

KvBlocks::KvBlocks(int64_t blocks, int64_t block_size, bool prefix_cache)
    : block_size_(block_size), prefix_cache_(prefix_cache) {
  if (blocks < 1 || blocks > (int64_t{1} << 31) - 1 || block_size < 1 || block_size > (int64_t{1} << 20))
    throw ShapeError(detail::str_cat("KvBlocks: a pool of ", blocks, " blocks of ", block_size,
                                     " positions (1 to 2^31 - 1 blocks of 1 to 2^20 positions)"));
  blocks_.resize(static_cast<size_t>(blocks));
  free_.reserve(static_cast<size_t>(blocks));
  for (int64_t b = blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));  // block 0 first
}

KvBlocks::Seq& KvBlocks::seq(SeqId id, const char* op) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) throw Error(detail::str_cat("KvBlocks::", op, ": no sequence ", id));
  return it->second;
}

const KvBlocks::Seq& KvBlocks::seq(SeqId id, const char* op) const { return const_cast<KvBlocks*>(this)->seq(id, op); }

const std::vector<int32_t>& KvBlocks::table(SeqId id) const { return seq(id, "table").table; }
int64_t KvBlocks::committed(SeqId id) const { return seq(id, "committed").committed; }

uint64_t KvBlocks::key_of(int32_t parent, std::span<const int32_t> tokens) const {
  uint64_t h = parent < 0 ? mix(0) : mix((uint64_t(uint32_t(parent)) << 32) | blocks_[size_t(parent)].generation);
  for (const int32_t t : tokens) h = mix(h ^ uint32_t(t));
  return h;
}

int32_t KvBlocks::find(int32_t parent, std::span<const int32_t> tokens) const {
  const auto [first, last] = cache_.equal_range(key_of(parent, tokens));
  for (auto it = first; it != last; ++it) {
    const Block& b = blocks_[size_t(it->second)];
    const bool same_parent =
        b.parent == parent && (parent < 0 || b.parent_generation == blocks_[size_t(parent)].generation);
    if (same_parent && std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) return it->second;
  }
  return -1;
}

void KvBlocks::hold(int32_t b) {
  Block& block = blocks_[size_t(b)];
  if (block.refs++ == 0) {
    ++used_;
    if (block.keyed) evictable_.erase(block.lru);
  }
}

void KvBlocks::drop(int32_t b) {
  Block& block = blocks_[size_t(b)];
  if (--block.refs > 0) return;
  --used_;
  if (block.keyed && prefix_cache_) {
    block.lru = evictable_.insert(evictable_.end(), b);
    return;
  }
  free_.push_back(b);
}

int32_t KvBlocks::take_block() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    b = evictable_.front();
    evictable_.pop_front();
    Block& block = blocks_[size_t(b)];
    const auto [first, last] = cache_.equal_range(block.key);
    for (auto it = first; it != last; ++it)
      if (it->second == b) {
        cache_.erase(it);
        break;
      }
    block.keyed = false;
    block.tokens.clear();
    ++stats_.evictions;
  } else {
    return -1;
  }
  Block& block = blocks_[size_t(b)];
  ++block.generation;  // new contents: blocks keyed after its old ones no longer follow it
  block.refs = 1;
  ++used_;
  return b;
}

int64_t KvBlocks::add(SeqId id, std::span<const int32_t> prompt) {
  if (seqs_.count(id) != 0) throw Error(detail::str_cat("KvBlocks::add: sequence ", id, " is present already"));
  if (prompt.empty()) throw Error(detail::str_cat("KvBlocks::add: sequence ", id, " has an empty prompt"));
  Seq s;
  if (prefix_cache_) {
    ++stats_.lookups;
    const auto reach = static_cast<int64_t>(prompt.size()) - 1;
    stats_.looked_tokens += reach / block_size_ * block_size_;
    int32_t parent = -1;
    while (s.committed + block_size_ <= reach) {
      const int32_t b = find(parent, prompt.subspan(size_t(s.committed), size_t(block_size_)));
      if (b < 0) break;
      hold(b);
      s.table.push_back(b);
      s.committed += block_size_;
      parent = b;
    }
    stats_.hit_tokens += s.committed;
  }
  const int64_t found = s.committed;
  seqs_.emplace(id, std::move(s));
  return found;
}

bool KvBlocks::reserve(SeqId id, int64_t positions) {
  Seq& s = seq(id, "reserve");
  if (positions < s.committed)
    throw Error(detail::str_cat("KvBlocks::reserve: ", positions, " positions for sequence ", id, ", which has ",
                                s.committed, " committed"));
  const int64_t want = blocks_for(positions), have = static_cast<int64_t>(s.table.size());
  // Blocks from the one the next position lands in: a shared one is replaced by the sequence's own.
  const int64_t first_write = s.committed / block_size_;
  int64_t shared = 0;
  for (int64_t i = first_write; i < std::min(have, want); ++i) shared += blocks_[size_t(s.table[size_t(i)])].refs > 1;
  const int64_t needed = std::max<int64_t>(want - have, 0) + shared;
  if (needed > free_blocks() + cached_blocks()) return false;
  for (int64_t i = first_write; i < std::min(have, want); ++i) {
    const int32_t old = s.table[size_t(i)];
    if (blocks_[size_t(old)].refs <= 1) continue;
    const int32_t fresh = take_block();
    if (i == first_write && s.committed % block_size_ != 0) copies_.emplace_back(old, fresh);
    drop(old);
    s.table[size_t(i)] = fresh;
  }
  while (static_cast<int64_t>(s.table.size()) < want) s.table.push_back(take_block());
  return true;
}

void KvBlocks::commit(SeqId id, std::span<const int32_t> tokens) {
  Seq& s = seq(id, "commit");
  const int64_t end = s.committed + static_cast<int64_t>(tokens.size());
  if (end > static_cast<int64_t>(s.table.size()) * block_size_)
    throw Error(detail::str_cat("KvBlocks::commit: ", tokens.size(), " tokens after the ", s.committed,
                                " committed of sequence ", id, " pass its ", s.table.size() * size_t(block_size_),
                                " reserved positions"));
  for (const int32_t t : tokens) {
    s.partial.push_back(t);
    ++s.committed;
    if (static_cast<int64_t>(s.partial.size()) < block_size_) continue;
    // A block filled: it enters the prefix cache where its chain is there up to it, and no block
    // holds the same tokens after the same parent already (another sequence computed them too).
    const auto index = size_t(s.committed / block_size_ - 1);
    const int32_t b = s.table[index], parent = index == 0 ? -1 : s.table[index - 1];
    Block& block = blocks_[size_t(b)];
    if (prefix_cache_ && !block.keyed && (parent < 0 || blocks_[size_t(parent)].keyed) && find(parent, s.partial) < 0) {
      block.keyed = true;
      block.key = key_of(parent, s.partial);
      block.parent = parent;
      block.parent_generation = parent < 0 ? 0 : blocks_[size_t(parent)].generation;
      block.tokens = s.partial;
      cache_.emplace(block.key, b);
    }
    s.partial.clear();
  }
}

void KvBlocks::fork(SeqId parent, SeqId child) {
  const Seq& p = seq(parent, "fork");
  if (seqs_.count(child) != 0) throw Error(detail::str_cat("KvBlocks::fork: sequence ", child, " is present already"));
  Seq c = p;
  for (const int32_t b : c.table) hold(b);
  seqs_.emplace(child, std::move(c));
}

void KvBlocks::remove(SeqId id) {
  Seq& s = seq(id, "remove");
  // The last blocks first: a chain's first blocks (a shared system prompt) are then the most
  // recently used, and the last to be evicted.
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) drop(*it);
  seqs_.erase(id);
}

std::vector<std::pair<int32_t, int32_t>> KvBlocks::take_copies() { return std::exchange(copies_, {}); }

}  // namespace wick::models
