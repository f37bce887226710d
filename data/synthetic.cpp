// Synthetic toy showers (synthetic.hpp): the per-event generator, a pure function of (seed, event),
// and SyntheticSource, which shards and orders them per epoch like the file Loader.
#include "mpigan/data/synthetic.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <cmath>

namespace mpigan::data {

void synthetic_event(std::uint64_t seed, std::int64_t e, float* image, float& energy, float& ecal) {
  Rng rng(seed, mix64(static_cast<std::uint64_t>(e) ^ 0x70F5A3ull));
  const float x = rng.uniform(0.5f, 3.0f);
  const double zmax = 1.5 + x;
  double sum = 0.0;
  constexpr std::int64_t S = kSyntheticSide;
  for (std::int64_t d = 0; d < S; ++d)
    for (std::int64_t h = 0; h < S; ++h)
      for (std::int64_t w = 0; w < S; ++w) {
        const double r2 = (d - 3.5) * (d - 3.5) + (h - 3.5) * (h - 3.5);
        const double v =
            std::max(0.0, std::exp(-r2 / 2.0 - (w - zmax) * (w - zmax) / 4.0) * (1.0 + 0.03 * rng.normal()));
        image[(d * S + h) * S + w] = static_cast<float>(v);
        sum += v;
      }
  const double scale = 2.0 * x / sum;
  for (std::int64_t j = 0; j < S * S * S; ++j) image[j] = static_cast<float>(image[j] * scale);
  energy = x;
  ecal = 2.0f * x;
}

SyntheticSource::SyntheticSource(const SyntheticOptions& o)
    : m_options(o), m_plan(o.count, o.batch, o.num_shards, /*drop_last=*/true) {
  MPIGAN_CHECK(o.shard >= 0 && o.shard < o.num_shards, "synthetic data: shard {} of {}", o.shard, o.num_shards);
}

void SyntheticSource::seek(const Position& p) {
  MPIGAN_CHECK(p.cursor >= 0 && p.cursor <= batches_per_epoch(), "synthetic data: cursor {} outside [0, {}]", p.cursor,
               batches_per_epoch());
  m_pos = p;
}

bool SyntheticSource::next(Batch& out) {
  if (m_pos.cursor >= batches_per_epoch()) {
    ++m_pos.epoch;
    m_pos.cursor = 0;
    return false;
  }
  if (m_perm_epoch != m_pos.epoch) {
    m_perm = epoch_permutation(m_options.count, m_options.order_seed, m_pos.epoch, m_options.shuffle);
    m_perm_epoch = m_pos.epoch;
  }
  const auto [b, e] = m_plan.batch_range(m_options.shard, m_pos.cursor);
  const std::int64_t n = e - b;
  constexpr std::int64_t S = kSyntheticSide;
  out.image = Tensor::empty({n, 1, S, S, S});
  out.energy = Tensor::empty({n, 1});
  out.ecal = Tensor::empty({n, 1});
  out.angle = Tensor();
  out.event_ids.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t ev = m_options.first + m_perm[static_cast<std::size_t>(b + i)];
    if (m_options.skip_count > 0 && ev >= m_options.skip_first) ev += m_options.skip_count;
    synthetic_event(m_options.seed, ev, out.image.data() + i * S * S * S, out.energy.data()[i], out.ecal.data()[i]);
    out.event_ids[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(ev);
  }
  ++m_pos.cursor;
  return true;
}

}  // namespace mpigan::data
