// Loader: one shard of a Dataset as a stream of preprocessed batches, with per-epoch reshuffle and a
// background prefetch thread.
//
// Invariants:
//  - Batch order is a pure function of (dataset, seed, epoch, shard, num_shards, batch, drop_last):
//    the epoch permutation and the ShardPlan rule of sharding.hpp. Over the W shards of a run every
//    event appears exactly once per epoch (drop_last = false), and all shards have the same
//    batches_per_epoch(), so synchronous workers stay in lock-step.
//  - Memory is bounded: at most prefetch_batches finished batches wait in the queue, plus the one
//    being built.
//  - An error in the background thread (a bad file, a non-finite cell) is rethrown by next() in the
//    caller's thread with its full message; the loader then stays failed and rethrows it again.
//  - position() / seek() resume exactly: after seek(p) the batches are those that followed p.
#pragma once

#include "mpigan/core/tensor.hpp"
#include "mpigan/data/batch_source.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/sharding.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mpigan::data {

struct LoaderOptions {
  std::int64_t batch = 128;
  int shard = 0;
  int num_shards = 1;
  std::uint64_t seed = 0;
  int prefetch_batches = 4;  ///< finished batches kept ahead (>= 1)
  bool drop_last = false;    ///< see sharding.hpp for both rules
  bool shuffle = true;       ///< false: file order (validation)
  int read_threads = 1;      ///< threads that read/decode one batch (the prefetch thread is one of them)
};

class Loader final : public BatchSource {
 public:
  using Position = BatchSource::Position;

  /// Throws ConfigError for bad options (shard out of range, too few events for the shards).
  Loader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// The next batch of this shard; false at the end of an epoch (the call after starts the next).
  bool next(Batch& out) override;
  std::int64_t batches_per_epoch() const override { return m_plan.batches_per_epoch(); }
  const ShardPlan& plan() const { return m_plan; }
  const Dataset& dataset() const { return *m_dataset; }
  const LoaderOptions& options() const { return m_options; }
  Position position() const override { return m_position; }
  /// Restart from @p p (0 <= cursor <= batches_per_epoch()).
  void seek(const Position& p) override;

  /// Builds batch @p k of @p epoch synchronously (what the thread does); for tests and tools.
  Batch make_batch(std::int64_t epoch, std::int64_t k, const std::vector<std::uint32_t>& permutation) const;

 private:
  struct Item {
    enum Kind { batch, end_of_epoch, error } kind;
    Batch data;
    std::exception_ptr failure;
  };
  void start(Position from);
  void stop();
  void produce(Position from);
  bool push(Item item);

  std::shared_ptr<const Dataset> m_dataset;
  LoaderOptions m_options;
  ShardPlan m_plan;
  Position m_position;

  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Item> m_queue;
  bool m_stop = false;
  std::exception_ptr m_failed;
};

}  // namespace mpigan::data
