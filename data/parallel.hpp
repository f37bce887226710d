// parallel_for: run body(i) for i in [0, n) on a few std::threads (the caller is one of them).
//
// Invariants: each index runs exactly once; the first exception thrown by any body is rethrown in
// the caller after all threads have stopped (the remaining indices are abandoned). Which thread
// runs which index is not deterministic, so bodies must write only to their own outputs.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mpigan::data {

template <class Body>
void parallel_for(std::int64_t n, int threads, Body&& body) {
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      for (std::int64_t i; (i = next.fetch_add(1)) < n;) body(i);
    } catch (...) {
      std::lock_guard g(error_mutex);
      if (!error) error = std::current_exception();
      next.store(n);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

/// Threads to use for @p requested (0 = hardware concurrency, at most 16).
inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(hw == 0 ? 1 : (hw > 16 ? 16 : hw));
}

}  // namespace mpigan::data
