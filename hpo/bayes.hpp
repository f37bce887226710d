// Bayesian optimisation with a Gaussian process (gp.hpp): the "gp" search algorithm.
//
// Each suggest() is a pure function of (finished trials, pending trials, Rng), like every
// Optimizer: nothing is remembered between calls, so a resumed study replays to the same points.
// The price is a GP fit per suggestion, O(n^3) per likelihood evaluation in the n trials:
// milliseconds at n = 30, seconds at a few hundred, still small against a training run.
//
//   1. While fewer than n_initial trials exist (finished, failed and pending together) or fewer than
//      two have finished, the point is a uniform random draw: the GP needs data to say anything.
//   2. The GP is fitted on the encoded points (SearchSpace::encode(): the unit cube, one-hot
//      categoricals). A failed trial enters with the worst finished value (imputation): the region
//      is discouraged without an arbitrary penalty that would wreck the GP's scale.
//   3. Pending trials enter with a "constant liar" value (Ginsbourger et al. 2010; liar: the
//      minimum of the finished values by default, as scikit-optimize's cl_min), with the
//      hyper-parameters fitted in step 2 kept (a lie must not change the model's smoothness), so
//      that concurrent suggestions differ.
//   4. The acquisition is maximised: a few thousand random points of the space, then L-BFGS (NLopt,
//      analytic gradients) over the numeric coordinates from the best of them and from the best
//      observed points, each categorical block held at its start's choice (enumerating choices by
//      the random candidates instead of relaxing one-hot blocks, which would make the GP predict
//      between choices that do not exist). Every end point is decoded to a valid point and scored
//      again there (integers rounded); the best that is not a trial already is returned, else a
//      random point that is not one.
//
// Acquisitions (minimisation; mu, sigma the GP's posterior mean and std, y* the best finished value,
// s the GP's target scale, i.e. the standard deviation of the done trials' values with failures
// imputed, so xi is in units of the objective's spread and means the same for any objective):
//   EI  = (y* - mu - xi s) Phi(z) + sigma phi(z),   z = (y* - mu - xi s) / sigma
//   PI  = Phi(z)
//   LCB = -(mu - kappa sigma)  (maximised)
//   hedge: GP-Hedge (Hoffman et al. 2011) over {EI, LCB, PI}. Each member nominates its maximiser;
//   one is chosen with probability softmax(eta g) by a draw from the Rng. The original's gains are
//   cumulative over the run (g_j += -mu_t(x_j^t), with the GP after each step) and need every past
//   nomination; a stateless optimiser would have to replay every past acquisition maximisation
//   (quadratic in the history, and changed by any change of options). Here the gains have a memory
//   of one step: g_j = -(mu(x_j) - min_i mu(x_i)) / s under the current GP, which keeps GP-Hedge's
//   preference for members nominating points the model believes good while staying a pure
//   function of the history.
#pragma once

#include "mpigan/hpo/gp.hpp"
#include "mpigan/hpo/optimizer.hpp"

#include <Eigen/Core>

#include <string>
#include <string_view>
#include <vector>

namespace mpigan::hpo {

enum class Acquisition { ei, lcb, pi, hedge };
/// "ei", "lcb", "pi", "hedge".
const char* acquisition_name(Acquisition a);
/// The inverse of acquisition_name(); throws ConfigError listing the names otherwise.
Acquisition acquisition_from_name(std::string_view name);

/// The value a pending trial is assumed to have (constant liar).
enum class Liar { min, mean, max };
/// "min", "mean", "max".
const char* liar_name(Liar l);
Liar liar_from_name(std::string_view name);

struct BayesOptions {
  /// scikit-optimize's default (gp_hedge); also the best here: median regret over 20 seeds,
  /// Branin after 30 trials 0.018 (EI 0.040, LCB 0.007, PI 0.028), Hartmann-6 after 40 0.18
  /// (EI 0.18, LCB 0.53, PI 0.35) with the tightest spread of the four.
  Acquisition acquisition = Acquisition::hedge;
  double xi = 0.01;        ///< EI, PI: required improvement, in finished-value std units
  double kappa = 1.96;     ///< LCB: mu - kappa sigma
  double hedge_eta = 1.0;  ///< hedge: softmax temperature of the gains
  /// Random trials before the GP takes over. scikit-optimize's 10: for the 2-10 dimensions of a
  /// typical search, 2 x dims would be as few as 4, too few to fit d + 2 hyper-parameters.
  int n_initial = 10;
  Liar liar = Liar::min;
  int n_candidates = 2000;    ///< random points scored before the local searches
  int n_local_starts = 5;     ///< local searches from the best candidates (plus 2 from the best trials)
  int local_max_evals = 100;  ///< per local search
  GpOptions gp;
};

class BayesOptimizer final : public Optimizer {
 public:
  /// Throws Error for an empty space or invalid options (negative xi, kappa, counts).
  explicit BayesOptimizer(SearchSpace space, BayesOptions options = {});

  Point suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) override;
  std::string name() const override { return "gp"; }

  const SearchSpace& space() const { return m_space; }
  const BayesOptions& options() const { return m_options; }

  /// The GP's training data for a history: encoded rows of @p done (failed ones with the worst
  /// finished value), then of @p pending (with the liar's value). Throws Error
  /// naming the trial when a point has the wrong number of values; Error also when no trial
  /// has finished (there is nothing to impute from).
  struct TrainingSet {
    Eigen::MatrixXd X;  ///< rows: done, then pending; encoded_size() columns
    Eigen::VectorXd y;
    Eigen::Index observed = 0;  ///< the first `observed` rows are done trials (the rest pending)
    Eigen::Index finished = 0;  ///< done trials that did not fail
  };
  TrainingSet training_set(std::span<const Observation> done, std::span<const Point> pending) const;

 private:
  SearchSpace m_space;
  BayesOptions m_options;
};

}  // namespace mpigan::hpo
