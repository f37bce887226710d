// Sharding and per-epoch order: which events each of W workers sees in each batch of an epoch.
//
// The rule (documented in docs/data.md, proved by tests/unit/data/test_sharding.cpp):
//  - Every epoch has one permutation of the N events, the same on all shards: a Fisher-Yates
//    shuffle driven by Rng(seed, stream(epoch)); identity when shuffling is off.
//  - The permutation is cut into K global steps of W*B positions; in step k shard s takes positions
//    [k*W*B + s*B, k*W*B + (s+1)*B). Every shard has the same K batches per epoch (lock-step).
//  - drop_last = false: the last step takes all that is left, L events, and gives shard s
//    positions [floor(s*L/W), floor((s+1)*L/W)) of it, so last batches differ by at most one event
//    between shards. When the leftover R = N mod (W*B) is smaller than W (some shard would get an
//    empty batch), it is folded into the previous step instead: those last batches have B or B+1
//    events. Every event is in exactly one batch of one shard per epoch.
//  - drop_last = true: K = floor(N / (W*B)) full batches per shard; the N - K*W*B events at the end
//    of the permutation are not used in that epoch (a different set each epoch); the count is
//    reported by unused_per_epoch().
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace mpigan::data {

class ShardPlan {
 public:
  /// Throws ConfigError when there are too few events for W shards (or for one full global batch
  /// with drop_last), or when batch or num_shards < 1.
  ShardPlan(std::int64_t events, std::int64_t batch, int num_shards, bool drop_last);

  std::int64_t events() const { return m_events; }
  std::int64_t batch() const { return m_batch; }
  int num_shards() const { return m_shards; }
  bool drop_last() const { return m_drop_last; }
  /// K: the same for every shard.
  std::int64_t batches_per_epoch() const { return m_batches; }
  /// Positions [first, second) in the epoch permutation of batch @p k of shard @p shard.
  std::pair<std::int64_t, std::int64_t> batch_range(int shard, std::int64_t k) const;
  /// Events shard @p shard sees per epoch.
  std::int64_t shard_events(int shard) const;
  /// Events not used in an epoch (only with drop_last).
  std::int64_t unused_per_epoch() const;

 private:
  std::int64_t m_events;
  std::int64_t m_batch;
  int m_shards;
  bool m_drop_last;
  std::int64_t m_batches = 0;
  std::int64_t m_last_step_begin = 0;  ///< permutation position where the last global step starts
  std::int64_t m_last_step_size = 0;   ///< L
};

/// The epoch's permutation of [0, n): identical for every shard given (seed, epoch).
std::vector<std::uint32_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch, bool shuffle);

}  // namespace mpigan::data
