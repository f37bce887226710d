// The two-sample bootstrap (see bootstrap.hpp).
#include "mpigan/physics/bootstrap.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/physics/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mpigan::physics {
namespace {

std::vector<std::int64_t> with_replacement(std::int64_t n, Rng& rng) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (auto& r : rows) r = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n)));
  return rows;
}

}  // namespace

BootstrapResult bootstrap(std::int64_t n_ref, std::int64_t n_gen, const TwoSampleStatistic& statistic,
                          const BootstrapOptions& options) {
  MPIGAN_CHECK(options.replicas >= 0, "bootstrap: replicas {} must be >= 0", options.replicas);
  MPIGAN_CHECK(n_ref >= 1 && n_gen >= 1, "bootstrap: {} reference and {} generated rows, need >= 1 each", n_ref, n_gen);
  BootstrapResult r;
  for (int b = 0; b < options.replicas; ++b) {
    Rng ra(options.seed, 2 * static_cast<std::uint64_t>(b)), rg(options.seed, 2 * static_cast<std::uint64_t>(b) + 1);
    const auto ir = with_replacement(n_ref, ra);
    const auto ig = with_replacement(n_gen, rg);
    r.values.push_back(statistic(ir, ig));
    MPIGAN_CHECK(r.values.back().size() == r.values.front().size(),
                 "bootstrap: replica {} gave {} components, the first {}", b, r.values.back().size(),
                 r.values.front().size());
  }
  const std::size_t nc = r.values.empty() ? 0 : r.values.front().size();
  r.errors.assign(nc, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t c = 0; c < nc && r.values.size() >= 2; ++c) {
    std::vector<double> v;
    for (const auto& rep : r.values) v.push_back(rep[c]);
    r.errors[c] = std::sqrt(variance(v));
  }
  return r;
}

FeatureMatrix select_rows(const FeatureMatrix& m, std::span<const std::int64_t> rows) {
  FeatureMatrix s;
  s.rows = static_cast<std::int64_t>(rows.size());
  s.cols = m.cols;
  s.names = m.names;
  s.values.resize(static_cast<std::size_t>(s.rows * s.cols));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    MPIGAN_CHECK(rows[i] >= 0 && rows[i] < m.rows, "select_rows: row {} of {}", rows[i], m.rows);
    std::copy_n(m.values.begin() + rows[i] * m.cols, m.cols,
                s.values.begin() + static_cast<std::ptrdiff_t>(i) * s.cols);
  }
  return s;
}

}  // namespace mpigan::physics
