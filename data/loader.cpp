// Loader: prefetch thread, batch assembly, epochs and resume (see loader.hpp).
#include "mpigan/data/loader.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/parallel.hpp"

namespace mpigan::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options)
    : m_dataset(std::move(dataset)),
      m_options(options),
      m_plan(m_dataset ? m_dataset->size() : 0, options.batch, options.num_shards, options.drop_last) {
  std::vector<std::string> problems;
  if (options.shard < 0 || options.shard >= options.num_shards) {
    problems.push_back(fmt::format("loader: shard {} is not in [0, {})", options.shard, options.num_shards));
  }
  if (options.prefetch_batches < 1)
    problems.push_back(fmt::format("loader: prefetch_batches must be >= 1, got {}", options.prefetch_batches));
  if (options.read_threads < 1)
    problems.push_back(fmt::format("loader: read_threads must be >= 1, got {}", options.read_threads));
  MPIGAN_CHECK_PROBLEMS(problems);
  if (m_plan.unused_per_epoch() > 0) {
    spdlog::info(
        "loader '{}' shard {}/{}: drop_last leaves {} of {} events unused per epoch (a different set each epoch)",
        m_dataset->name(), options.shard, options.num_shards, m_plan.unused_per_epoch(), m_dataset->size());
  }
  start(m_position);
}

Loader::~Loader() {
  stop();
}

void Loader::start(Position from) {
  m_stop = false;
  m_thread = std::thread([this, from] { produce(from); });
}

void Loader::stop() {
  {
    std::lock_guard g(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
  m_queue.clear();
}

bool Loader::push(Item item) {
  std::unique_lock g(m_mutex);
  m_cv.wait(g, [&] { return m_stop || static_cast<int>(m_queue.size()) < m_options.prefetch_batches; });
  if (m_stop) return false;
  m_queue.push_back(std::move(item));
  g.unlock();
  m_cv.notify_all();
  return true;
}

Batch Loader::make_batch(std::int64_t epoch, std::int64_t k, const std::vector<std::uint32_t>& permutation) const {
  (void)epoch;
  const auto [begin, end] = m_plan.batch_range(m_options.shard, k);
  const std::int64_t n = end - begin;
  const Dims3 dims = m_dataset->dims();
  const std::int64_t cells = dims.product();
  Batch b;
  b.image = Tensor::empty(Shape::ncdhw(n, 1, dims));
  b.energy = Tensor::empty({n, 1});
  b.ecal = Tensor::empty({n, 1});
  if (m_dataset->has_angle()) b.angle = Tensor::empty({n, 1});
  b.event_ids.resize(static_cast<std::size_t>(n));
  const float escale = m_dataset->preprocess().energy_scale;
  auto item = [&](std::int64_t i) {
    const std::int64_t event = permutation[static_cast<std::size_t>(begin + i)];
    std::span<float> dst(b.image.data() + i * cells, static_cast<std::size_t>(cells));
    b.ecal.data()[i] = static_cast<float>(m_dataset->load(event, dst));
    b.energy.data()[i] = m_dataset->energy(event) * escale;
    if (m_dataset->has_angle()) b.angle.data()[i] = m_dataset->angle(event);
    b.event_ids[static_cast<std::size_t>(i)] = m_dataset->event_id(event);
  };
  if (m_options.read_threads <= 1 || n < 2) {
    for (std::int64_t i = 0; i < n; ++i) item(i);
    return b;
  }
  parallel_for(n, m_options.read_threads, item);
  return b;
}

void Loader::produce(Position from) {
  try {
    for (std::int64_t epoch = from.epoch;; ++epoch) {
      const std::vector<std::uint32_t> perm =
          epoch_permutation(m_dataset->size(), m_options.seed, epoch, m_options.shuffle);
      const std::int64_t first = epoch == from.epoch ? from.cursor : 0;
      for (std::int64_t k = first; k < m_plan.batches_per_epoch(); ++k) {
        {
          std::lock_guard g(m_mutex);
          if (m_stop) return;
        }
        if (!push({Item::batch, make_batch(epoch, k, perm), nullptr})) return;
      }
      if (!push({Item::end_of_epoch, {}, nullptr})) return;
    }
  } catch (...) {
    push({Item::error, {}, std::current_exception()});
  }
}

bool Loader::next(Batch& out) {
  if (m_failed) std::rethrow_exception(m_failed);
  Item item;
  {
    std::unique_lock g(m_mutex);
    m_cv.wait(g, [&] { return !m_queue.empty(); });
    item = std::move(m_queue.front());
    m_queue.pop_front();
  }
  m_cv.notify_all();
  switch (item.kind) {
    case Item::batch:
      out = std::move(item.data);
      ++m_position.cursor;
      return true;
    case Item::end_of_epoch:
      ++m_position.epoch;
      m_position.cursor = 0;
      return false;
    case Item::error:
      m_failed = item.failure;
      std::rethrow_exception(m_failed);
  }
  return false;
}

void Loader::seek(const Position& p) {
  MPIGAN_CHECK(p.epoch >= 0 && p.cursor >= 0 && p.cursor <= m_plan.batches_per_epoch(),
               "loader '{}': cannot seek to epoch {} batch {} ({} batches per epoch)", m_dataset->name(), p.epoch,
               p.cursor, m_plan.batches_per_epoch());
  stop();
  m_failed = nullptr;
  m_position = p;
  start(p);
}

}  // namespace mpigan::data
