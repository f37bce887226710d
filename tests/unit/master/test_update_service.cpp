// The master's update service without MPI: verdicts, rounds, rejections, divergence, the
// canonical BatchNorm state, children whose data ended, the tree rule, and checkpoints.
#include "service_stub.hpp"
#include "test_utils.hpp"

#include "mpigan/train/checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <limits>

using namespace mpigan;
using master::Decision;
using master::Outcome;
using Stub = test::ServiceStub;

namespace {
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("a non-finite update is rejected, never applied, and the child gets the weights back") {
  for (float bad : {kNaN, kInf, -kInf}) {
    Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f, 2.0f}, 2);
    auto p = s.payload({1.0f, bad});
    const Decision d = s.submit(0, p, 0);
    CHECK(d.outcome == Outcome::rejected_nonfinite);
    CHECK(s.weights() == std::vector<float>{1.0f, 2.0f});
    CHECK(s.version() == 0);
    CHECK(s.service->rejected() == 1);
    CHECK(s.service->samples() == 0);
    CHECK(s.service->nonfinite_run() == 1);
    // A finite update afterwards is applied and ends the run of non-finite ones.
    CHECK(s.submit(1, s.payload({1.0f, 1.0f}), 0).outcome == Outcome::applied);
    CHECK(s.service->nonfinite_run() == 0);
    test::check_close("theta", std::vector<double>{s.weights()[0], s.weights()[1]}, std::vector<double>{0.9, 1.9},
                      {1e-6, 1e-6});
  }
}

TEST_CASE("a non-finite BatchNorm state alone rejects the update, and never reaches the canonical state") {
  Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2, Stub::sgd(0.1), {}, 3);
  CHECK(s.submit(0, s.payload({0.0f}, kNaN), 0).outcome == Outcome::rejected_nonfinite);
  CHECK(s.submit(1, s.payload({0.0f}, 4.0f), 0).outcome == Outcome::applied);
  // Only child 1 reported a (finite) state: the canonical state is its state.
  for (float v : s.service->state()) CHECK(v == 4.0f);
  CHECK(s.submit(0, s.payload({0.0f}, 2.0f), 0).outcome == Outcome::applied);
  for (float v : s.service->state()) CHECK(v == 3.0f);  // mean of the latest of each child
  // The reply carries it.
  std::vector<float> r(s.pl().total());
  s.service->pull(1, r);
  for (float v : s.pl().all_state(std::span<const float>(r))) CHECK(v == 3.0f);
}

TEST_CASE("max_nonfinite non-finite updates in a row end training as diverged; a finite one in between resets") {
  for (std::int64_t limit : {1, 3, 5}) {
    CAPTURE(limit);
    Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2, Stub::sgd(0.1), {.max_nonfinite = limit});
    CHECK(s.service->nonfinite_limit() == limit);
    for (std::int64_t k = 1; k < limit; ++k)
      CHECK(s.submit(static_cast<int>(k % 2), s.payload({kNaN}), 0).outcome == Outcome::rejected_nonfinite);
    if (limit > 1) {
      CHECK(s.submit(0, s.payload({1.0f}), 0).outcome == Outcome::applied);  // resets the count
      for (std::int64_t k = 1; k < limit; ++k)
        CHECK(s.submit(1, s.payload({kNaN}), 0).outcome == Outcome::rejected_nonfinite);
    }
    CHECK(s.submit(1, s.payload({kNaN}), 0).outcome == Outcome::diverged);
    CHECK(s.service->nonfinite_run() == limit);
  }
  // The default: 10, or twice the children when that is more.
  CHECK(Stub("algorithm: {name: downpour, warmup: 0}", {1.0f}, 3).service->nonfinite_limit() == 10);
  CHECK(Stub("algorithm: {name: downpour, warmup: 0}", {1.0f}, 8).service->nonfinite_limit() == 16);
}

TEST_CASE("sync: a non-finite update does not join the round; the round closes with the finite ones") {
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f}, 2);
  CHECK(s.submit(0, s.payload({2.0f}), 0).outcome == Outcome::held);
  CHECK(s.submit(1, s.payload({kNaN}), 0).outcome == Outcome::rejected_nonfinite);
  CHECK(s.version() == 0);
  const Decision d = s.submit(1, s.payload({4.0f}), 0);
  CHECK(d.round == std::vector<int>{0, 1});
  test::check_close("theta", std::vector<double>{s.weights()[0]}, std::vector<double>{1.0 - 0.1 * 3.0}, {1e-6, 1e-6});
}

TEST_CASE("sync: a child whose data ended no longer counts; its absence may close the round") {
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f}, 3);
  CHECK(s.submit(0, s.payload({2.0f}), 0).outcome == Outcome::held);
  CHECK(s.service->child_done(2).round.empty());  // 2 of 2 active needed, 1 held
  const Decision d = s.submit(1, s.payload({4.0f}), 0);
  CHECK(d.round == std::vector<int>{0, 1});
  CHECK(s.version() == 1);
  CHECK(s.submit(0, s.payload({1.0f}), 1).outcome == Outcome::held);
  const Decision e = s.service->child_done(1);  // now the held update of child 0 is the whole round
  CHECK(e.round == std::vector<int>{0});
  CHECK(s.version() == 2);
  test::check_close("theta", std::vector<double>{s.weights()[0]}, std::vector<double>{1.0 - 0.3 - 0.1}, {1e-6, 1e-6});
  // Asynchronous rules have no rounds.
  Stub a("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2);
  CHECK(a.service->child_done(0).round.empty());
}

TEST_CASE("samples count the applied and held updates, not the rejected ones") {
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f}, 2);
  s.submit(0, s.payload({1.0f}), 0, true, false, 16);
  s.submit(1, s.payload({kNaN}), 0, true, false, 16);
  s.submit(1, s.payload({1.0f}), 0, true, false, 8);
  CHECK(s.service->samples() == 24);
  CHECK(s.service->applied() == 2);
  CHECK(s.service->rejected() == 1);
}

TEST_CASE("the tree's top master adds sub-masters' changes, or averages them in rounds") {
  Stub a("algorithm: {name: downpour, warmup: 0}", {1.0f, 2.0f}, 2, Stub::sgd(0.1), {.tree_top = true});
  CHECK(a.submit(0, a.payload({0.5f, -1.0f}), 0).outcome == Outcome::applied);
  CHECK(a.weights() == std::vector<float>{1.5f, 1.0f});
  // The reply is the new weights, written in the same pass.
  CHECK(a.slots[0][0] == 1.5f);
  CHECK(a.slots[0][1] == 1.0f);
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f, 2.0f}, 2, Stub::sgd(0.1),
         {.tree_top = true, .fuse_first_reply = false});
  CHECK(s.submit(1, s.payload({1.0f, 0.0f}), 0).outcome == Outcome::held);
  const Decision d = s.submit(0, s.payload({0.0f, 2.0f}), 0);
  CHECK(d.round == std::vector<int>{1, 0});
  CHECK(s.weights() == std::vector<float>{1.5f, 3.0f});
}

TEST_CASE("every rule: saved and restored, the service continues with the same bits") {
  const auto dir = std::filesystem::temp_directory_path() / "mpigan-test-service";
  std::filesystem::create_directories(dir);
  for (const auto& name : algos::algorithm_names()) {
    CAPTURE(name);
    const std::string yaml = fmt::format("algorithm: {{name: {}}}", name);
    const auto rmsprop = nn::OptimizerConfig::defaults("rmsprop");
    Rng rng(5);
    std::vector<std::vector<float>> g(8, std::vector<float>(5));
    for (auto& v : g) rng.fill_uniform(v, -1.0f, 1.0f);
    auto feed = [&](Stub& s, int from, int to) {
      for (int k = from; k < to; ++k) {
        const int w = k % 2;
        s.submit(w, s.payload(g[static_cast<std::size_t>(k)], 0.25f * static_cast<float>(k)), s.version() - w);
      }
    };
    Stub a(yaml, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, 2, rmsprop, {}, 2);
    feed(a, 0, 8);
    Stub b(yaml, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, 2, rmsprop, {}, 2);
    feed(b, 0, 4);
    const std::string path = (dir / (name + ".h5")).string();
    {
      train::CheckpointWriter w(path);
      b.service->save(w);
      w.commit();
    }
    Stub c(yaml, {9.0f, 9.0f, 9.0f, 9.0f, 9.0f}, 2, rmsprop, {}, 2);
    c.service->load(train::CheckpointReader(path), path);
    CHECK(c.version() == b.version());
    // (The children's latest BN states are not checkpointed, the canonical state is: the states
    // differ until every child has reported again; the weights may not differ at all.)
    feed(c, 4, 8);
    const auto x = a.weights(), y = c.weights();
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    CHECK(a.version() == c.version());
  }
  std::filesystem::remove_all(dir);
}
