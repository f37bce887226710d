// The classifier test (classifier.hpp).
#include "mpigan/physics/classifier.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/nn/activation.hpp"
#include "mpigan/nn/dense.hpp"
#include "mpigan/nn/loss.hpp"
#include "mpigan/nn/network.hpp"
#include "mpigan/nn/optimizer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace mpigan::physics {

double roc_auc(std::span<const double> scores, std::span<const int> labels) {
  MPIGAN_CHECK(scores.size() == labels.size(), "roc_auc: {} scores for {} labels", scores.size(), labels.size());
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney U from the ranks, tied scores sharing their mean rank.
  double rank_sum = 0;
  std::int64_t pos = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k)
      if (labels[order[k]] == 1) {
        rank_sum += mean_rank;
        ++pos;
      }
    i = j;
  }
  const auto neg = static_cast<std::int64_t>(scores.size()) - pos;
  MPIGAN_CHECK(pos > 0 && neg > 0, "roc_auc: {} positives and {} negatives; both classes are needed", pos, neg);
  const double p = static_cast<double>(pos), n = static_cast<double>(neg);
  return (rank_sum - p * (p + 1) / 2) / (p * n);
}

namespace {

struct Split {
  std::vector<float> x;  ///< rows x d
  std::vector<float> y;  ///< rows
  std::int64_t rows() const { return static_cast<std::int64_t>(y.size()); }
};

/// Forward pass of @p rows of @p s starting at @p r0: the sigmoid outputs.
std::vector<float> predict(nn::Network& net, Backend& be, const Split& s, std::int64_t r0, std::int64_t rows,
                           std::int64_t d, nn::Phase phase) {
  const Tensor in = Tensor::from(
      {rows, d}, std::span(s.x).subspan(static_cast<std::size_t>(r0 * d), static_cast<std::size_t>(rows * d)));
  nn::ForwardContext ctx;
  ctx.phase = phase;
  const Tensor out = be.to_host(net.forward(in, ctx).front());
  return {out.data(), out.data() + rows};
}

double mean_bce(nn::Network& net, Backend& be, const Split& s, std::int64_t d, std::vector<float>* scores) {
  double sum = 0;
  for (std::int64_t r0 = 0; r0 < s.rows(); r0 += 1024) {
    const std::int64_t k = std::min<std::int64_t>(1024, s.rows() - r0);
    const auto p = predict(net, be, s, r0, k, d, nn::Phase::infer);
    sum += nn::loss_value_and_grad(nn::LossKind::bce, p, std::span(s.y).subspan(static_cast<std::size_t>(r0), k), 1.0f,
                                   {}) *
           static_cast<double>(k);
    if (scores) scores->insert(scores->end(), p.begin(), p.end());
  }
  return sum / static_cast<double>(s.rows());
}

}  // namespace

ClassifierResult classifier_test(const Observables& ref, const Observables& gen, const ClassifierOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MPIGAN_CHECK(ref.dims == gen.dims, "classifier: reference showers of {} cells, generated of {}", ref.dims.to_string(),
               gen.dims.to_string());
  const std::int64_t n = std::min(ref.events, gen.events);
  MPIGAN_CHECK(n >= 50, "classifier: {} reference and {} generated events; at least 50 of each are needed", ref.events,
               gen.events);
  FeatureMatrix fr = high_level_features(ref, o.features), fg = high_level_features(gen, o.features);
  const FeatureScaler scaler = FeatureScaler::fit(fr, FeatureScaling::standardise);
  scaler.apply(fr);
  scaler.apply(fg);
  const std::int64_t d = fr.cols;

  // Balanced classes, shuffled, split 60/20/20.
  Rng rng(o.seed, 0xC1A551F1ull);
  auto pick = [&](std::int64_t total) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(total));
    std::iota(idx.begin(), idx.end(), 0);
    for (std::int64_t i = total - 1; i > 0; --i)
      std::swap(idx[static_cast<std::size_t>(i)],
                idx[static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(i + 1)) % (i + 1)]);
    idx.resize(static_cast<std::size_t>(n));
    return idx;
  };
  std::vector<std::pair<int, std::int64_t>> events;  // (label, row)
  for (std::int64_t r : pick(ref.events)) events.emplace_back(0, r);
  for (std::int64_t r : pick(gen.events)) events.emplace_back(1, r);
  for (std::size_t i = events.size() - 1; i > 0; --i)
    std::swap(events[i], events[static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(i + 1)) % (i + 1)]);
  const std::size_t n_train = events.size() * 6 / 10, n_val = events.size() * 2 / 10;
  Split train, val, test;
  for (std::size_t i = 0; i < events.size(); ++i) {
    Split& s = i < n_train ? train : (i < n_train + n_val ? val : test);
    const FeatureMatrix& m = events[i].first == 0 ? fr : fg;
    for (std::int64_t c = 0; c < d; ++c) s.x.push_back(static_cast<float>(m.at(events[i].second, c)));
    s.y.push_back(static_cast<float>(events[i].first));
  }

  BackendOptions bo;
  bo.threads = o.threads;
  auto be = make_backend("cpu", bo);
  nn::Network net("classifier");
  std::vector<std::unique_ptr<nn::Layer>> layers;
  layers.push_back(std::make_unique<nn::Dense>("dense1", d, o.hidden));
  layers.push_back(std::make_unique<nn::Activation>("lrelu1", nn::Activation::leaky_relu(0.2f)));
  layers.push_back(std::make_unique<nn::Dense>("dense2", o.hidden, o.hidden));
  layers.push_back(std::make_unique<nn::Activation>("lrelu2", nn::Activation::leaky_relu(0.2f)));
  layers.push_back(std::make_unique<nn::Dense>("out", o.hidden, 1));
  layers.push_back(std::make_unique<nn::Activation>("sigmoid", nn::Activation::sigmoid()));
  net.add_node("mlp", "input", std::move(layers), true);
  net.build(*be, Shape{d});
  Rng init(o.seed, 0x1A17ull);
  net.initialize(init);
  nn::OptimizerConfig oc = nn::OptimizerConfig::defaults("adam");
  oc.lr = o.lr;
  auto opt = nn::make_optimizer(oc, *be, net.weights());

  ClassifierResult r;
  std::vector<float> best(net.weights().size());
  auto save = [&](std::vector<float>& to) {
    const Tensor h = be->to_host(net.weights().flat());
    std::copy(h.data(), h.data() + to.size(), to.begin());
  };
  save(best);
  double best_val = mean_bce(net, *be, val, d, nullptr);
  int since_best = 0;
  std::vector<std::int64_t> order(static_cast<std::size_t>(train.rows()));
  std::iota(order.begin(), order.end(), 0);
  Split batch;
  for (int epoch = 0; epoch < o.epochs && since_best < o.patience; ++epoch) {
    ++r.epochs_run;
    for (std::size_t i = order.size() - 1; i > 0; --i)
      std::swap(order[i], order[static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(i + 1)) % (i + 1)]);
    for (std::size_t b0 = 0; b0 < order.size(); b0 += static_cast<std::size_t>(o.batch)) {
      const std::size_t k = std::min(order.size() - b0, static_cast<std::size_t>(o.batch));
      batch.x.clear();
      batch.y.clear();
      for (std::size_t i = b0; i < b0 + k; ++i) {
        const auto row = static_cast<std::size_t>(order[i]);
        batch.x.insert(batch.x.end(), train.x.begin() + static_cast<std::ptrdiff_t>(row * d),
                       train.x.begin() + static_cast<std::ptrdiff_t>((row + 1) * d));
        batch.y.push_back(train.y[row]);
      }
      const auto p = predict(net, *be, batch, 0, static_cast<std::int64_t>(k), d, nn::Phase::train);
      std::vector<float> diff(k);
      nn::loss_value_and_grad(nn::LossKind::bce, p, batch.y, 1.0f, diff);
      net.zero_grads();
      Tensor g = Tensor::from({static_cast<std::int64_t>(k), 1}, diff);
      nn::BackwardContext bc;
      bc.need_diff_src = false;
      net.backward({g}, bc);
      opt->step(net.weights(), net.grads());
    }
    const double v = mean_bce(net, *be, val, d, nullptr);
    if (v < best_val) {
      best_val = v;
      since_best = 0;
      save(best);
    } else {
      ++since_best;
    }
  }
  Tensor flat = net.weights().flat();
  be->from_host(Tensor::from(flat.shape(), best), flat);
  std::vector<float> scores;
  r.test_bce = mean_bce(net, *be, test, d, &scores);
  std::vector<double> s(scores.begin(), scores.end());
  std::vector<int> labels(test.y.begin(), test.y.end());
  r.auc = roc_auc(s, labels);
  // Hanley & McNeil (1982): the AUC's standard error from its value and the class sizes.
  const double a = r.auc, np = static_cast<double>(std::count(labels.begin(), labels.end(), 1)),
               nn_ = static_cast<double>(labels.size()) - np;
  const double q1 = a / (2 - a), q2 = 2 * a * a / (1 + a);
  r.auc_error =
      std::sqrt(std::max(0.0, (a * (1 - a) + (np - 1) * (q1 - a * a) + (nn_ - 1) * (q2 - a * a)) / (np * nn_)));
  r.jsd = std::max(0.0, (std::log(2.0) - r.test_bce) / std::log(2.0));
  r.train_events = train.rows();
  r.test_events = test.rows();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mpigan::physics
