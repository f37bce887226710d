// The classifier test (classifier.hpp): balanced, shuffled train / validation / test splits of the
// standardised high-level features, an MLP of mpigan's nn layers trained with Adam on BCE with
// early stopping on the validation loss, AUC and JSD on the test split. Features travel as floats
// (the network's type) in row-major rows x d host buffers; labels reference 0, generated 1.
#include "mpigan/physics/classifier.hpp"
#include "mpigan/physics/stats.hpp"

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
#include <string>
#include <vector>

namespace mpigan::physics {

double roc_auc(std::span<const double> scores, std::span<const int> labels) {
  MPIGAN_CHECK(scores.size() == labels.size(), "roc_auc: {} scores for {} labels", scores.size(), labels.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    MPIGAN_CHECK(labels[i] == 0 || labels[i] == 1, "roc_auc: label {} is {}; labels must be 0 or 1", i, labels[i]);
    MPIGAN_CHECK(std::isfinite(scores[i]), "roc_auc: score {} is {}; scores must be finite", i, scores[i]);
  }
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

// Rng streams of one seed: what is drawn for the data does not shift the weights, and vice versa.
constexpr std::uint64_t kSplitStream = 0xC1A551F1ull, kInitStream = 0x1A17ull, kBatchStream = 0xBA7C4ull;
constexpr std::int64_t kEvalBatch = 1024;

struct Split {
  std::vector<float> x;  ///< rows x d
  std::vector<float> y;  ///< rows
  std::int64_t rows() const { return static_cast<std::int64_t>(y.size()); }
};

struct Splits {
  std::int64_t d = 0;
  Split train, validation, test;
};

template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {  // Fisher-Yates
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(rng.below(i))]);
}

void check_options(const ClassifierOptions& o) {
  MPIGAN_CHECK(o.hidden >= 1 && o.layers >= 1, "classifier: hidden = {}, layers = {}; both must be >= 1", o.hidden,
               o.layers);
  MPIGAN_CHECK(o.epochs >= 1 && o.patience >= 1 && o.batch >= 1,
               "classifier: epochs = {}, patience = {}, batch = {}; each must be >= 1", o.epochs, o.patience, o.batch);
  MPIGAN_CHECK(o.threads >= 0, "classifier: threads = {}; it must be >= 0 (0: the process's)", o.threads);
  MPIGAN_CHECK(o.lr > 0 && std::isfinite(o.lr), "classifier: lr = {}; it must be > 0", o.lr);
  MPIGAN_CHECK(o.repeats >= 1, "classifier: repeats = {}; it must be >= 1", o.repeats);
  MPIGAN_CHECK(o.max_events == 0 || o.max_events >= kClassifierMinEvents,
               "classifier: max_events = {}; it must be 0 (all events) or >= {}", o.max_events, kClassifierMinEvents);
  MPIGAN_CHECK(o.train_fraction > 0 && o.validation_fraction > 0 && o.train_fraction + o.validation_fraction < 1,
               "classifier: train_fraction {} and validation_fraction {}; each must be > 0 and their sum < 1 (the "
               "test split gets the rest)",
               o.train_fraction, o.validation_fraction);
}

/// @p m scaled with the reference's scaler, checked finite (a NaN would poison the training
/// silently), as float rows; @p sample names it in the error.
std::vector<float> scaled_rows(FeatureMatrix& m, const FeatureScaler& scaler, const char* sample) {
  scaler.apply(m);
  std::vector<float> out(m.values.size());
  for (std::size_t i = 0; i < m.values.size(); ++i) {
    MPIGAN_CHECK(std::isfinite(m.values[i]), "classifier: {} event {} has feature '{}' = {} (after scaling)", sample,
                 static_cast<std::int64_t>(i) / m.cols, m.names[i % static_cast<std::size_t>(m.cols)], m.values[i]);
    out[i] = static_cast<float>(m.values[i]);
  }
  return out;
}

/// Balanced classes (n events of each, drawn without replacement), each class split by the
/// fractions on its own, every split shuffled.
Splits make_splits(const Observables& ref, const Observables& gen, const ClassifierOptions& o) {
  FeatureMatrix fr = high_level_features(ref, o.features), fg = high_level_features(gen, o.features);
  MPIGAN_CHECK_SHAPE(fr.cols == fg.cols, "classifier: {} reference features, {} generated", fr.cols, fg.cols);
  const FeatureScaler scaler = FeatureScaler::fit(fr, FeatureScaling::standardise);
  const std::vector<float> xr = scaled_rows(fr, scaler, "reference"), xg = scaled_rows(fg, scaler, "generated");
  Splits s;
  s.d = fr.cols;
  std::int64_t n = std::min(ref.events, gen.events);
  if (o.max_events > 0) n = std::min(n, o.max_events);
  const auto n_train = static_cast<std::int64_t>(std::floor(o.train_fraction * static_cast<double>(n)));
  const auto n_val = static_cast<std::int64_t>(std::floor(o.validation_fraction * static_cast<double>(n)));
  MPIGAN_CHECK(n_train >= 1 && n_val >= 1 && n - n_train - n_val >= 1,
               "classifier: {} events per class split into {} train, {} validation, {} test; each needs >= 1", n,
               n_train, n_val, n - n_train - n_val);
  Rng rng(o.seed, kSplitStream);
  auto add = [&](const std::vector<float>& x, std::int64_t total, float label) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(total));
    std::iota(idx.begin(), idx.end(), 0);
    shuffle(idx, rng);
    for (std::int64_t i = 0; i < n; ++i) {
      Split& to = i < n_train ? s.train : (i < n_train + n_val ? s.validation : s.test);
      const auto row = x.begin() + static_cast<std::ptrdiff_t>(idx[static_cast<std::size_t>(i)] * s.d);
      to.x.insert(to.x.end(), row, row + static_cast<std::ptrdiff_t>(s.d));
      to.y.push_back(label);
    }
  };
  add(xr, ref.events, 0.f);
  add(xg, gen.events, 1.f);
  for (Split* split : {&s.train, &s.validation, &s.test}) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(split->rows()));
    std::iota(order.begin(), order.end(), 0);
    shuffle(order, rng);
    Split shuffled;
    for (const std::int64_t r : order) {
      const auto row = split->x.begin() + static_cast<std::ptrdiff_t>(r * s.d);
      shuffled.x.insert(shuffled.x.end(), row, row + static_cast<std::ptrdiff_t>(s.d));
      shuffled.y.push_back(split->y[static_cast<std::size_t>(r)]);
    }
    *split = std::move(shuffled);
  }
  return s;
}

/// Builds and initialises @p net in place (its layers hold views of its parameter buffers).
void build_network(nn::Network& net, Backend& be, std::int64_t d, const ClassifierOptions& o) {
  std::vector<std::unique_ptr<nn::Layer>> layers;
  std::int64_t in = d;
  for (int l = 1; l <= o.layers; ++l) {
    layers.push_back(std::make_unique<nn::Dense>("dense" + std::to_string(l), in, o.hidden));
    layers.push_back(std::make_unique<nn::Activation>("lrelu" + std::to_string(l), nn::Activation::leaky_relu(0.2f)));
    in = o.hidden;
  }
  layers.push_back(std::make_unique<nn::Dense>("out", in, 1));
  layers.push_back(std::make_unique<nn::Activation>("sigmoid", nn::Activation::sigmoid()));
  net.add_node("mlp", "input", std::move(layers), true);
  net.build(be, Shape{d});
  Rng init(o.seed, kInitStream);
  net.initialize(init);
}

/// The sigmoid outputs for @p rows rows of @p x (rows x d floats, host).
std::vector<float> predict(nn::Network& net, Backend& be, std::span<const float> x, std::int64_t rows, std::int64_t d,
                           nn::Phase phase) {
  const Tensor in = Tensor::from({rows, d}, x.first(static_cast<std::size_t>(rows * d)));
  nn::ForwardContext ctx;
  ctx.phase = phase;
  const Tensor out = be.to_host(net.forward(in, ctx).front());
  return {out.data(), out.data() + rows};
}

/// The mean BCE over @p s; appends the scores to @p scores when given.
double mean_bce(nn::Network& net, Backend& be, const Split& s, std::int64_t d, std::vector<float>* scores) {
  double sum = 0;
  for (std::int64_t r0 = 0; r0 < s.rows(); r0 += kEvalBatch) {
    const std::int64_t k = std::min(kEvalBatch, s.rows() - r0);
    const auto p = predict(net, be, std::span(s.x).subspan(static_cast<std::size_t>(r0 * d)), k, d, nn::Phase::infer);
    const auto y = std::span(s.y).subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(k));
    sum += nn::loss_value_and_grad(nn::LossKind::bce, p, y, 1.0f, {}) * static_cast<double>(k);
    if (scores) scores->insert(scores->end(), p.begin(), p.end());
  }
  return sum / static_cast<double>(s.rows());
}

std::vector<float> host_weights(nn::Network& net, Backend& be) {
  const Tensor h = be.to_host(net.weights().flat());
  return {h.data(), h.data() + net.weights().size()};
}

/// Adam on the training split, early stopping on the validation BCE; leaves the best weights in
/// @p net and fills epochs_run, best_epoch and validation_bce of @p r.
void train(nn::Network& net, Backend& be, const Splits& s, const ClassifierOptions& o, ClassifierResult& r) {
  nn::OptimizerConfig oc = nn::OptimizerConfig::defaults("adam");
  oc.lr = o.lr;
  auto opt = nn::make_optimizer(oc, be, net.weights());
  Rng rng(o.seed, kBatchStream);
  std::vector<float> best = host_weights(net, be);
  double best_val = mean_bce(net, be, s.validation, s.d, nullptr);
  std::vector<std::int64_t> order(static_cast<std::size_t>(s.train.rows()));
  std::iota(order.begin(), order.end(), 0);
  Split batch;
  std::vector<float> diff;
  const auto b = static_cast<std::size_t>(o.batch);
  for (int epoch = 1, since_best = 0; epoch <= o.epochs && since_best < o.patience; ++epoch) {
    r.epochs_run = epoch;
    shuffle(order, rng);
    for (std::size_t b0 = 0; b0 < order.size(); b0 += b) {
      const std::size_t k = std::min(order.size() - b0, b);
      batch.x.clear();
      batch.y.clear();
      for (std::size_t i = b0; i < b0 + k; ++i) {
        const auto row = s.train.x.begin() + static_cast<std::ptrdiff_t>(order[i] * s.d);
        batch.x.insert(batch.x.end(), row, row + static_cast<std::ptrdiff_t>(s.d));
        batch.y.push_back(s.train.y[static_cast<std::size_t>(order[i])]);
      }
      const auto p = predict(net, be, batch.x, static_cast<std::int64_t>(k), s.d, nn::Phase::train);
      diff.assign(k, 0.f);
      nn::loss_value_and_grad(nn::LossKind::bce, p, batch.y, 1.0f, diff);
      net.zero_grads();
      nn::BackwardContext bc;
      bc.need_diff_src = false;
      net.backward({Tensor::from({static_cast<std::int64_t>(k), 1}, diff)}, bc);
      opt->step(net.weights(), net.grads());
    }
    const double v = mean_bce(net, be, s.validation, s.d, nullptr);
    if (v < best_val) {
      best_val = v;
      best = host_weights(net, be);
      r.best_epoch = epoch;
      since_best = 0;
    } else {
      ++since_best;
    }
  }
  Tensor flat = net.weights().flat();
  be.from_host(Tensor::from(flat.shape(), best), flat);
  r.validation_bce = best_val;
}

/// Hanley & McNeil (1982): the AUC's standard error from its value @p a and the class sizes.
double hanley_mcneil_error(double a, double n_pos, double n_neg) {
  const double q1 = a / (2 - a), q2 = 2 * a * a / (1 + a);
  return std::sqrt(
      std::max(0.0, (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)));
}

/// One classifier, trained and scored with @p o's seed.
ClassifierResult classifier_once(const Observables& ref, const Observables& gen, Backend& backend,
                                 const ClassifierOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MPIGAN_CHECK_SHAPE(ref.dims == gen.dims, "classifier: reference showers of {} cells, generated of {}",
                     ref.dims.to_string(), gen.dims.to_string());
  MPIGAN_CHECK(std::min(ref.events, gen.events) >= kClassifierMinEvents,
               "classifier: {} reference and {} generated events; at least {} of each are needed", ref.events,
               gen.events, kClassifierMinEvents);
  const Splits s = make_splits(ref, gen, o);
  nn::Network net("classifier");
  build_network(net, backend, s.d, o);
  ClassifierResult r;
  train(net, backend, s, o, r);

  std::vector<float> scores;
  r.test_bce = mean_bce(net, backend, s.test, s.d, &scores);
  const std::vector<double> sd(scores.begin(), scores.end());
  const std::vector<int> labels(s.test.y.begin(), s.test.y.end());
  r.auc = roc_auc(sd, labels);
  const auto n_pos = static_cast<double>(std::count(labels.begin(), labels.end(), 1));
  r.auc_error = hanley_mcneil_error(r.auc, n_pos, static_cast<double>(labels.size()) - n_pos);
  r.jsd = std::max(0.0, (std::log(2.0) - r.test_bce) / std::log(2.0));
  r.train_events = s.train.rows();
  r.validation_events = s.validation.rows();
  r.test_events = s.test.rows();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

ClassifierResult classifier_test(const Observables& ref, const Observables& gen, Backend& backend,
                                 const ClassifierOptions& o) {
  check_options(o);
  const ScopedHostThreads threads(o.threads);
  if (o.repeats == 1) return classifier_once(ref, gen, backend, o);
  // Classifiers with seeds seed, seed + 1, ...: each its own subsample, split, weights and batch
  // order. The means are reported, the AUCs' standard deviation beside them; the event counts and
  // epochs are the first classifier's.
  ClassifierResult r;
  std::vector<double> aucs;
  ClassifierOptions one = o;
  for (int k = 0; k < o.repeats; ++k) {
    one.seed = o.seed + static_cast<std::uint64_t>(k);
    const ClassifierResult c = classifier_once(ref, gen, backend, one);
    if (k == 0)
      r = c;
    else {
      r.auc_error += c.auc_error;
      r.jsd += c.jsd;
      r.test_bce += c.test_bce;
      r.validation_bce += c.validation_bce;
      r.seconds += c.seconds;
    }
    aucs.push_back(c.auc);
  }
  const double n = o.repeats;
  r.auc = mean(aucs);
  r.auc_spread = std::sqrt(variance(aucs));
  r.auc_error /= n;
  r.jsd /= n;
  r.test_bce /= n;
  r.validation_bce /= n;
  r.repeats = o.repeats;
  return r;
}

ClassifierResult classifier_test(const Observables& ref, const Observables& gen, const ClassifierOptions& o) {
  const auto be = make_backend("cpu");
  return classifier_test(ref, gen, *be, o);
}

}  // namespace mpigan::physics
