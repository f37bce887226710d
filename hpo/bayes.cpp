// Bayesian optimisation (bayes.hpp): training data with imputed failures and constant lies, the
// acquisition functions with their gradients, and their maximisation over the encoded space.
#include "mpigan/hpo/bayes.hpp"
#include "mpigan/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <span>

namespace mpigan::hpo {

namespace {

/// Two encoded points closer than this in every coordinate are the same trial: far below any
/// meaningful difference of a hyper-parameter (1e-6 of its range), far above rounding.
constexpr double kSameTol = 1e-6;
/// Random draws tried for a point that is not a trial yet, before giving up and repeating one.
constexpr int kRandomTries = 100;
/// Local searches also start near the best trials (spearmint's practice): the optimum is often close.
constexpr int kTrialStarts = 2;
/// Those starts are moved off the trial by this standard deviation in the unit cube, where the
/// posterior std is near zero and flat.
constexpr double kTrialStartJitter = 0.01;

double norm_pdf(double z) {
  return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
}
double norm_cdf(double z) {
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

/// An acquisition's value and its derivatives w.r.t. the posterior mean and std.
struct Score {
  double value = 0, d_mu = 0, d_sigma = 0;
};

struct AcqContext {
  double y_best = 0;  ///< best finished value (original units)
  double xi_abs = 0;  ///< xi times the targets' scale
  double kappa = 0;
  double sigma_tiny = 0;  ///< below this the posterior is treated as certain
};

Score score(Acquisition a, double mu, double sigma, const AcqContext& c) {
  const double imp = c.y_best - mu - c.xi_abs;
  switch (a) {
    case Acquisition::ei: {
      if (sigma <= c.sigma_tiny) return {std::max(imp, 0.0), imp > 0 ? -1.0 : 0.0, 0.0};
      const double z = imp / sigma, cdf = norm_cdf(z), pdf = norm_pdf(z);
      return {imp * cdf + sigma * pdf, -cdf, pdf};
    }
    case Acquisition::pi: {
      if (sigma <= c.sigma_tiny) return {imp > 0 ? 1.0 : 0.0, 0.0, 0.0};
      const double z = imp / sigma, pdf = norm_pdf(z);
      return {norm_cdf(z), -pdf / sigma, -pdf * z / sigma};
    }
    case Acquisition::lcb:
      return {-(mu - c.kappa * sigma), -1.0, c.kappa};
    case Acquisition::hedge:
      break;
  }
  MPIGAN_THROW(Error, "bayes: score() of the hedge portfolio itself");
}

bool is_known(const Eigen::VectorXd& u, const std::vector<Eigen::VectorXd>& known) {
  return std::any_of(known.begin(), known.end(),
                     [&](const Eigen::VectorXd& k) { return (u - k).cwiseAbs().maxCoeff() < kSameTol; });
}

/// A member's best point: valid, not a trial yet.
struct Nominee {
  Point point;
  double value = 0;  ///< the acquisition at the point
  double mean = 0;   ///< the posterior mean there
};

/// Every trial must be a point of the space (encode() indexes one-hot blocks by the choice).
void check_trials(const SearchSpace& space, std::span<const Observation> done, std::span<const Point> pending) {
  for (std::size_t i = 0; i < done.size(); ++i)
    if (!space.contains(done[i].x))
      MPIGAN_THROW(Error,
                   "BayesOptimizer: finished trial {} ({} values) is not a point of the {}-dimensional search space", i,
                   done[i].x.size(), space.size());
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (!space.contains(pending[i]))
      MPIGAN_THROW(Error,
                   "BayesOptimizer: pending trial {} ({} values) is not a point of the {}-dimensional search space", i,
                   pending[i].size(), space.size());
}

}  // namespace

const char* acquisition_name(Acquisition a) {
  switch (a) {
    case Acquisition::ei:
      return "ei";
    case Acquisition::lcb:
      return "lcb";
    case Acquisition::pi:
      return "pi";
    case Acquisition::hedge:
      return "hedge";
  }
  return "?";
}

Acquisition acquisition_from_name(std::string_view name) {
  for (Acquisition a : {Acquisition::ei, Acquisition::lcb, Acquisition::pi, Acquisition::hedge})
    if (name == acquisition_name(a)) return a;
  MPIGAN_THROW(ConfigError, "acquisition '{}': expected one of ei, lcb, pi, hedge", name);
}

const char* liar_name(Liar l) {
  switch (l) {
    case Liar::min:
      return "min";
    case Liar::mean:
      return "mean";
    case Liar::max:
      return "max";
  }
  return "?";
}

Liar liar_from_name(std::string_view name) {
  for (Liar l : {Liar::min, Liar::mean, Liar::max})
    if (name == liar_name(l)) return l;
  MPIGAN_THROW(ConfigError, "liar '{}': expected one of min, mean, max", name);
}

BayesOptimizer::BayesOptimizer(SearchSpace space, BayesOptions options)
    : m_space(std::move(space)), m_options(std::move(options)) {
  const BayesOptions& o = m_options;
  if (m_space.size() == 0) MPIGAN_THROW(Error, "BayesOptimizer: the search space has no dimensions");
  if (!(o.xi >= 0) || !(o.kappa >= 0) || !(o.hedge_eta >= 0) || !std::isfinite(o.xi) || !std::isfinite(o.kappa) ||
      !std::isfinite(o.hedge_eta))
    MPIGAN_THROW(Error, "BayesOptions: xi = {}, kappa = {}, hedge_eta = {} (each must be finite, >= 0)", o.xi, o.kappa,
                 o.hedge_eta);
  if (o.n_initial < 0 || o.n_candidates < 1 || o.n_local_starts < 0 || o.local_max_evals < 1)
    MPIGAN_THROW(Error,
                 "BayesOptions: n_initial = {} (>= 0), n_candidates = {} (>= 1), n_local_starts = {} (>= 0), "
                 "local_max_evals = {} (>= 1)",
                 o.n_initial, o.n_candidates, o.n_local_starts, o.local_max_evals);
  GaussianProcess check(o.gp);  // validates the GP's options now rather than at the first suggestion
}

BayesOptimizer::TrainingSet BayesOptimizer::training_set(std::span<const Observation> done,
                                                         std::span<const Point> pending) const {
  check_trials(m_space, done, pending);
  std::vector<double> finished;
  for (const Observation& o : done) {
    if (o.failed) continue;
    if (!std::isfinite(o.y))
      MPIGAN_THROW(Error, "BayesOptimizer: a finished trial has objective {} (mark it failed)", o.y);
    finished.push_back(o.y);
  }
  if (finished.empty()) MPIGAN_THROW(Error, "BayesOptimizer::training_set: no finished trial");
  const double worst = *std::max_element(finished.begin(), finished.end());
  double lie = 0;
  switch (m_options.liar) {
    case Liar::min:
      lie = *std::min_element(finished.begin(), finished.end());
      break;
    case Liar::mean:
      lie = std::accumulate(finished.begin(), finished.end(), 0.0) / double(finished.size());
      break;
    case Liar::max:
      lie = worst;
      break;
  }
  TrainingSet ts;
  const auto rows = static_cast<Eigen::Index>(done.size() + pending.size());
  ts.X.resize(rows, static_cast<Eigen::Index>(m_space.encoded_size()));
  ts.y.resize(rows);
  Eigen::Index r = 0;
  for (const Observation& o : done) {
    ts.X.row(r) = m_space.encode(o.x).transpose();
    ts.y[r++] = o.failed ? worst : o.y;
  }
  for (const Point& p : pending) {
    ts.X.row(r) = m_space.encode(p).transpose();
    ts.y[r++] = lie;
  }
  ts.observed = static_cast<Eigen::Index>(done.size());
  ts.finished = static_cast<Eigen::Index>(finished.size());
  return ts;
}

namespace {

/// The model of one suggestion: hyper-parameters from the observed trials only, then the pending
/// ones added with their lie under those hyper-parameters. @p observed_scale: the targets' scale
/// of the observed trials alone (the acquisitions' xi and certainty are in its units).
GaussianProcess fit_model(const BayesOptions& o, const BayesOptimizer::TrainingSet& ts, bool pending, Rng& rng,
                          double& observed_scale) {
  GaussianProcess gp(o.gp);
  gp.fit(ts.X.topRows(ts.observed), ts.y.head(ts.observed), rng, true);
  observed_scale = gp.y_scale();
  if (pending) {
    const GpHyper hyper = gp.hyper();
    gp = GaussianProcess(o.gp);
    gp.set_hyper(hyper);
    gp.fit(ts.X, ts.y, rng, false);
  }
  return gp;
}

/// The numeric coordinates of the encoding (the local searches move only these).
std::vector<Eigen::Index> numeric_coordinates(const SearchSpace& space) {
  std::vector<Eigen::Index> numeric;
  Eigen::Index j = 0;
  for (const Dimension& d : space.dims()) {
    if (d.numeric())
      numeric.push_back(j++);
    else
      j += static_cast<Eigen::Index>(d.choices.size());
  }
  return numeric;
}

/// One suggestion's search space in the model: random candidates (valid points, so their scores
/// need no decoding) with their posterior, and local-search starts near the best finished trials
/// (the same for every acquisition). nominate() gives one acquisition's best new point.
class Search {
 public:
  Search(const SearchSpace& space, const BayesOptions& o, const GaussianProcess& gp, const AcqContext& ctx,
         const std::vector<Eigen::VectorXd>& known)
      : m_space(space), m_options(o), m_gp(gp), m_ctx(ctx), m_known(known), m_numeric(numeric_coordinates(space)) {}

  void draw_candidates(Rng& rng) {
    const Eigen::Index M = m_options.n_candidates;
    m_points.resize(static_cast<std::size_t>(M));
    m_C.resize(M, static_cast<Eigen::Index>(m_space.encoded_size()));
    for (Eigen::Index i = 0; i < M; ++i) {
      m_points[static_cast<std::size_t>(i)] = m_space.sample(rng);
      m_C.row(i) = m_space.encode(m_points[static_cast<std::size_t>(i)]).transpose();
    }
    Eigen::VectorXd var;
    m_gp.predict(m_C, m_mu, var);
    m_sigma = var.cwiseSqrt();
  }

  void add_trial_starts(const BayesOptimizer::TrainingSet& ts, std::span<const Observation> done, Rng& rng) {
    std::vector<Eigen::Index> order;
    for (Eigen::Index i = 0; i < ts.observed; ++i)
      if (!done[static_cast<std::size_t>(i)].failed) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](Eigen::Index a, Eigen::Index b) { return ts.y[a] < ts.y[b]; });
    for (std::size_t s = 0; s < order.size() && s < static_cast<std::size_t>(kTrialStarts) && !m_numeric.empty(); ++s) {
      Eigen::VectorXd u = ts.X.row(order[s]).transpose();
      for (const Eigen::Index j : m_numeric)
        u[j] = std::clamp(u[j] + kTrialStartJitter * rng.normal_double(), 0.0, 1.0);
      m_trial_starts.push_back(std::move(u));
    }
  }

  /// Local searches from the member's best candidates and the trial starts, then every end point
  /// and candidate ranked by the acquisition at its decoded (valid) point; the best not yet a trial.
  std::optional<Nominee> nominate(Acquisition a) const {
    const Eigen::Index M = m_C.rows();
    Eigen::VectorXd cand_score(M);
    for (Eigen::Index i = 0; i < M; ++i) cand_score[i] = score(a, m_mu[i], m_sigma[i], m_ctx).value;
    std::vector<Eigen::Index> order(static_cast<std::size_t>(M));
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    std::sort(order.begin(), order.end(), [&](Eigen::Index x, Eigen::Index y) {
      return cand_score[x] > cand_score[y] || (cand_score[x] == cand_score[y] && x < y);
    });
    const std::vector<Nominee> pool = local_searches(a, order);
    // Merge: the local end points in front of any candidate they beat.
    std::size_t p = 0;
    for (const Eigen::Index i : order) {
      while (p < pool.size() && pool[p].value >= cand_score[i]) {
        if (!is_known(m_space.encode(pool[p].point), m_known)) return pool[p];
        ++p;
      }
      if (!is_known(m_C.row(i).transpose(), m_known))
        return Nominee{m_points[static_cast<std::size_t>(i)], cand_score[i], m_mu[i]};
    }
    for (; p < pool.size(); ++p)
      if (!is_known(m_space.encode(pool[p].point), m_known)) return pool[p];
    return std::nullopt;
  }

 private:
  /// The end points of the local searches, best first (none without numeric coordinates).
  std::vector<Nominee> local_searches(Acquisition a, const std::vector<Eigen::Index>& order) const {
    const auto nn = static_cast<Eigen::Index>(m_numeric.size());
    std::vector<Nominee> pool;
    if (nn == 0) return pool;
    std::vector<Eigen::VectorXd> starts;
    for (Eigen::Index s = 0; s < std::min<Eigen::Index>(m_options.n_local_starts, m_C.rows()); ++s)
      starts.push_back(m_C.row(order[static_cast<std::size_t>(s)]).transpose());
    starts.insert(starts.end(), m_trial_starts.begin(), m_trial_starts.end());
    for (const Eigen::VectorXd& start : starts) {
      Eigen::VectorXd u = start;
      const BoxObjective f = [&](const Eigen::VectorXd& z, Eigen::VectorXd& grad) {
        for (Eigen::Index k = 0; k < nn; ++k) u[m_numeric[static_cast<std::size_t>(k)]] = z[k];
        const PredictionGrad pg = m_gp.predict_with_gradient(u);
        const Score sc = score(a, pg.mean, pg.std, m_ctx);
        for (Eigen::Index k = 0; k < nn; ++k) {
          const Eigen::Index j = m_numeric[static_cast<std::size_t>(k)];
          grad[k] = sc.d_mu * pg.d_mean[j] + sc.d_sigma * pg.d_std[j];
        }
        return sc.value;
      };
      Eigen::VectorXd z(nn);
      for (Eigen::Index k = 0; k < nn; ++k) z[k] = start[m_numeric[static_cast<std::size_t>(k)]];
      maximise_in_box(f, z, Eigen::VectorXd::Zero(nn), Eigen::VectorXd::Ones(nn), m_options.local_max_evals);
      for (Eigen::Index k = 0; k < nn; ++k) u[m_numeric[static_cast<std::size_t>(k)]] = z[k];
      // Scored again where it lands: decoding rounds integers (and clamps).
      Nominee nom;
      nom.point = m_space.decode(u);
      const Prediction pr = m_gp.predict(m_space.encode(nom.point));
      nom.mean = pr.mean;
      nom.value = score(a, pr.mean, std::sqrt(pr.variance), m_ctx).value;
      pool.push_back(std::move(nom));
    }
    std::stable_sort(pool.begin(), pool.end(), [](const Nominee& x, const Nominee& y) { return x.value > y.value; });
    return pool;
  }

  const SearchSpace& m_space;
  const BayesOptions& m_options;
  const GaussianProcess& m_gp;
  const AcqContext& m_ctx;
  const std::vector<Eigen::VectorXd>& m_known;
  const std::vector<Eigen::Index> m_numeric;
  std::vector<Point> m_points;  ///< the random candidates
  Eigen::MatrixXd m_C;          ///< and their encodings, one per row
  Eigen::VectorXd m_mu, m_sigma;
  std::vector<Eigen::VectorXd> m_trial_starts;
};

/// The hedge portfolio's pick among its members' nominees: drawn with weights exp(-eta * gain) on
/// the posterior means (Hoffman et al. 2011).
const Point& hedge_pick(const std::vector<Nominee>& noms, double eta, double y_scale, Rng& rng) {
  double mu_min = noms[0].mean;
  for (const Nominee& n : noms) mu_min = std::min(mu_min, n.mean);
  std::vector<double> weight;
  double total = 0;
  for (const Nominee& n : noms) {
    weight.push_back(std::exp(-eta * (n.mean - mu_min) / y_scale));  // gains <= 0: no overflow
    total += weight.back();
  }
  double draw = rng.uniform_double() * total;
  for (std::size_t i = 0; i < noms.size(); ++i) {
    if (draw < weight[i]) return noms[i].point;
    draw -= weight[i];
  }
  return noms.back().point;
}

}  // namespace

Point BayesOptimizer::suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) {
  const BayesOptions& o = m_options;
  std::size_t finished = 0;
  for (const Observation& ob : done) finished += ob.failed ? 0 : 1;
  std::vector<Eigen::VectorXd> known;  // trials, encoded: never suggested again if avoidable
  auto random_new = [&]() {
    Point p = m_space.sample(rng);
    for (int t = 1; t < kRandomTries && is_known(m_space.encode(p), known); ++t) p = m_space.sample(rng);
    return p;
  };
  if (done.size() + pending.size() < static_cast<std::size_t>(o.n_initial) || finished < 2) {
    check_trials(m_space, done, pending);
    for (const Observation& ob : done) known.push_back(m_space.encode(ob.x));
    for (const Point& p : pending) known.push_back(m_space.encode(p));
    return random_new();
  }

  const TrainingSet ts = training_set(done, pending);  // validates every point
  for (Eigen::Index i = 0; i < ts.X.rows(); ++i) known.push_back(ts.X.row(i).transpose());
  double observed_scale = 1;
  const GaussianProcess gp = fit_model(o, ts, !pending.empty(), rng, observed_scale);
  AcqContext ctx;
  ctx.xi_abs = o.xi * observed_scale;
  ctx.kappa = o.kappa;
  ctx.sigma_tiny = 1e-9 * observed_scale;
  ctx.y_best = std::numeric_limits<double>::infinity();
  for (const Observation& ob : done)
    if (!ob.failed) ctx.y_best = std::min(ctx.y_best, ob.y);

  Search search(m_space, o, gp, ctx, known);
  search.draw_candidates(rng);
  search.add_trial_starts(ts, done, rng);
  if (o.acquisition != Acquisition::hedge) {
    const std::optional<Nominee> nom = search.nominate(o.acquisition);
    return nom ? nom->point : random_new();
  }
  std::vector<Nominee> noms;
  for (Acquisition a : {Acquisition::ei, Acquisition::lcb, Acquisition::pi})
    if (std::optional<Nominee> nom = search.nominate(a)) noms.push_back(std::move(*nom));
  if (noms.empty()) return random_new();
  return hedge_pick(noms, o.hedge_eta, gp.y_scale(), rng);
}

}  // namespace mpigan::hpo
