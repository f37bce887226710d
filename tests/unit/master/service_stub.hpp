// A stub cluster for the serial tests of the update rules and the update service: the real
// master-side UpdateService and W workers' real WorkerRules, wired in one process without MPI.
// Both networks carry the same test vector (so G and D must end equal), the BN state has
// `state` floats per network. A ParameterSet pads its buffer to 16 floats: vectors are padded
// with zeros on the way in and cut back to n on the way out.
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/core/config.hpp"
#include "mpigan/master/update_service.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace mpigan::test {

struct ServiceStub {
  std::size_t n = 0;
  std::unique_ptr<Backend> be = make_backend("cpu");
  ParameterSet layout;
  std::unique_ptr<algos::Algorithm> alg;
  std::unique_ptr<master::UpdateService> service;
  std::vector<std::array<std::unique_ptr<algos::WorkerRule>, 2>> workers;
  std::vector<std::vector<float>> slots;  ///< each child's reply buffer
  /// The learning-rate schedule's factor the workers' rules read (a worker's last reply's), boxed
  /// so that its address stays valid when the stub moves.
  std::unique_ptr<double> worker_lr_factor = std::make_unique<double>(1.0);

  static nn::OptimizerConfig sgd(double lr) {
    auto c = nn::OptimizerConfig::defaults("sgd");
    c.lr = lr;
    return c;
  }

  /// The rule the experiment text @p yaml's algorithm section names (the registry's).
  ServiceStub(const std::string& yaml, std::vector<float> theta0, int nworkers, nn::OptimizerConfig opt = sgd(0.1),
              master::UpdateService::Options options = {}, std::size_t state = 0)
      : ServiceStub(from_yaml(yaml), std::move(theta0), nworkers, opt, options, state) {}

  /// Any rule, registered or not (the guide's example rule).
  ServiceStub(std::unique_ptr<algos::Algorithm> rule, std::vector<float> theta0, int nworkers,
              nn::OptimizerConfig opt = sgd(0.1), master::UpdateService::Options options = {}, std::size_t state = 0)
      : alg(std::move(rule)) {
    n = theta0.size();
    layout.add("w", {static_cast<std::int64_t>(n)});
    layout.allocate(*be);
    std::copy(theta0.begin(), theta0.end(), layout.data());
    master::UpdateService::Networks nets;
    nets.weights = {&layout, &layout};
    nets.state = {std::vector<float>(state, 0.0f), std::vector<float>(state, 0.0f)};
    nets.backend = be.get();
    nets.optimizers = {opt, opt};
    options.children = nworkers;
    const auto total = 2 * layout.size() + 2 * state;
    slots.assign(static_cast<std::size_t>(nworkers), std::vector<float>(total));
    service = std::make_unique<master::UpdateService>(
        *alg, nets, options, [this](int c) { return std::span<float>(slots[static_cast<std::size_t>(c)]); });
    for (int i = 0; i < nworkers; ++i) {
      workers.push_back({alg->make_worker({*be, layout, opt, nworkers, "generator", worker_lr_factor.get()}),
                         alg->make_worker({*be, layout, opt, nworkers, "discriminator", worker_lr_factor.get()})});
      // Every worker is given the initial weights first, as the master does at start.
      service->pull(i, slots[static_cast<std::size_t>(i)]);
    }
  }

  static std::unique_ptr<algos::Algorithm> from_yaml(const std::string& yaml) {
    ConfigDocument doc = ConfigDocument::parse(yaml, "alg.yaml");
    ConfigNode root = doc.root();
    ConfigNode sec = root.section("algorithm");
    auto a = algos::make_algorithm(sec);
    doc.finish();
    return a;
  }

  const dist::PayloadLayout& pl() const { return service->layout(); }
  std::vector<float> weights() const {
    const auto g = service->weights(models::Net::generator), d = service->weights(models::Net::discriminator);
    CHECK(std::equal(g.begin(), g.end(), d.begin()));  // both networks took the same updates
    return {g.begin(), g.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  std::int64_t version() const { return service->version(); }

  /// A payload with @p v (padded) in both weight blocks and @p state in both state blocks.
  std::vector<float> payload(const std::vector<float>& v, float state = 0.0f) const {
    std::vector<float> p(pl().total(), state);
    for (models::Net net : dist::kNets) {
      auto b = pl().block(net, std::span<float>(p));
      std::fill(b.begin(), b.end(), 0.0f);
      std::copy(v.begin(), v.end(), b.begin());
    }
    return p;
  }
  std::array<double, 3> sumsq(std::span<const float> p) const {
    std::array<double, 3> s{};
    for (std::size_t i = 0; i < p.size(); ++i) {
      const std::size_t k = i < pl().g ? 0 : i < pl().g + pl().d ? 1 : 2;
      s[k] += static_cast<double>(p[i]) * p[i];
    }
    return s;
  }
  /// Submit a raw payload from child @p w (the master side only).
  master::Decision submit(int w, std::span<const float> p, std::int64_t pulled, bool reply = true, bool stable = false,
                          std::int64_t samples = 1, std::array<double, 2> state_decay = {1.0, 1.0}) {
    std::span<float> r = reply ? std::span<float>(slots[static_cast<std::size_t>(w)]) : std::span<float>();
    return service->submit({w, pulled, samples, sumsq(p), p, stable, state_decay}, r);
  }

  /// A whole exchange of worker @p w as a group leader does it (push-pull, or pull-push for
  /// GEM-like rules): returns the worker's new local weights. A held update returns @p local.
  std::vector<float> exchange(int w, const std::vector<float>& update, std::vector<float> local, std::int64_t pulled,
                              master::Decision* decision = nullptr, algos::RuleStats* wstats = nullptr) {
    auto& rules = workers[static_cast<std::size_t>(w)];
    std::vector<float> p = payload(update), loc = payload(local);
    std::vector<float> master_now;
    const bool pull_push = alg->exchange() == algos::Exchange::pull_push;
    if (pull_push) {
      master_now.resize(pl().total());
      service->pull(w, master_now);
    }
    for (models::Net net : dist::kNets) {
      const auto ws = rules[dist::index(net)]->before_send(
          pl().block(net, std::span<float>(p)),
          pull_push ? pl().block(net, std::span<const float>(master_now)) : std::span<const float>(),
          pl().block(net, std::span<const float>(loc)));
      if (wstats && net == models::Net::generator) *wstats = ws;
    }
    const master::Decision d = submit(w, p, pulled, !pull_push);
    if (decision) *decision = d;
    if (d.outcome == master::Outcome::held) return local;
    const std::span<const float> reply =
        pull_push ? std::span<const float>(master_now) : slots[static_cast<std::size_t>(w)];
    for (models::Net net : dist::kNets)
      rules[dist::index(net)]->after_reply(pl().block(net, std::span<float>(loc)), pl().block(net, reply),
                                           pl().block(net, std::span<const float>(p)));
    return {loc.begin(), loc.begin() + static_cast<std::ptrdiff_t>(n)};
  }
};

}  // namespace mpigan::test
