// DataPlan (sources.hpp): the experiment's datasets or the synthetic showers as sharded training
// and validation batch sources.
#include "mpigan/train/sources.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/data/synthetic.hpp"
#include "mpigan/train/trainer.hpp"

namespace mpigan::train {
namespace {

/// The synthetic training events [lo, hi) held out as the validation fold (data.cross_validation).
std::pair<std::int64_t, std::int64_t> synthetic_fold(const ExperimentConfig& e) {
  if (e.data.folds < 2) return {0, 0};
  const std::int64_t n = e.synthetic.events, k = e.data.folds, f = e.data.fold;
  return {f * n / k, (f + 1) * n / k};
}

}  // namespace

DataPlan DataPlan::open(const ExperimentConfig& e, bool prepare) {
  DataPlan p;
  p.m_experiment = &e;
  if (e.synthetic.enabled) return p;
  p.m_sets = prepare ? prepare_datasets(e) : data::open_datasets(e.data);
  return p;
}

std::string DataPlan::describe() const {
  if (m_experiment->synthetic.enabled && m_experiment->data.folds >= 2) {
    const auto [lo, hi] = synthetic_fold(*m_experiment);
    return fmt::format("synthetic toy showers: {} training, {} held-out events (fold {} of {}: events [{}, {}))",
                       m_experiment->synthetic.events - (hi - lo), hi - lo, m_experiment->data.fold,
                       m_experiment->data.folds, lo, hi);
  }
  if (m_experiment->synthetic.enabled)
    return fmt::format("synthetic toy showers: {} training, {} held-out events", m_experiment->synthetic.events,
                       m_experiment->synthetic.validation_events);
  return fmt::format(
      "{} training events{}", m_sets.train->size(),
      m_sets.validation ? fmt::format(", {} validation events", m_sets.validation->size()) : std::string());
}

std::unique_ptr<data::BatchSource> DataPlan::train(std::int64_t batch, int shard, int shards) const {
  const ExperimentConfig& e = *m_experiment;
  if (e.synthetic.enabled) {
    data::SyntheticOptions o;
    o.seed = e.synthetic.seed;
    o.first = 0;
    o.count = e.synthetic.events;
    if (e.data.folds >= 2) {  // the held-out fold is jumped over
      const auto [lo, hi] = synthetic_fold(e);
      o.skip_first = lo;
      o.skip_count = hi - lo;
      o.count -= hi - lo;
    }
    o.batch = batch;
    o.shard = shard;
    o.num_shards = shards;
    o.order_seed = e.seed;
    return std::make_unique<data::SyntheticSource>(o);
  }
  data::LoaderOptions lo;
  lo.batch = batch;
  lo.shard = shard;
  lo.num_shards = shards;
  lo.seed = e.seed;
  lo.prefetch_batches = e.prefetch;
  lo.read_threads = e.read_threads;
  lo.drop_last = true;  // one batch shape: the networks are planned once
  auto loader = std::make_unique<data::Loader>(m_sets.train, lo);
  MPIGAN_CHECK(loader->batches_per_epoch() > 0, "data: shard {} of {} gets no full batch of {} from {} training events",
               shard, shards, batch, m_sets.train->size());
  return loader;
}

std::unique_ptr<data::BatchSource> DataPlan::validation(std::int64_t batch) const {
  const ExperimentConfig& e = *m_experiment;
  if (e.synthetic.enabled) {
    const auto [fold_lo, fold_hi] = synthetic_fold(e);
    const bool cv = e.data.folds >= 2;
    if ((cv ? fold_hi - fold_lo : e.synthetic.validation_events) < batch) return nullptr;
    data::SyntheticOptions o;
    o.seed = e.synthetic.seed;
    o.first = cv ? fold_lo : e.synthetic.events;  // disjoint from the training events
    o.count = cv ? fold_hi - fold_lo : e.synthetic.validation_events;
    o.batch = batch;
    o.shuffle = false;
    return std::make_unique<data::SyntheticSource>(o);
  }
  const auto& set = m_sets.validation ? m_sets.validation : m_sets.train;
  if (set->size() < batch) return nullptr;
  data::LoaderOptions vo;
  vo.batch = batch;
  vo.seed = e.seed;
  vo.shuffle = false;
  vo.prefetch_batches = 1;
  vo.drop_last = true;
  return std::make_unique<data::Loader>(set, vo);
}

bool next_batch(data::BatchSource& loader, data::Batch& b, std::int64_t epochs) {
  while (true) {
    if (loader.next(b)) return true;
    if (loader.position().epoch >= epochs) return false;
  }
}

}  // namespace mpigan::train
