// Synthetic toy showers for the tiny-8 sandbox model (image 8x8x8, no files): a Gaussian blob on
// the axis whose depth profile peaks deeper for higher energy, with sum(cells) = 2 x for the
// condition x = E/100 ~ U(0.5, 3), and 3% noise per cell. A generator must learn both the energy
// scale and the shape. Event e of a set is a pure function of (seed, e); a source takes events
// [first, first + count) (train and held-out validation sets are disjoint ranges), shards them and
// orders each epoch exactly as the file Loader does (sharding.hpp).
#pragma once

#include "mpigan/data/batch_source.hpp"
#include "mpigan/data/sharding.hpp"

#include <cstdint>

namespace mpigan::data {

constexpr std::int64_t kSyntheticSide = 8;

/// Fills one event: @p image has 8*8*8 cells (x, y, depth).
void synthetic_event(std::uint64_t seed, std::int64_t e, float* image, float& energy, float& ecal);

struct SyntheticOptions {
  std::uint64_t seed = 1;  ///< the events
  std::int64_t first = 0, count = 4096;
  /// Events [skip_first, skip_first + skip_count) are left out: the source's count events are
  /// first, first + 1, ... with that range jumped over (a cross-validation fold held out).
  std::int64_t skip_first = 0, skip_count = 0;
  std::int64_t batch = 16;
  int shard = 0, num_shards = 1;
  std::uint64_t order_seed = 1;  ///< epoch permutations
  bool shuffle = true;
};

class SyntheticSource final : public BatchSource {
 public:
  explicit SyntheticSource(const SyntheticOptions& o);
  bool next(Batch& out) override;
  Position position() const override { return m_pos; }
  void seek(const Position& p) override;
  std::int64_t batches_per_epoch() const override { return m_plan.batches_per_epoch(); }

 private:
  SyntheticOptions m_options;
  ShardPlan m_plan;
  Position m_pos;
  std::vector<std::uint32_t> m_perm;
  std::int64_t m_perm_epoch = -1;
};

}  // namespace mpigan::data
