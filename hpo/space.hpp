// The search space of a hyper-parameter search: dimensions named by experiment key paths
// (`optimizer.lr`, `algorithm.name`), each real, log-real, integer, log-integer or categorical.
//
// A Point holds one double per dimension, in the dimension's own units: a real or integer value
// (integers whole), or for a categorical the index of the choice. Optimisers that need a metric
// space (the Gaussian process) use encode(): every numeric dimension maps to one coordinate in
// [0, 1] (log dimensions in log space), every categorical to a one-hot block of choices.size()
// coordinates; decode() maps any vector of that length back to the nearest valid Point (integers
// rounded, the categorical's largest coordinate chosen).
#pragma once

#include "mpigan/core/rng.hpp"

#include <Eigen/Core>

#include <string>
#include <vector>

namespace mpigan::hpo {

enum class DimKind { real, log_real, integer, log_integer, categorical };

/// "real", "log-real", "integer", "log-integer", "categorical".
const char* dim_kind_name(DimKind k);

struct Dimension {
  std::string key;  ///< experiment key path the value is written to, e.g. "optimizer.lr"
  DimKind kind = DimKind::real;
  double low = 0, high = 1;          ///< numeric bounds, inclusive; low > 0 for log kinds
  std::vector<std::string> choices;  ///< categorical: the YAML scalars, as written

  bool numeric() const { return kind != DimKind::categorical; }
  bool log_scale() const { return kind == DimKind::log_real || kind == DimKind::log_integer; }
  bool integral() const { return kind == DimKind::integer || kind == DimKind::log_integer; }
};

using Point = std::vector<double>;

class SearchSpace {
 public:
  SearchSpace() = default;
  /// Checks every dimension (bounds ordered, log bounds > 0, integer bounds whole, >= 2 choices,
  /// keys unique); throws ConfigError naming the dimension otherwise.
  explicit SearchSpace(std::vector<Dimension> dims);

  std::size_t size() const { return m_dims.size(); }
  const Dimension& operator[](std::size_t i) const { return m_dims[i]; }
  const std::vector<Dimension>& dims() const { return m_dims; }

  /// Length of encode()'s vector: one per numeric dimension, choices.size() per categorical.
  std::size_t encoded_size() const { return m_encoded; }
  Eigen::VectorXd encode(const Point& p) const;
  /// The nearest valid point of a vector of encoded_size() values (clamped to [0, 1] first).
  Point decode(const Eigen::VectorXd& u) const;

  /// A uniform draw (uniform in log space for log dimensions, each choice equally likely).
  Point sample(Rng& rng) const;
  /// Whether @p p is a valid point of this space (length, bounds, whole integers, choice index).
  bool contains(const Point& p) const;
  /// Value of dimension @p i of @p p as YAML text for an experiment override ("optimizer.lr=0.001").
  std::string value_text(const Point& p, std::size_t i) const;
  /// "optimizer.lr=0.001" for every dimension, in order.
  std::vector<std::string> overrides(const Point& p) const;

 private:
  std::vector<Dimension> m_dims;
  std::size_t m_encoded = 0;
};

}  // namespace mpigan::hpo
