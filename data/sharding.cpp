// Shard plan and epoch permutation (see sharding.hpp).
#include "mpigan/data/sharding.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <numeric>

namespace mpigan::data {

ShardPlan::ShardPlan(std::int64_t events, std::int64_t batch, int num_shards, bool drop_last)
    : m_events(events), m_batch(batch), m_shards(num_shards), m_drop_last(drop_last) {
  if (batch < 1) MPIGAN_THROW(ConfigError, "loader: batch must be >= 1, got {}", batch);
  if (num_shards < 1) MPIGAN_THROW(ConfigError, "loader: num_shards must be >= 1, got {}", num_shards);
  const std::int64_t step = batch * num_shards;
  const std::int64_t full = events / step;
  const std::int64_t rest = events % step;
  if (drop_last) {
    if (full == 0) {
      MPIGAN_THROW(ConfigError, "loader: {} events are fewer than one batch of {} for each of {} shards (drop_last)",
                   events, batch, num_shards);
    }
    m_batches = full;
    m_last_step_begin = (full - 1) * step;
    m_last_step_size = step;
    return;
  }
  if (events < num_shards) {
    MPIGAN_THROW(ConfigError, "loader: {} events cannot give each of {} shards at least one event", events, num_shards);
  }
  if (rest == 0) {
    m_batches = full;
  } else if (rest >= num_shards) {
    m_batches = full + 1;
  } else {
    m_batches = full;  // fold the few leftover events into the previous (full) step; full >= 1 here
  }
  m_last_step_begin = (m_batches - 1) * step;
  m_last_step_size = events - m_last_step_begin;
}

std::pair<std::int64_t, std::int64_t> ShardPlan::batch_range(int shard, std::int64_t k) const {
  MPIGAN_CHECK(shard >= 0 && shard < m_shards && k >= 0 && k < m_batches,
               "ShardPlan::batch_range: shard {} of {}, batch {} of {}", shard, m_shards, k, m_batches);
  if (k < m_batches - 1 || m_drop_last) {
    const std::int64_t begin = k * m_batch * m_shards + shard * m_batch;
    return {begin, begin + m_batch};
  }
  const std::int64_t l = m_last_step_size;
  return {m_last_step_begin + shard * l / m_shards, m_last_step_begin + (shard + 1) * l / m_shards};
}

std::int64_t ShardPlan::shard_events(int shard) const {
  if (m_batches == 0) return 0;
  const auto last = batch_range(shard, m_batches - 1);
  return (m_batches - 1) * m_batch + (last.second - last.first);
}

std::int64_t ShardPlan::unused_per_epoch() const {
  return m_drop_last ? m_events - m_batches * m_batch * m_shards : 0;
}

std::vector<std::uint32_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch, bool shuffle) {
  MPIGAN_CHECK(n >= 0 && n <= std::int64_t{0xFFFFFFFF}, "epoch_permutation: {} events out of range", n);
  std::vector<std::uint32_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0u);
  if (!shuffle) return perm;
  Rng rng(seed, mix64(hash_string("mpigan.data.epoch") ^ static_cast<std::uint64_t>(epoch)));
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(i + 1)));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
  }
  return perm;
}

}  // namespace mpigan::data
