// The master's update service without MPI: verdicts, rounds, rejections, divergence, the
// canonical BatchNorm state, children whose data ended, the tree rule, a sub-master's change
// against its parent, and checkpoints.
#include "service_stub.hpp"
#include "test_utils.hpp"

#include "mpigan/master/parent_change.hpp"
#include "mpigan/train/checkpoint.hpp"

#include <cmath>
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
  // Only child 1 reported a (finite) state, from the state it was sent: its state is the canonical one.
  for (float v : s.service->state()) CHECK(v == 4.0f);
  // Child 0 was sent 0 before child 1's report: merged as s_w + a (s - s_p) = 3 + 0.5 (4 - 0).
  CHECK(s.submit(0, s.payload({0.0f}, 3.0f), 0, true, false, 1, {0.5, 0.5}).outcome == Outcome::applied);
  for (float v : s.service->state()) CHECK(v == 5.0f);
  // The reply carries it.
  std::vector<float> r(s.pl().total());
  s.service->pull(1, r);
  for (float v : s.pl().all_state(std::span<const float>(r))) CHECK(v == 5.0f);
}

namespace {
/// Workers' BatchNorm-like running statistics: each child k steps of s <- m s + (1 - m) b from the
/// state it was last sent (its reply slot), reported with decay m^k; the reference is one
/// process's moving average over the same batches, in the order the service merged them.
struct StatsDriver {
  Stub& s;
  double m;
  std::vector<double> reference;  ///< per state element (both networks)
  std::uint64_t next_batch = 0;

  StatsDriver(Stub& stub, double momentum)
      : s(stub), m(momentum), reference(stub.pl().g_state + stub.pl().d_state, 0.0) {}

  static double batch_value(std::uint64_t b, std::size_t i) {
    return std::sin(0.7 * static_cast<double>(b) + 1.3 * static_cast<double>(i)) * 2.0 + 3.0;
  }
  /// Child @p w computes @p k steps from the state it was last sent; returns its payload and decay.
  std::vector<float> work(int w, int k, std::vector<std::uint64_t>& batches, std::array<double, 2>& decay) {
    return work_from(s.pl().all_state(std::span<const float>(s.slots[static_cast<std::size_t>(w)])), k, batches, decay);
  }
  std::vector<float> work_from(std::span<const float> st, int k, std::vector<std::uint64_t>& batches,
                               std::array<double, 2>& decay) {
    std::vector<double> local(st.begin(), st.end());
    for (int j = 0; j < k; ++j) {
      const std::uint64_t b = next_batch++;
      batches.push_back(b);
      for (std::size_t i = 0; i < local.size(); ++i) local[i] = m * local[i] + (1.0 - m) * batch_value(b, i);
    }
    std::vector<float> p = s.payload({0.0f});
    auto out = s.pl().all_state(std::span<float>(p));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(local[i]);
    decay = {std::pow(m, k), std::pow(m, k)};
    return p;
  }
  void merged(const std::vector<std::uint64_t>& batches) {
    for (std::uint64_t b : batches)
      for (std::size_t i = 0; i < reference.size(); ++i)
        reference[i] = m * reference[i] + (1.0 - m) * batch_value(b, i);
  }
  void check(const char* what) const {
    const auto st = s.service->state();
    std::vector<double> got(st.begin(), st.end());
    test::check_close(what, got, reference, {1e-5, 1e-5});
  }
};
}  // namespace

TEST_CASE("BatchNorm statistics of N asynchronous workers are one process's moving average over their batches") {
  // The mean of the children's latest states (before) moved the statistics one step per round of
  // N updates; merged with each report's decay they follow every batch, whatever the staleness.
  for (int workers : {1, 4, 16}) {
    CAPTURE(workers);
    Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, workers, Stub::sgd(0.1), {}, 3);
    StatsDriver drv(s, 0.9);
    for (int e = 0; e < 6 * workers; ++e) {
      const int w = (e * 7 + e / workers) % workers;  // every order of arrival, stale and fresh
      const int k = 1 + e % 3;                        // local steps (sync_every) or passes per update
      std::vector<std::uint64_t> batches;
      std::array<double, 2> decay{};
      const auto p = drv.work(w, k, batches, decay);
      REQUIRE(s.submit(w, p, s.version(), true, false, 1, decay).outcome == Outcome::applied);
      drv.merged(batches);
      s.service->fill_state(w, s.slots[static_cast<std::size_t>(w)]);
      drv.check("canonical state");
    }
  }
  SUBCASE("one worker: its state is taken bit for bit") {
    Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 1, Stub::sgd(0.1), {}, 2);
    for (float v : {0.123456789f, 7.5f, -1e-7f}) {
      REQUIRE(s.submit(0, s.payload({0.0f}, v), s.version(), true, false, 1, {0.99, 0.99}).outcome == Outcome::applied);
      for (float x : s.service->state()) CHECK(x == v);
      s.service->fill_state(0, s.slots[0]);
    }
  }
}

TEST_CASE("gem (pull then push): the statistics merge against the state the update started from") {
  // The worker's update follows its pull, but its statistics started from the state of the pull
  // before (what it continued from): merged against the latest pull, they would lose what others
  // added in between.
  for (int workers : {1, 3, 8}) {
    CAPTURE(workers);
    Stub s("algorithm: {name: gem, warmup: 0}", {1.0f}, workers, Stub::sgd(0.1), {}, 2);
    StatsDriver drv(s, 0.9);
    std::vector<std::vector<float>> own;  // the state each worker continues from
    for (const auto& slot : s.slots) {
      const auto st = s.pl().all_state(std::span<const float>(slot));
      own.emplace_back(st.begin(), st.end());
    }
    std::vector<float> now(s.pl().total());
    for (int e = 0; e < 5 * workers; ++e) {
      const int w = (e * 5 + e / workers) % workers;
      std::vector<std::uint64_t> batches;
      std::array<double, 2> decay{};
      const auto p = drv.work_from(own[static_cast<std::size_t>(w)], 1 + e % 2, batches, decay);
      s.service->pull(w, now);
      REQUIRE(s.submit(w, p, s.version(), false, false, 1, decay).outcome == Outcome::applied);
      drv.merged(batches);
      drv.check("canonical state");
      const auto st = s.pl().all_state(std::span<const float>(now));
      own[static_cast<std::size_t>(w)].assign(st.begin(), st.end());
    }
  }
}

TEST_CASE("sync: a round's BatchNorm statistics are merged in child order, whatever the arrival order") {
  auto run = [](const std::vector<int>& order) {
    Stub s("algorithm: {name: sync, warmup: 0}", {1.0f}, 3, Stub::sgd(0.1), {}, 2);
    StatsDriver drv(s, 0.99);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::vector<std::uint64_t>> batches(3);
      Decision d;
      for (int w : order) {
        std::array<double, 2> decay{};
        drv.next_batch = static_cast<std::uint64_t>(10 * round + 3 * w);  // child w's batches, whatever the order
        const auto p = drv.work(w, 2, batches[static_cast<std::size_t>(w)], decay);
        d = s.submit(w, p, s.version(), true, false, 1, decay);
        REQUIRE(d.outcome == Outcome::held);
      }
      REQUIRE(d.round.size() == 3);
      for (const auto& b : batches) drv.merged(b);  // child order
      for (int k : d.round) s.service->round_reply(k, s.slots[static_cast<std::size_t>(k)], false);
      drv.check("canonical state after the round");
    }
    const auto st = s.service->state();
    return std::vector<float>(st.begin(), st.end());
  };
  const auto a = run({0, 1, 2});
  for (const auto& order : {std::vector<int>{2, 0, 1}, std::vector<int>{1, 2, 0}}) {
    const auto b = run(order);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
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
  // the mean of the two finite ones at the rate times 2, the round's gradients (lr_scaling: linear)
  test::check_close("theta", std::vector<double>{s.weights()[0]}, std::vector<double>{1.0 - 0.1 * 2 * 3.0},
                    {1e-6, 1e-6});
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
  // the rate times the round's gradients (lr_scaling: linear): 2 x 0.3, then 1 x 0.1
  test::check_close("theta", std::vector<double>{s.weights()[0]}, std::vector<double>{1.0 - 0.6 - 0.1}, {1e-6, 1e-6});
  // Asynchronous rules have no rounds.
  Stub a("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2);
  CHECK(a.service->child_done(0).round.empty());
}

TEST_CASE(
    "a child's lead (topology.max_lead) counts its applied updates beyond the least-served child still training") {
  Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 3);
  for (int k = 0; k < 3; ++k) s.submit(0, s.payload({1.0f}), k);
  s.submit(1, s.payload({1.0f}), 3);
  s.submit(1, s.payload({kNaN}), 4);  // rejected: not counted
  CHECK(s.service->lead(0) == 3);     // child 2 has none applied
  CHECK(s.service->lead(1) == 1);
  CHECK(s.service->lead(2) == 0);
  s.service->child_done(2);  // its data ended: child 1 is now the least served
  CHECK(s.service->lead(0) == 2);
  CHECK(s.service->lead(1) == 0);
  s.service->child_gone(1);  // no longer answered (hung): child 0 leads no one
  CHECK(s.service->lead(0) == 0);
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

TEST_CASE(
    "the tree's top master adds sub-masters' changes (by default over their number), or averages them in rounds") {
  // Two sub-masters, asynchronous: each change is added at once, halved (topology.submaster_scale 0).
  Stub a("algorithm: {name: downpour, warmup: 0}", {1.0f, 2.0f}, 2, Stub::sgd(0.1), {.tree_top = true});
  CHECK(a.submit(0, a.payload({0.5f, -1.0f}), 0).outcome == Outcome::applied);
  CHECK(a.weights() == std::vector<float>{1.25f, 1.5f});
  // The reply is the new weights, written in the same pass.
  CHECK(a.slots[0][0] == 1.25f);
  CHECK(a.slots[0][1] == 1.5f);
  CHECK(a.submit(1, a.payload({1.0f, 1.0f}), 0).outcome == Outcome::applied);
  CHECK(a.weights() == std::vector<float>{1.75f, 2.0f});
  // submaster_scale 1: the change as it came.
  Stub whole("algorithm: {name: downpour, warmup: 0}", {1.0f, 2.0f}, 2, Stub::sgd(0.1),
             {.tree_top = true, .tree_scale = 1.0});
  whole.submit(0, whole.payload({0.5f, -1.0f}), 0);
  CHECK(whole.weights() == std::vector<float>{1.5f, 1.0f});
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f, 2.0f}, 2, Stub::sgd(0.1),
         {.tree_top = true, .fuse_first_reply = false});
  CHECK(s.submit(1, s.payload({1.0f, 0.0f}), 0).outcome == Outcome::held);
  const Decision d = s.submit(0, s.payload({0.0f, 2.0f}), 0);
  CHECK(d.round == std::vector<int>{1, 0});
  CHECK(s.weights() == std::vector<float>{1.5f, 3.0f});
}

TEST_CASE("a sub-master's change: its weights less the parent's last ones; adopted, or rebased on a resume") {
  // A sub-master (sgd 0.1, downpour without warm-up) over one worker, 2 weights, 1 state float.
  Stub sub("algorithm: {name: downpour, warmup: 0}", {1.0f, 2.0f}, 1, Stub::sgd(0.1), {}, 1);
  master::ParentChange change(*sub.service);
  sub.submit(0, sub.payload({1.0f, -2.0f}, 0.5f), 0);  // w -= 0.1 g: {0.9, 2.2}; state 0.5
  std::vector<float> up(sub.pl().total());
  const auto decay = change.build(*sub.service, up);
  const auto g = sub.pl().block(models::Net::generator, std::span<const float>(up));
  CHECK(g[0] == doctest::Approx(-0.1f));
  CHECK(g[1] == doctest::Approx(0.2f));
  CHECK(sub.pl().all_state(std::span<const float>(up))[0] == 0.5f);  // the canonical state goes up too
  CHECK(decay[0] == 1.0);
  CHECK(change.push_samples(*sub.service) == 1);
  CHECK(change.push_samples(*sub.service) == 0);  // nothing new since
  CHECK(change.samples_at_push() == 1);
  change.unpush_samples();  // the last push (of nothing) was not applied: the count stays
  CHECK(change.samples_at_push() == 1);
  // The parent answers with its weights {5, 6}, state 3, at its version 7: the sub-master takes them.
  std::vector<float> parent = sub.payload({5.0f, 6.0f}, 3.0f);
  change.adopt(*sub.service, parent, 7);
  CHECK(sub.weights() == std::vector<float>{5.0f, 6.0f});
  CHECK(sub.service->state()[0] == 3.0f);
  CHECK(change.parent_version() == 7);
  change.build(*sub.service, up);
  CHECK(sub.pl().block(models::Net::generator, std::span<const float>(up))[0] == 0.0f);  // no change of its own
  // Another update, then (as on a resume) the parent's weights {10, 10}: the change is kept on top.
  sub.submit(0, sub.payload({-1.0f, 1.0f}), 0);  // {5.1, 5.9}
  CHECK(change.push_samples(*sub.service) == 1);
  change.unpush_samples();  // the parent stopped without applying it: the sample is again this one's
  CHECK(change.samples_at_push() == 1);
  change.restore(change.parent_version(), change.samples_at_push());  // as a resume from its part
  CHECK(change.push_samples(*sub.service) == 1);
  change.unpush_samples();
  change.rebase(*sub.service, sub.payload({10.0f, 10.0f}), 9);
  const auto w = sub.weights();
  CHECK(w[0] == doctest::Approx(10.1f));
  CHECK(w[1] == doctest::Approx(9.9f));
  CHECK(change.pulled(models::Net::generator)[0] == 10.0f);
  CHECK(change.parent_version() == 9);
  // The losses go up as the mean of the children's updates since the last push.
  dist::Header a, b, up_header;
  a.n_losses = b.n_losses = 3;
  a.losses = {1.0, 2.0, 3.0};
  b.losses = {3.0, 4.0, 8.0};
  change.note_losses(a);
  change.note_losses(b);
  change.put_losses(up_header);
  CHECK(up_header.n_losses == 3);
  CHECK(up_header.losses[0] == 2.0);
  CHECK(up_header.losses[1] == 3.0);
  CHECK(up_header.losses[2] == 5.5);
  change.put_losses(up_header);  // nothing noted since
  CHECK(up_header.n_losses == 0);
}

TEST_CASE("every rule: saved and restored, the service continues with the same bits") {
  const std::filesystem::path dir = test::temp_dir("service");
  // Every rule's defaults, and the variants whose state only exists when set (downpour's look-ahead
  // velocity: its replies must continue with the same bits too).
  std::vector<std::pair<std::string, std::string>> cases;
  for (const auto& name : algos::algorithm_names())
    cases.emplace_back(name, fmt::format("algorithm: {{name: {}}}", name));
  cases.emplace_back("downpour-lookahead", "algorithm: {name: downpour, lookahead: staleness, lookahead_beta: 0.5}");
  for (const auto& [name, yaml] : cases) {
    CAPTURE(name);
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
    // The look-ahead's replies (their weight blocks; the BN states differ, as above) depend on its
    // restored velocity.
    if (name == "downpour-lookahead") {
      for (std::size_t w = 0; w < a.slots.size(); ++w) {
        for (models::Net net : dist::kNets) {
          const auto ra = a.pl().block(net, std::span<const float>(a.slots[w]));
          const auto rc = c.pl().block(net, std::span<const float>(c.slots[w]));
          CHECK(std::memcmp(ra.data(), rc.data(), ra.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("a rejected update names the blocks that hold inf or NaN, from the sums of squares its header carries") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK(dist::nonfinite_blocks({1.0, 2.0, 3.0}) == "none");
  CHECK(dist::nonfinite_blocks({nan, 2.0, 3.0}) == "generator update");
  // Finite gradient norms, a blown-up BatchNorm state: the state is named, not the norms.
  CHECK(dist::nonfinite_blocks({5.3e8, 1.3e5, inf}) == "BatchNorm state");
  CHECK(dist::nonfinite_blocks({1.0, inf, nan}) == "discriminator update, BatchNorm state");
}

TEST_CASE("the serving policy the real master and the sandbox share: what follows each decision") {
  using master::Reply;
  using master::Serve;
  Decision d;
  d.outcome = Outcome::applied;
  CHECK(master::serve_after(d) == Serve::new_version);
  d.outcome = Outcome::rejected_by_rule;
  CHECK(master::serve_after(d) == Serve::answer);
  d.outcome = Outcome::rejected_nonfinite;
  CHECK(master::serve_after(d) == Serve::answer);
  d.outcome = Outcome::diverged;
  CHECK(master::serve_after(d) == Serve::diverged);
  d.outcome = Outcome::held;
  CHECK(master::serve_after(d) == Serve::wait);
  d.round = {2, 0, 1};
  CHECK(master::serve_after(d) == Serve::close_round);
  // After a new version: a pull-then-push update gets nothing, the end of training a stop (even
  // beyond the lead), a child too far ahead waits, any other the weights.
  CHECK(master::reply_after_version(false, false, false) == Reply::none);
  CHECK(master::reply_after_version(false, true, true) == Reply::none);
  CHECK(master::reply_after_version(true, true, true) == Reply::stop);
  CHECK(master::reply_after_version(true, false, true) == Reply::defer);
  CHECK(master::reply_after_version(true, false, false) == Reply::weights);
}

TEST_CASE("beyond_lead: topology.max_lead against the least-served child still training") {
  Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 3);
  const auto g = s.payload({0.0f});
  for (int k = 0; k < 3; ++k) CHECK(s.submit(0, g, s.version()).outcome == Outcome::applied);
  CHECK(s.service->lead(0) == 3);
  CHECK(s.service->beyond_lead(0, 2));
  CHECK_FALSE(s.service->beyond_lead(0, 3));
  CHECK_FALSE(s.service->beyond_lead(0, 0));  // 0: unbounded
  s.service->child_gone(1);
  s.service->child_gone(2);  // no one left to hold it back
  CHECK(s.service->lead(0) == 0);
  CHECK_FALSE(s.service->beyond_lead(0, 1));
}
