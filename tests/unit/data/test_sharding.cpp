// The sharding rule of sharding.hpp: every event exactly once per epoch over W shards, the same
// number of batches on every shard, near-equal batch sizes; and the epoch permutation.
#include <doctest/doctest.h>

#include "mpigan/core/error.hpp"
#include "mpigan/data/sharding.hpp"

#include <algorithm>
#include <set>
#include <vector>

using namespace mpigan;
using namespace mpigan::data;

TEST_CASE("sharding: every event exactly once per epoch, lock-step batches, sizes differ by at most one") {
  // Uneven N, batch sizes and shard counts that do not divide them, including the fold case
  // (0 < N mod (W B) < W) and N barely above W.
  for (std::int64_t n : {7, 10, 64, 97, 100, 101, 1000, 1003}) {
    for (std::int64_t b : {1, 3, 8, 32}) {
      for (int w : {1, 2, 3, 4, 7}) {
        if (n < w) continue;
        CAPTURE(n);
        CAPTURE(b);
        CAPTURE(w);
        const ShardPlan plan(n, b, w, false);
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        std::int64_t min_last = n, max_last = 0;
        for (int s = 0; s < w; ++s) {
          std::int64_t total = 0;
          for (std::int64_t k = 0; k < plan.batches_per_epoch(); ++k) {
            const auto [lo, hi] = plan.batch_range(s, k);
            REQUIRE(lo >= 0);
            REQUIRE(hi <= n);
            REQUIRE(hi > lo);  // never an empty batch
            if (k + 1 < plan.batches_per_epoch()) CHECK(hi - lo == b);
            if (k + 1 == plan.batches_per_epoch()) {
              min_last = std::min(min_last, hi - lo);
              max_last = std::max(max_last, hi - lo);
              CHECK(hi - lo <= b + 1);
            }
            for (std::int64_t p = lo; p < hi; ++p) ++seen[static_cast<std::size_t>(p)];
            total += hi - lo;
          }
          CHECK(total == plan.shard_events(s));
        }
        CHECK(max_last - min_last <= 1);
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
    }
  }
}

TEST_CASE("sharding: drop_last gives full batches only and reports the unused events") {
  const ShardPlan plan(1003, 32, 3, true);
  CHECK(plan.batches_per_epoch() == 10);  // floor(1003 / 96)
  CHECK(plan.unused_per_epoch() == 1003 - 960);
  std::set<std::int64_t> seen;
  for (int s = 0; s < 3; ++s) {
    for (std::int64_t k = 0; k < plan.batches_per_epoch(); ++k) {
      const auto [lo, hi] = plan.batch_range(s, k);
      CHECK(hi - lo == 32);
      for (auto p = lo; p < hi; ++p) CHECK(seen.insert(p).second);
    }
  }
  CHECK(seen.size() == 960);
}

TEST_CASE("sharding: the fold rule and the documented examples") {
  // N = 100, B = 8, W = 3: 4 full steps of 24 = 96, R = 4 >= W: a fifth step of 4 split 1/1/2.
  const ShardPlan a(100, 8, 3, false);
  CHECK(a.batches_per_epoch() == 5);
  CHECK(a.shard_events(0) == 33);
  CHECK(a.shard_events(1) == 33);
  CHECK(a.shard_events(2) == 34);
  // N = 98, B = 8, W = 3: R = 2 < W, folded into the fourth step: 4 batches, last ones 8 or 9.
  const ShardPlan b(98, 8, 3, false);
  CHECK(b.batches_per_epoch() == 4);
  CHECK(b.batch_range(0, 3).second - b.batch_range(0, 3).first == 8);
  CHECK(b.batch_range(2, 3).second - b.batch_range(2, 3).first == 9);
}

TEST_CASE("sharding: bad plans are configuration errors") {
  CHECK_THROWS_AS(ShardPlan(2, 8, 3, false), ConfigError);  // fewer events than shards
  CHECK_THROWS_AS(ShardPlan(20, 8, 3, true), ConfigError);  // no full global batch
  CHECK_THROWS_AS(ShardPlan(20, 0, 1, false), ConfigError);
  CHECK_THROWS_AS(ShardPlan(20, 4, 0, false), ConfigError);
}

TEST_CASE("epoch permutation: a permutation, reproducible from the seed, different each epoch") {
  const auto p0 = epoch_permutation(1000, 42, 0, true);
  const auto p0b = epoch_permutation(1000, 42, 0, true);
  const auto p1 = epoch_permutation(1000, 42, 1, true);
  const auto q0 = epoch_permutation(1000, 43, 0, true);
  CHECK(p0 == p0b);
  CHECK(p0 != p1);
  CHECK(p0 != q0);
  auto sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  const auto identity = epoch_permutation(5, 42, 3, false);
  CHECK(identity == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
}
