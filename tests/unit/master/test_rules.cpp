// Update rules without MPI: each rule's formulas on small vectors against hand-computed values,
// through the real update service and the workers' real rules in one process (service_stub.hpp);
// and a stub cluster of virtual workers on a quadratic, where every registered rule must converge.
#include "service_stub.hpp"
#include "test_utils.hpp"

#include "mpigan/algos/rule.hpp"
#include "mpigan/core/error.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

using namespace mpigan;
using namespace mpigan::algos;

namespace {

using Stub = test::ServiceStub;
using master::Decision;
using master::Outcome;

void check_vec(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
               double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  std::vector<double> g(got.begin(), got.end());
  test::check_close(what, g, want, {tol, tol});
}

}  // namespace

TEST_CASE("sync: the round averages in worker order and applies the master optimizer once") {
  Stub s("algorithm: {name: sync, warmup: 0}", {1.0f, 2.0f}, 3, Stub::sgd(0.1), {.fuse_first_reply = false});
  CHECK(s.alg->synchronous());
  Decision d;
  s.exchange(2, {3.0f, 0.0f}, {}, 0, &d);
  CHECK(d.outcome == Outcome::held);
  CHECK(d.round.empty());
  s.exchange(0, {0.0f, 6.0f}, {}, 0, &d);
  CHECK(d.round.empty());
  CHECK(s.weights() == std::vector<float>{1.0f, 2.0f});  // nothing applied before the round closes
  CHECK(s.version() == 0);
  s.exchange(1, {3.0f, 3.0f}, {}, 0, &d);
  // The third update completes the round: the children to answer, in arrival order.
  CHECK(d.outcome == Outcome::held);
  CHECK(d.round == std::vector<int>{2, 0, 1});
  CHECK_FALSE(d.first_reply_written);  // not fused here: no reply written with the round
  CHECK(s.version() == 1);
  // mean g = (2, 3); SGD lr 0.1 times the round's 3 gradients (lr_scaling: linear, the default):
  // theta = (1 - 0.6, 2 - 0.9)
  check_vec("theta after the round", s.weights(), {0.4, 1.1});
  std::vector<float> reply(s.pl().total());
  s.service->round_reply(0, reply, false);
  reply.resize(2);
  CHECK(reply == s.weights());

  // Bitwise the same whatever the arrival order (the sum runs in worker-id order).
  auto run = [](std::vector<int> order) {
    Stub t("algorithm: {name: sync}", {0.1f, 0.2f, 0.3f}, 3);
    const std::vector<std::vector<float>> g = {{1e-3f, 7.0f, -3.3f}, {1e7f, -2.5f, 1e-5f}, {-1e7f, 0.3f, 9.9f}};
    for (int w : order) t.exchange(w, g[static_cast<std::size_t>(w)], {}, 0);
    CHECK(t.version() == 1);
    return t.weights();
  };
  const auto a = run({0, 1, 2}), b = run({2, 0, 1}), c = run({1, 2, 0});
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)) == 0);
}

TEST_CASE("sync: lr_scaling multiplies the master's learning rate by sqrt(N) or N for a round of N gradients") {
  // Four gradients averaging g = (2, -1); SGD lr 0.1 from theta = (1, 1): the step is 0.1 * k * g with
  // k = 1 (none), sqrt(4) = 2 (sqrt) and 4 (linear).
  const std::vector<std::vector<float>> g = {{1.0f, 0.0f}, {3.0f, -2.0f}, {2.0f, -1.0f}, {2.0f, -1.0f}};
  for (const auto& [scaling, k] :
       std::vector<std::pair<std::string, double>>{{"none", 1.0}, {"sqrt", 2.0}, {"linear", 4.0}}) {
    CAPTURE(scaling);
    Stub s(fmt::format("algorithm: {{name: sync, warmup: 0, lr_scaling: {}}}", scaling), {1.0f, 1.0f}, 4,
           Stub::sgd(0.1));
    for (int w = 0; w < 4; ++w) s.exchange(w, g[static_cast<std::size_t>(w)], {}, 0);
    CHECK(s.version() == 1);
    check_vec("theta after the round", s.weights(), {1.0 - 0.2 * k, 1.0 + 0.1 * k});
    CHECK(s.alg->describe().find(scaling == "none"   ? "as set"
                                 : scaling == "sqrt" ? "sqrt(N)"
                                                     : "times N") != std::string::npos);
  }
  // With the warm-up over the four rounds of its default the first round takes a quarter of it.
  Stub w("algorithm: {name: sync, lr_scaling: linear}", {1.0f, 1.0f}, 4, Stub::sgd(0.1));
  for (int i = 0; i < 4; ++i) w.exchange(i, g[static_cast<std::size_t>(i)], {}, 0);
  check_vec("theta after the warm-up's first round", w.weights(), {1.0 - 0.2, 1.0 + 0.1});
  CHECK_THROWS_WITH_AS(Stub("algorithm: {name: sync, lr_scaling: quadratic}", {1.0f}, 2),
                       doctest::Contains("lr_scaling"), Error);
}

TEST_CASE("sync: the rate is scaled linearly by default, capped by lr_scaling_max") {
  // One gradient of 1 per worker, SGD lr 0.01 from theta = 0, no warm-up: the round steps by
  // -0.01 * min(N, cap).
  for (const auto& [yaml, workers, k] : std::vector<std::tuple<std::string, int, double>>{
           {"algorithm: {name: sync, warmup: 0}", 4, 4.0},    // the default: linear
           {"algorithm: {name: sync, warmup: 0}", 32, 16.0},  // capped at 16 by default
           {"algorithm: {name: sync, warmup: 0, lr_scaling_max: 8}", 32, 8.0},
           {"algorithm: {name: sync, warmup: 0, lr_scaling_max: 0}", 32, 32.0},  // 0: no cap
           {"algorithm: {name: sync, warmup: 0, lr_scaling: sqrt, lr_scaling_max: 3}", 16, 3.0},
           {"algorithm: {name: sync, warmup: 0, lr_scaling: none}", 32, 1.0},
           {"algorithm: {name: sync, warmup: 0}", 1, 1.0}}) {  // one worker: the experiment's rate
    CAPTURE(yaml);
    CAPTURE(workers);
    Stub s(yaml, {0.0f}, workers, Stub::sgd(0.01));
    for (int w = 0; w < workers; ++w) s.exchange(w, {1.0f}, {}, 0);
    CHECK(s.version() == 1);
    check_vec("theta after the round", s.weights(), {-0.01 * k});
  }
  CHECK(Stub("algorithm: {name: sync}", {0.0f}, 4).alg->describe().find("times N (at most x16)") != std::string::npos);
  CHECK_THROWS_WITH_AS(Stub("algorithm: {name: sync, lr_scaling_max: -1}", {1.0f}, 2),
                       doctest::Contains("lr_scaling_max"), Error);
}

TEST_CASE("sync: updates held in place and the reply written with the round give the same bits") {
  // A master holds updates that lie in shared-memory slots (stable) as views, others as copies;
  // it may write the first worker's reply in the optimizer's pass. Neither may change a bit.
  Rng rng(11);
  const std::size_t n = 37;
  std::vector<float> theta0(n);
  rng.fill_uniform(theta0, -1.0f, 1.0f);
  std::vector<std::vector<float>> g(3, std::vector<float>(n));
  for (auto& v : g) rng.fill_uniform(v, -1.0f, 1.0f);
  for (const char* reduce : {"mean", "sum"})
    for (int workers : {1, 3}) {
      CAPTURE(reduce);
      CAPTURE(workers);
      auto run = [&](bool stable, bool fused) {
        Stub t(fmt::format("algorithm: {{name: sync, reduce: {}}}", reduce), theta0, workers,
               nn::OptimizerConfig::defaults("rmsprop"), {.fuse_first_reply = fused});
        std::vector<std::vector<float>> slot;
        for (int w = 0; w < workers; ++w) slot.push_back(t.payload(g[static_cast<std::size_t>(w)]));
        Decision d;
        for (int w = workers - 1; w >= 0; --w) {
          std::vector<float>& u = slot[static_cast<std::size_t>(w)];
          d = t.submit(w, u, 0, true, stable);
          CHECK(d.outcome == Outcome::held);
          if (!stable) std::fill(u.begin(), u.end(), 1e30f);  // a copy was taken: the buffer is free
        }
        REQUIRE(d.round.size() == static_cast<std::size_t>(workers));
        CHECK(d.first_reply_written == fused);
        const auto& reply = t.slots[static_cast<std::size_t>(d.round.front())];
        const auto w = t.service->weights(models::Net::generator);
        if (fused) CHECK(std::memcmp(reply.data(), w.data(), w.size() * sizeof(float)) == 0);
        return t.weights();
      };
      const auto copied = run(false, false), viewed = run(true, false), fused = run(true, true);
      CHECK(copied != theta0);
      CHECK(std::memcmp(copied.data(), viewed.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(copied.data(), fused.data(), n * sizeof(float)) == 0);
    }
}

TEST_CASE("sum_scaled sums left to right and scales once") {
  const std::vector<float> a{1e8f, 1.0f}, b{-1e8f, 2.0f}, c{1.0f, 4.0f}, d{0.5f, 8.0f};
  std::vector<float> out(2);
  const std::vector<std::span<const float>> one{a}, two{a, b}, four{a, b, c, d};
  sum_scaled(one, 0.5f, out);
  CHECK(out == std::vector<float>{5e7f, 0.5f});
  sum_scaled(two, 1.0f, out);
  CHECK(out == std::vector<float>{0.0f, 3.0f});
  sum_scaled(four, 0.25f, out);
  // ((1e8 - 1e8) + 1) + 0.5 = 1.5 (left to right: a different order would lose the 1e8s' bits)
  CHECK(out == std::vector<float>{0.375f, 3.75f});
  std::vector<float> short_out(1);
  CHECK_THROWS_WITH_AS(sum_scaled(two, 1.0f, short_out), doctest::Contains("sum_scaled"), Error);
}

TEST_CASE("downpour: each update is applied at once; staleness scaling; local mode adds deltas") {
  Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f, -1.0f}, 2);
  CHECK(s.alg->worker_mode() == WorkerMode::gradients);
  const auto local = s.exchange(0, {2.0f, 4.0f}, {9.0f, 9.0f}, 0);
  check_vec("theta", s.weights(), {0.8, -1.4});  // theta - 0.1 g
  check_vec("worker gets theta", local, {0.8, -1.4});
  Stub t("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2);  // staleness_scale: inverse is the default
  t.exchange(1, {2.0f}, {}, -4);  // pulled 4 versions before the master's version 0: staleness 4, scale 1/4
  check_vec("theta with 1/staleness", t.weights(), {1.0 - 0.1 * 2.0 / 4.0});
  Stub n("algorithm: {name: downpour, warmup: 0, staleness_scale: none}", {1.0f}, 2);
  n.exchange(1, {2.0f}, {}, -4);
  check_vec("theta without scaling", n.weights(), {1.0 - 0.1 * 2.0});
  Stub q("algorithm: {name: downpour, warmup: 0, staleness_scale: inverse_sqrt}", {1.0f}, 2);
  q.exchange(1, {2.0f}, {}, -4);
  check_vec("theta with 1/sqrt(staleness)", q.weights(), {1.0 - 0.1 * 2.0 / 2.0});
  CHECK(q.alg->describe().find("1/sqrt(staleness)") != std::string::npos);
  // RMSprop divides the gradient by its running magnitude, so a scaled gradient would step as far
  // as an unscaled one: the learning rate is scaled. ms = 0.1 g^2 = 0.4; step = lr g / (sqrt(ms) + eps).
  auto rms = nn::OptimizerConfig::defaults("rmsprop");
  rms.lr = 0.01;
  Stub r("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2, rms);
  r.exchange(1, {2.0f}, {}, -4);
  check_vec("rmsprop step times 1/staleness", r.weights(), {1.0 - 0.01 / 4.0 * 2.0 / (std::sqrt(0.4) + 1e-7)}, 1e-6);
  Stub rn("algorithm: {name: downpour, warmup: 0, staleness_scale: none}", {1.0f}, 2, rms);
  rn.exchange(1, {2.0f}, {}, -4);
  check_vec("rmsprop step unscaled", rn.weights(), {1.0 - 0.01 * 2.0 / (std::sqrt(0.4) + 1e-7)}, 1e-6);
  // The next update, fresh (pulled at version 1), steps with the full learning rate again:
  // ms = 0.9 * 0.4 + 0.1 * 4 = 0.76.
  r.exchange(0, {2.0f}, {}, 1);
  check_vec("rmsprop lr restored", r.weights(),
            {1.0 - 0.01 / 4.0 * 2.0 / (std::sqrt(0.4) + 1e-7) - 0.01 * 2.0 / (std::sqrt(0.76) + 1e-7)}, 1e-6);
  Stub l("algorithm: {name: downpour, worker: local}", {1.0f, 2.0f}, 2);
  CHECK(l.alg->worker_mode() == WorkerMode::local);
  CHECK(l.alg->payload() == Payload::delta);
  l.exchange(0, {0.5f, -0.25f}, {}, 0);
  check_vec("theta + delta", l.weights(), {1.5, 1.75});
}

TEST_CASE("downpour lookahead: the reply is theta + k v, v the mean of the master's steps; theta unchanged") {
  // sgd lr 0.1, beta 0.5, k = 2 versions. Update 1: theta 1 - 0.1 * 2 = 0.8, v = 0.5 * (-0.2) = -0.1,
  // reply 0.8 + 2 * (-0.1) = 0.6. Update 2 (g = 1): theta 0.7, v = 0.5 * (-0.1) + 0.5 * (-0.1) = -0.1,
  // reply 0.7 - 0.2 = 0.5.
  Stub s("algorithm: {name: downpour, warmup: 0, staleness_scale: none, lookahead: 2, lookahead_beta: 0.5}", {1.0f}, 2);
  check_vec("reply 1", s.exchange(0, {2.0f}, {}, 0), {0.6});
  check_vec("theta 1", s.weights(), {0.8});
  check_vec("reply 2", s.exchange(1, {1.0f}, {}, 0), {0.5});
  check_vec("theta 2", s.weights(), {0.7});
  CHECK(s.alg->describe().find("look ahead by 2 versions") != std::string::npos);
  // lookahead: staleness. Update 1 fresh (staleness 0): k = 0, the reply is theta. Update 2 pulled at
  // -2 and served at version 1 (staleness 3): k = 0.95 * 0 + 0.05 * 3 = 0.15, v = -0.1.
  Stub a("algorithm: {name: downpour, warmup: 0, staleness_scale: none, lookahead: staleness, lookahead_beta: 0.5}",
         {1.0f}, 2);
  check_vec("reply at staleness 0", a.exchange(0, {2.0f}, {}, 0), {0.8});
  check_vec("reply at mean staleness 0.15", a.exchange(1, {1.0f}, {}, -2), {0.7 + 0.15 * -0.1});
  // lookahead 0 is plain downpour, bit for bit.
  Stub z("algorithm: {name: downpour, warmup: 0, lookahead: 0}", {1.0f, -1.0f}, 2);
  Stub d("algorithm: {name: downpour, warmup: 0}", {1.0f, -1.0f}, 2);
  for (int i = 0; i < 3; ++i) {
    const auto rz = z.exchange(i % 2, {2.0f, 4.0f}, {}, i - 1), rd = d.exchange(i % 2, {2.0f, 4.0f}, {}, i - 1);
    CHECK(std::memcmp(rz.data(), rd.data(), rz.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("easgd: the worker gets the old centre; both move by alpha towards each other") {
  Stub s("algorithm: {name: easgd, alpha: 0.5}", {0.0f, 4.0f}, 2);
  CHECK(s.alg->payload() == Payload::weights);
  const std::vector<float> x = {2.0f, 0.0f};
  const auto local = s.exchange(0, x, x, 0);
  // centre: c + 0.5 (x - c) = (1, 2); worker: x - 0.5 (x - c_old) = (1, 2)
  check_vec("centre", s.weights(), {1.0, 2.0});
  check_vec("worker", local, {1.0, 2.0});
  Stub d("algorithm: {name: easgd}", {0.0f}, 3);  // default alpha = 0.9 / workers = 0.3
  const auto moved = d.exchange(0, {1.0f}, {1.0f}, 0);
  check_vec("default alpha 0.9/N", d.weights(), {0.3});
  // The worker's alpha is the master's (the paper's symmetric elastic force), not 0.9.
  check_vec("the worker moves by the same alpha", moved, {0.7});
}

TEST_CASE("gem (proposal: sgd): pi = clamp((kappa |m| - |cvm|) / (|Delta| + eps), 0, 5), update = pi Delta") {
  Stub s("algorithm: {name: gem, proposal: sgd, lr: 0.1, momentum: 0.9, kappa: 2, warmup: 0}", {0.0f, 0.0f, 0.0f}, 2);
  CHECK(s.alg->exchange() == Exchange::pull_push);
  RuleStats st;
  Decision d;
  // First exchange: s = theta = 0; Delta = -0.1 g = (-0.1, 0.2, -0.05); m = Delta; cvm = 0; pi = 2.
  auto local = s.exchange(0, {1.0f, -2.0f, 0.5f}, {0.0f, 0.0f, 0.0f}, 0, &d, &st);
  check_vec("theta after the first update", s.weights(), {-0.2, 0.4, -0.1});
  check_vec("worker = theta_pulled + update", local, {-0.2, 0.4, -0.1});
  CHECK(st.scale == doctest::Approx(2.0));
  CHECK(d.scale[0] == doctest::Approx(1.0));  // the master applies the proposal as it is
  // Another worker moves theta by (0.5, 0, 0) meanwhile (directly, as a stand-in).
  for (models::Net net : dist::kNets)
    s.service->weights(net)[0] += 0.7f;  // theta = (0.5, 0.4, -0.1); worker 0's stale copy is (0, 0, 0)
  // Worker 0, second exchange with g = (1, 1, 1): Delta = (-0.1, -0.1, -0.1);
  // m = 0.9 (-0.1, 0.2, -0.05) + Delta = (-0.19, 0.08, -0.145); cvm = (0.5, 0.4, -0.1);
  // pi = (2|m| - |cvm|)/0.1 = ((0.38 - 0.5), (0.16 - 0.4), (0.29 - 0.1))/0.1 = (-1.2, -2.4, 1.9) -> (0, 0, 1.9)
  local = s.exchange(0, {1.0f, 1.0f, 1.0f}, local, 1, nullptr, &st);
  check_vec("theta after the second update", s.weights(), {0.5, 0.4, -0.1 - 0.19}, 1e-5);
  check_vec("worker", local, {0.5, 0.4, -0.29}, 1e-5);
  CHECK(st.scale == doctest::Approx(0.0));  // median of (0, 0, 1.9)
  // Clamp at 5: a tiny Delta against a large momentum.
  Stub c("algorithm: {name: gem, proposal: sgd, lr: 1, momentum: 0.9, kappa: 1, clamp: [0, 5]}", {0.0f}, 1);
  c.exchange(0, {-10.0f}, {0.0f}, 0);   // m = 10, update = 1 * 10 (cvm 0, pi = 1)
  c.exchange(0, {-0.001f}, {0.0f}, 1);  // m = 9.001, Delta = 0.001: pi = (9.001 - 10)/0.001 < 0 -> 0
  check_vec("clamped below", c.weights(), {10.0}, 1e-5);
}

TEST_CASE("gem: a worker's first pi counts the central variable's move since the weights its gradient used") {
  // Two workers computed their first gradient (g = 1) on theta0 = 0. Worker 0 goes first:
  // Delta = -0.1, m = Delta, cvm = 0, pi = 2: theta = -0.2. Worker 1 then pulls theta = -0.2:
  // its s is theta0, so cvm = -0.2 and pi = (2 * 0.1 - 0.2) / 0.1 = 0: nothing more moves. (Were s
  // the pulled theta, cvm would be 0 and pi 2 again: theta = -0.4, and N workers' first updates
  // would all go in at pi = kappa.)
  Stub s("algorithm: {name: gem, proposal: sgd, lr: 0.1, momentum: 0.9, kappa: 2, warmup: 0}", {0.0f}, 2);
  s.exchange(0, {1.0f}, {0.0f}, 0);
  check_vec("after worker 0", s.weights(), {-0.2}, 1e-6);
  RuleStats st;
  s.exchange(1, {1.0f}, {0.0f}, 0, nullptr, &st);
  check_vec("after worker 1", s.weights(), {-0.2}, 1e-6);
  CHECK(st.scale == doctest::Approx(0.0));
}

TEST_CASE("gem clip_norm: a gradient longer than clip_norm is rescaled to it before Delta = -lr g") {
  // |g| = 5 > 1: Delta = -0.1 (3, 4) / 5 = (-0.06, -0.08); first exchange pi = kappa = 2.
  Stub s("algorithm: {name: gem, proposal: sgd, lr: 0.1, momentum: 0.9, kappa: 2, clip_norm: 1}", {0.0f, 0.0f}, 1);
  s.exchange(0, {3.0f, 4.0f}, {0.0f, 0.0f}, 0);
  check_vec("clipped", s.weights(), {-0.12, -0.16}, 1e-6);
  CHECK(s.alg->describe().find("clip_norm 1") != std::string::npos);
  // A shorter gradient is untouched: |g| = 0.5 <= 1.
  Stub u("algorithm: {name: gem, proposal: sgd, lr: 0.1, momentum: 0.9, kappa: 2, clip_norm: 1}", {0.0f, 0.0f}, 1);
  u.exchange(0, {0.3f, 0.4f}, {0.0f, 0.0f}, 0);
  check_vec("not clipped", u.weights(), {-0.06, -0.08}, 1e-6);
}

TEST_CASE("gem proposal rmsprop: Delta = -lr g / (sqrt(v) + eps), v kept by each worker") {
  Stub s("algorithm: {name: gem, proposal: rmsprop, lr: 0.01, momentum: 0.9, kappa: 2, rho: 0.5, warmup: 0}",
         {0.0f, 0.0f}, 2);
  CHECK(s.alg->describe().find("rmsprop proposals (rho 0.5") != std::string::npos);
  // Worker 0, g = (2, -0.001): v = 0.5 g^2 = (2, 5e-7); Delta = -0.01 g / (sqrt(v) + 1e-7)
  // = (-0.01 * 2 / 1.41421366, 0.01 * 0.001 / 7.0721e-4) = (-0.0141421, 0.0141401): both weights
  // move by about lr whatever the gradient's scale. First exchange: pi = kappa = 2.
  s.exchange(0, {2.0f, -0.001f}, {0.0f, 0.0f}, 0);
  const double d0 = -0.01 * 2 / (std::sqrt(2.0) + 1e-7), d1 = 0.01 * 0.001 / (std::sqrt(5e-7) + 1e-7);
  check_vec("theta", s.weights(), {2 * d0, 2 * d1}, 1e-6);
  // Worker 1 has its own second moment, so the same gradient gives the same proposal; its gradient
  // was computed on theta0 = 0 too, so cvm = 2 Delta matches kappa |m| already: pi = 0.
  RuleStats st;
  s.exchange(1, {2.0f, -0.001f}, {0.0f, 0.0f}, 0, nullptr, &st);
  check_vec("theta after worker 1", s.weights(), {2 * d0, 2 * d1}, 1e-6);
  CHECK(st.scale == doctest::Approx(0.0).epsilon(1e-3));
  // One worker, two exchanges with g = 2: v = 0.5 * 4 = 2, then 0.5 * 2 + 0.5 * 4 = 3.
  Stub t("algorithm: {name: gem, proposal: rmsprop, lr: 0.01, momentum: 0.9, kappa: 1, rho: 0.5}", {0.0f}, 1);
  const double a = -0.02 / (std::sqrt(2.0) + 1e-7), b = -0.02 / (std::sqrt(3.0) + 1e-7);
  t.exchange(0, {2.0f}, {0.0f}, 0);  // m = a, cvm = 0: pi = 1, theta = a
  t.exchange(0, {2.0f}, {static_cast<float>(a)}, 1);
  // cvm = theta - stale = a (its own last step); m = 0.9 a + b; pi = (|m| - |a|) / |b|.
  const double pi = (std::abs(0.9 * a + b) - std::abs(a)) / std::abs(b);
  CHECK(pi == doctest::Approx(0.878).epsilon(0.01));
  check_vec("second step", t.weights(), {a + pi * b}, 1e-6);
  // The defaults: rmsprop proposals at lr 1e-3 / (N + 4) for N workers (docs/algorithms.md).
  CHECK(Stub("algorithm: {name: gem}", {0.0f}, 1)
            .alg->describe()
            .starts_with("gem: rmsprop proposals (rho 0.9, eps 1e-07), lr auto (1e-3 / (N + 4) for N workers),"));
  for (int workers : {1, 6, 16}) {
    CAPTURE(workers);
    // First exchange, g = 2: v = 0.1 g^2, Delta = -lr g / sqrt(v) = -lr sqrt(10); pi = kappa = 2.
    Stub a("algorithm: {name: gem, warmup: 0}", {0.0f}, workers);
    a.exchange(0, {2.0f}, {0.0f}, 0);
    const double lr = 1e-3 / (workers + 4);
    check_vec("theta", a.weights(), {-2 * lr * 2 / (std::sqrt(0.4) + 1e-7)}, 1e-6);
  }
  // A learning rate that is neither a number nor auto, or out of range: named with what is expected.
  for (const char* bad : {"autoo", "0", "-1e-3", "1e3"}) {
    const std::string want = fmt::format("algorithm.lr: '{}': expected a learning rate in (0, 100], or 'auto'", bad);
    CHECK_THROWS_WITH(Stub(fmt::format("algorithm: {{name: gem, lr: {}}}", bad), {0.0f}, 1),
                      doctest::Contains(want.c_str()));
  }
  // rmsprop's options are refused with sgd proposals.
  CHECK_THROWS_WITH(Stub("algorithm: {name: gem, proposal: sgd, rho: 0.5}", {0.0f}, 1),
                    doctest::Contains("rho and rms_epsilon belong to proposal: rmsprop"));
}

TEST_CASE("optimizer.schedule: the master's rates, sync's rounds and GEM's proposals follow the schedule's factor") {
  // A top master: the factor of the version and samples reached, set before each update is served.
  master::UpdateService::Options top;
  top.schedule = [](std::int64_t version, std::int64_t) { return version == 0 ? 0.5 : 0.25; };
  Stub s("algorithm: {name: downpour, warmup: 0}", {1.0f}, 2, Stub::sgd(0.1), top);
  Decision d;
  s.exchange(0, {2.0f}, {}, 0, &d);
  check_vec("theta - 0.5 * 0.1 g", s.weights(), {0.9});
  CHECK(d.lr_factor == doctest::Approx(0.5));
  CHECK(s.service->lr_factor() == doctest::Approx(0.5));  // what the reply carries
  s.exchange(1, {2.0f}, {}, 1, &d);
  check_vec("then 0.25 * 0.1 g", s.weights(), {0.85});
  CHECK(d.lr_factor == doctest::Approx(0.25));
  // A sub-master: no schedule of its own; the factor is its parent's.
  Stub sub("algorithm: {name: downpour, warmup: 0}", {1.0f}, 1);
  sub.service->set_lr_factor(0.3);
  sub.exchange(0, {2.0f}, {}, 0);
  check_vec("theta - 0.3 * 0.1 g", sub.weights(), {0.94});
  // sync: the round is applied with the factor of the version it closes.
  Stub r("algorithm: {name: sync, warmup: 0, lr_scaling: none}", {1.0f}, 2, Stub::sgd(0.1), top);
  r.exchange(0, {1.0f}, {}, 0);
  r.exchange(1, {3.0f}, {}, 0);
  check_vec("theta - 0.5 * 0.1 mean g", r.weights(), {0.9});
  // GEM's proposals on the worker: Delta = -factor lr g (first exchange: pi = kappa = 2).
  Stub g("algorithm: {name: gem, proposal: sgd, lr: 0.1, momentum: 0.9, kappa: 2, warmup: 0}", {0.0f, 0.0f}, 1);
  *g.worker_lr_factor = 0.5;
  g.exchange(0, {1.0f, -2.0f}, {0.0f, 0.0f}, 0);
  check_vec("theta = 2 * (-0.05 g)", g.weights(), {-0.1, 0.2});
}

TEST_CASE("dc_asgd: the Taylor correction uses the weights last sent to that worker") {
  Stub s("algorithm: {name: dc_asgd, warmup: 0, lambda: 0.5, adaptive: false}", {1.0f, 1.0f}, 2);
  // Worker 0 first: backup = theta0, no correction: theta1 = theta0 - 0.1 g
  s.exchange(0, {2.0f, -1.0f}, {}, 0);
  check_vec("theta1", s.weights(), {0.8, 1.1});
  // Worker 1 computed on theta0 too: g~ = g + 0.5 g^2 (theta1 - theta0), g = (1, 2)
  // = (1 + 0.5 * 1 * -0.2, 2 + 0.5 * 4 * 0.1) = (0.9, 2.2); theta2 = theta1 - 0.1 g~
  s.exchange(1, {1.0f, 2.0f}, {}, 0);
  check_vec("theta2", s.weights(), {0.8 - 0.09, 1.1 - 0.22});
  // Worker 0 again: its backup is theta1 now.
  const std::vector<float> t2 = s.weights();
  s.exchange(0, {1.0f, 1.0f}, {}, 1);
  check_vec("theta3", s.weights(), {t2[0] - 0.1 * (1 + 0.5 * (t2[0] - 0.8)), t2[1] - 0.1 * (1 + 0.5 * (t2[1] - 1.1))},
            1e-5);
  // staleness_scale: inverse: the same corrected gradient, the step's learning rate / staleness.
  Stub l("algorithm: {name: dc_asgd, warmup: 0, lambda: 0.5, adaptive: false, staleness_scale: inverse}", {1.0f, 1.0f},
         2);
  l.exchange(0, {2.0f, -1.0f}, {}, 0);  // staleness 0: full step
  l.exchange(1, {1.0f, 2.0f}, {}, -1);  // pulled at -1, master at version 1: staleness 2, lr / 2
  check_vec("theta2, lr / 2", l.weights(), {0.8 - 0.09 / 2, 1.1 - 0.22 / 2});
  Stub lq("algorithm: {name: dc_asgd, warmup: 0, lambda: 0.5, adaptive: false, staleness_scale: inverse_sqrt}",
          {1.0f, 1.0f}, 2);
  lq.exchange(0, {2.0f, -1.0f}, {}, 0);
  lq.exchange(1, {1.0f, 2.0f}, {}, -1);  // staleness 2: lr / sqrt(2)
  check_vec("theta2, lr / sqrt(2)", lq.weights(), {0.8 - 0.09 / std::sqrt(2.0), 1.1 - 0.22 / std::sqrt(2.0)}, 1e-6);
  // The default, adaptive: lambda = 2 / sqrt(MS), MS = 0.05 g^2 after one update, 0.0975 after two.
  Stub a("algorithm: {name: dc_asgd, warmup: 0}", {1.0f}, 2);
  a.exchange(0, {1.0f}, {}, 0);
  check_vec("adaptive theta1", a.weights(), {0.9});
  a.exchange(1, {1.0f}, {}, 0);  // computed on theta0: g~ = 1 + (2 / sqrt(0.0975)) (0.9 - 1)
  check_vec("adaptive theta2", a.weights(), {0.9 - 0.1 * (1 - 2 / std::sqrt(0.0975) * 0.1)}, 1e-5);
}

TEST_CASE("warm-up: the master optimizer's learning rate ramps over the first versions (default: one per worker)") {
  // 4 workers, SGD lr 0.1, gradient 1 each time, no staleness: steps 0.025, 0.05, 0.075, 0.1, 0.1.
  Stub s("algorithm: {name: downpour}", {0.0f}, 4);
  std::vector<double> want;
  double theta = 0;
  for (int k = 0; k < 5; ++k) {
    s.exchange(0, {1.0f}, {}, k);  // pulled at the current version: staleness 0
    theta -= 0.1 * std::min(1.0, (k + 1) / 4.0);
    check_vec("theta", s.weights(), {theta});
  }
  // An explicit number of versions, and sync, whose version is a round.
  Stub y("algorithm: {name: sync, warmup: 2}", {0.0f}, 1);
  y.exchange(0, {1.0f}, {}, 0);
  y.exchange(0, {1.0f}, {}, 1);
  y.exchange(0, {1.0f}, {}, 2);
  check_vec("sync warmed over 2 rounds", y.weights(), {-0.05 - 0.1 - 0.1});
  // One worker is never warmed up by default; 0 turns it off.
  Stub one("algorithm: {name: dc_asgd}", {0.0f}, 1);
  one.exchange(0, {1.0f}, {}, 0);
  check_vec("one worker: full step", one.weights(), {-0.1});
  CHECK(Stub("algorithm: {name: downpour, warmup: 0}", {0.0f}, 4).alg->describe().find("no warm-up") !=
        std::string::npos);
  // GEM: its master adds w_k times the k-th update; a raw submit shows the ramp (2 workers: 1/2, 1).
  Stub g("algorithm: {name: gem}", {0.0f}, 2);
  const std::vector<float> p = g.payload({1.0f});
  g.submit(0, p, 0);
  check_vec("gem: half the first update", g.weights(), {0.5});
  g.submit(1, p, 1);
  check_vec("gem: then all of it", g.weights(), {1.5});
}

TEST_CASE("rule parameters are validated with the key and line") {
  auto problems = [](const std::string& yaml) {
    ConfigDocument doc = ConfigDocument::parse(yaml, "alg.yaml");
    ConfigNode root = doc.root();
    ConfigNode sec = root.section("algorithm");
    make_algorithm(sec);
    try {
      doc.finish();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string names;
  for (const auto& n : algorithm_names()) names += (names.empty() ? "" : ", ") + n;
  CHECK(names.starts_with("sync, downpour, easgd, gem, dc_asgd"));
  CHECK(problems("algorithm: {name: hogwild}")
            .find("algorithm.name: value 'hogwild' is not allowed: expected one of " + names) != std::string::npos);
  CHECK(
      problems("algorithm: {name: easgd, alpha: 2}").find("alg.yaml:1:33: algorithm.alpha: value 2 is out of range") !=
      std::string::npos);
  CHECK(problems("algorithm: {name: gem, kapa: 2}").find("algorithm.kapa: unknown key") != std::string::npos);
  CHECK(problems("algorithm: {name: downpour, warmup: soon}")
            .find("algorithm.warmup: 'soon': expected a number of versions") != std::string::npos);
  CHECK(problems("algorithm: {name: downpour, lookahead: soon}")
            .find("algorithm.lookahead: 'soon': expected a number of versions") != std::string::npos);
  CHECK(problems("algorithm: {name: downpour, worker: local, lookahead: 3}")
            .find("algorithm.lookahead: look-ahead needs the master's own steps: expected worker: gradients") !=
        std::string::npos);
  CHECK(problems("algorithm:\n  name: gem\n  clamp: [3, 1]\n").find("algorithm.clamp: expected [lo, hi]") !=
        std::string::npos);
}

TEST_CASE("a stub cluster of virtual workers converges on a quadratic with every registered rule") {
  // f(w) = 1/2 |w - w*|^2, gradient w - w*. Four virtual workers served round-robin, each computing
  // its gradient at the weights it pulled last (staleness 3 in the asynchronous rules). Every rule
  // of the registry runs with its defaults, plus the variants listed.
  const std::vector<float> target = {1.0f, -2.0f, 0.5f, 3.0f};
  // Defaults of every registered rule: must move towards the optimum without diverging (GEM's
  // default proposals are RMSprop's at 2e-4 per weight: slow on this quadratic). Tuned cases: must
  // get within 5 % of the starting distance.
  std::vector<std::pair<std::string, double>> cases;
  for (const auto& name : algorithm_names()) cases.emplace_back(fmt::format("algorithm: {{name: {}}}", name), 0.9);
  for (const char* yaml :
       {"algorithm: {name: sync}", "algorithm: {name: downpour}", "algorithm: {name: dc_asgd}",
        "algorithm: {name: gem, proposal: sgd, lr: 0.05, kappa: 1}", "algorithm: {name: downpour, worker: local}",
        "algorithm: {name: easgd}", "algorithm: {name: downpour, staleness_scale: none, lookahead: staleness}"})
    cases.emplace_back(yaml, 0.05);
  for (const auto& [yaml, ratio] : cases) {
    INFO(yaml);
    const int W = 4;
    Stub s(yaml, {0, 0, 0, 0}, W);
    std::vector<std::vector<float>> local(W, s.weights());
    std::vector<std::int64_t> pulled(W, 0);
    auto dist = [&] {
      const auto w = s.weights();
      double d = 0;
      for (std::size_t i = 0; i < target.size(); ++i) d += (w[i] - target[i]) * (w[i] - target[i]);
      return std::sqrt(d);
    };
    const double d0 = dist();
    for (int round = 0; round < 150; ++round) {
      for (int w = 0; w < W; ++w) {
        std::vector<float>& x = local[static_cast<std::size_t>(w)];
        std::vector<float> g(target.size());
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = x[i] - target[i];
        std::vector<float> update = g;
        if (s.alg->worker_mode() == WorkerMode::local) {
          const std::vector<float> before = x;
          for (std::size_t i = 0; i < g.size(); ++i) x[i] -= 0.1f * g[i];  // a local SGD step
          update = s.alg->payload() == Payload::weights ? x : std::vector<float>(g.size());
          if (s.alg->payload() == Payload::delta)
            for (std::size_t i = 0; i < g.size(); ++i) update[i] = x[i] - before[i];
        }
        Decision d;
        x = s.exchange(w, update, x, pulled[static_cast<std::size_t>(w)], &d);
        pulled[static_cast<std::size_t>(w)] = s.version();
        // A closed round answers every held worker with the new weights.
        for (int k : d.round) {
          local[static_cast<std::size_t>(k)] = s.weights();
          pulled[static_cast<std::size_t>(k)] = s.version();
        }
      }
    }
    MESSAGE(yaml << ": distance to the optimum " << d0 << " -> " << dist());
    CHECK(dist() < ratio * d0);
  }
}
