// The `search:` section and the objective of a trial (study.hpp).
#include "mpigan/hpo/study.hpp"

#include "mpigan/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <span>
#include <sstream>

namespace mpigan::hpo {
namespace {

/// The physics figure-of-merit columns of metrics.csv (physics rows); the rest is val_<column>.
const std::vector<std::string> kPhysicsColumns = {"fpd_hlf", "sf_mre", "gan3d_metric", "kpd"};

bool known_metric(const std::string& m) {
  return std::find(kPhysicsColumns.begin(), kPhysicsColumns.end(), m) != kPhysicsColumns.end() ||
         (m.size() > 4 && m.rfind("val_", 0) == 0);
}

DimKind parse_kind(ConfigNode& n) {
  const std::string t = n.get_choice("type", "real", {"real", "log-real", "integer", "log-integer", "categorical"});
  if (t == "log-real") return DimKind::log_real;
  if (t == "integer") return DimKind::integer;
  if (t == "log-integer") return DimKind::log_integer;
  if (t == "categorical") return DimKind::categorical;
  return DimKind::real;
}

/// The values a dimension is checked at against the experiment: its bounds, or every choice.
std::vector<std::string> probe_values(const Dimension& d) {
  if (!d.numeric()) return d.choices;
  if (d.integral())
    return {fmt::format("{}", static_cast<long long>(d.low)), fmt::format("{}", static_cast<long long>(d.high))};
  return {fmt::format("{:.17g}", d.low), fmt::format("{:.17g}", d.high)};
}

std::vector<Dimension> parse_dimensions(
    ConfigNode& search, const std::function<std::string(const std::vector<std::string>&)>& check_point) {
  std::vector<Dimension> dims;
  auto nodes = search.sections("dimensions");
  if (nodes.empty())
    search.problem("dimensions", "at least one dimension {key, type, low, high | choices} is required");
  for (ConfigNode& n : nodes) {
    Dimension d;
    d.key = n.get_string("key", "");
    if (d.key.empty()) n.problem("key", "the experiment key path this dimension sets (e.g. optimizer.lr) is required");
    if (d.key.rfind("search", 0) == 0)
      n.problem("key", fmt::format("'{}': a dimension cannot set the search section", d.key));
    d.kind = parse_kind(n);
    if (d.numeric()) {
      d.low = n.get_real("low", 0.0);
      d.high = n.get_real("high", 1.0);
      if (!n.has("low") || !n.has("high"))
        n.problem("", fmt::format("a {} dimension needs low and high", dim_kind_name(d.kind)));
    } else {
      d.choices = n.get_strings("choices", {});
    }
    n.reject_unknown();
    try {
      SearchSpace one({d});  // the dimension's own checks (bounds, log > 0, whole integers, choices)
    } catch (const ConfigError& e) {
      n.problem("", e.problems().front());
      continue;
    }
    if (d.key.empty()) continue;
    for (const std::string& v : probe_values(d)) {
      const std::string problems = check_point({d.key + "=" + v});
      if (!problems.empty())
        n.problem("key", fmt::format("the experiment with {}={} is not valid:\n{}", d.key, v, problems));
    }
    if (std::any_of(dims.begin(), dims.end(), [&](const Dimension& o) { return o.key == d.key; })) {
      n.problem("key", fmt::format("'{}' is searched twice", d.key));
      continue;
    }
    dims.push_back(std::move(d));
  }
  return dims;
}

/// The scalar at the dotted key path @p parts under @p n as the file (with --set) writes it; nullopt
/// where the file does not set it.
std::optional<std::string> scalar_at(const YAML::Node& n, std::span<const std::string> parts) {
  if (parts.empty()) return n.IsScalar() ? std::optional<std::string>(n.Scalar()) : std::nullopt;
  if (!n.IsMap()) return std::nullopt;
  const YAML::Node child = n[parts.front()];
  if (!child.IsDefined() || child.IsNull()) return std::nullopt;
  return scalar_at(child, parts.subspan(1));
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  return parts;
}

/// The value of dimension @p d written as @p text, as a Point coordinate; a reason when it is not
/// one (outside the bounds, not whole, not a choice).
std::optional<double> coordinate(const Dimension& d, const std::string& text, std::string& why) {
  if (!d.numeric()) {
    const auto it = std::find(d.choices.begin(), d.choices.end(), text);
    if (it != d.choices.end()) return static_cast<double>(it - d.choices.begin());
    why = fmt::format("'{}' is not one of its choices ({})", text, fmt::join(d.choices, ", "));
    return std::nullopt;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) {
    why = fmt::format("'{}' is not a number", text);
  } else if (v < d.low || v > d.high) {
    why = fmt::format("{} lies outside the dimension's [{}, {}]", text, d.low, d.high);
  } else if (d.integral() && v != std::round(v)) {
    why = fmt::format("{} is not a whole number", text);
  } else {
    return v;
  }
  return std::nullopt;
}

/// `points`: each a mapping of dimension keys to values, the rest of the dimensions at the
/// experiment's own values (@p experiment: the document with --set applied); each point is then
/// checked against the whole experiment as the dimensions' bounds are.
std::vector<Point> parse_points(ConfigNode& search, const SearchSpace& space, std::int64_t trials,
                                const YAML::Node& experiment,
                                const std::function<std::string(const std::vector<std::string>&)>& check_point) {
  std::vector<Point> points;
  auto nodes = search.sections("points");
  if (static_cast<std::int64_t>(nodes.size()) > trials)
    search.problem("points",
                   fmt::format("{} points for {} trials: give at most as many points as trials", nodes.size(), trials));
  for (ConfigNode& n : nodes) {
    Point p(space.size(), 0.0);
    bool ok = true;
    for (const std::string& key : n.keys()) {
      const auto& dims = space.dims();
      if (std::none_of(dims.begin(), dims.end(), [&](const Dimension& d) { return d.key == key; })) {
        std::vector<std::string> names;
        for (const Dimension& d : dims) names.push_back(d.key);
        n.problem(key,
                  fmt::format("'{}' is not a dimension of this search (dimensions: {})", key, fmt::join(names, ", ")));
        ok = false;
      }
    }
    for (std::size_t i = 0; i < space.size(); ++i) {
      const Dimension& d = space[i];
      std::string why;
      std::optional<double> v;
      if (n.has(d.key)) {
        v = coordinate(d, n.get_string(d.key, ""), why);
        if (!v) n.problem(d.key, why);
      } else if (const auto text = scalar_at(experiment, split_key(d.key))) {
        v = coordinate(d, *text, why);
        if (!v) n.problem("", fmt::format("the experiment's own {} = {}: give {} in this point", d.key, why, d.key));
      } else {
        n.problem("", fmt::format("the experiment does not set {} (a point takes the experiment's value for every "
                                  "dimension it leaves out): give its value in this point",
                                  d.key));
      }
      ok = ok && v.has_value();
      if (v) p[i] = *v;
    }
    if (!ok) continue;
    const std::string problems = check_point(space.overrides(p));
    if (!problems.empty()) {
      n.problem("", fmt::format("the experiment at this point is not valid:\n{}", problems));
      continue;
    }
    points.push_back(std::move(p));
  }
  return points;
}

void parse_gp(ConfigNode& search, BayesOptions& b) {
  ConfigNode n = search.section("gp");
  b.acquisition = acquisition_from_name(n.get_choice("acquisition", "hedge", {"ei", "lcb", "pi", "hedge"}));
  b.xi = n.get_real("xi", b.xi, 0.0);
  b.kappa = n.get_real("kappa", b.kappa, 0.0);
  b.n_initial = static_cast<int>(n.get_int("initial", b.n_initial, 1, 100000));
  b.liar = liar_from_name(n.get_choice("liar", "min", {"min", "mean", "max"}));
  b.gp.noise_min = n.get_real("noise_min", b.gp.noise_min, 0.0, 1.0, true);
  n.reject_unknown();
}

void parse_evolution(ConfigNode& search, EvolutionOptions& ev) {
  ConfigNode n = search.section("evolution");
  ev.population = static_cast<int>(n.get_int("population", ev.population, 2, 100000));
  ev.tournament = static_cast<int>(n.get_int("tournament", ev.tournament, 1, 100000));
  ev.generations = static_cast<int>(n.get_int("generations", ev.generations, 1, 100000));
  if (n.has("mutation_rate")) ev.mutation_rate = n.get_real("mutation_rate", 0.2, 0.0, 1.0);
  ev.mutation_shape = n.get_real("mutation_shape", ev.mutation_shape, 0.0, 1e6, true);
  ev.mutation_floor = n.get_real("mutation_floor", ev.mutation_floor, 0.0, 1.0, true);
  n.reject_unknown();
}

void parse_early_stopping(ConfigNode& search, PrunerOptions& p) {
  ConfigNode n = search.section("early_stopping");
  const std::string rule = n.get_choice("rule", "none", {"none", "median", "asha"});
  p.kind = rule == "median" ? PrunerKind::median : rule == "asha" ? PrunerKind::asha : PrunerKind::none;
  p.min_trials = static_cast<int>(n.get_int("min_trials", p.min_trials, 1, 100000));
  p.grace_steps = n.get_int("grace_samples", p.grace_steps, 0);
  p.statistic = n.get_choice("statistic", "running_average", {"running_average", "best"}) == "best"
                    ? MedianStatistic::best
                    : MedianStatistic::running_average;
  p.eta = static_cast<int>(n.get_int("eta", p.eta, 2, 1000));
  p.min_resource = n.get_int("min_samples", p.min_resource, 1);
  p.max_resource = n.get_int("max_samples", p.max_resource, 0);
  if (p.max_resource > 0 && !asha_budget_has_rung(p.max_resource, p.min_resource, p.eta))
    n.problem("max_samples", fmt::format("{} leaves no rung: it must be 0 (the trials' training.max_samples) or at "
                                         "least min_samples * eta = {} * {}",
                                         p.max_resource, p.min_resource, p.eta));
  n.reject_unknown();
}

void parse_algorithm_options(ConfigNode& search, StudyConfig& s) {
  parse_gp(search, s.gp);
  parse_evolution(search, s.evolution);
  parse_early_stopping(search, s.early_stopping);
}

}  // namespace

std::pair<std::string, std::string> Objective::source() const {
  if (metric.rfind("val_", 0) == 0) return {"validation", metric.substr(4)};
  return {"physics", metric};
}

std::optional<double> Objective::of(const std::vector<double>& values) const {
  if (values.empty()) return std::nullopt;
  double v = values.back();
  if (at == At::best) {
    v = minimize ? *std::min_element(values.begin(), values.end()) : *std::max_element(values.begin(), values.end());
  } else if (at == At::mean) {
    const std::size_t k = std::min<std::size_t>(values.size(), static_cast<std::size_t>(last));
    v = std::accumulate(values.end() - static_cast<std::ptrdiff_t>(k), values.end(), 0.0) / static_cast<double>(k);
  }
  if (!std::isfinite(v)) return std::nullopt;
  return minimize ? v : -v;
}

std::string Objective::describe() const {
  const char* a = at == At::last ? "last" : at == At::best ? "best" : "mean";
  return fmt::format("{} {} ({}{})", minimize ? "minimise" : "maximise", metric, a,
                     at == At::mean ? fmt::format(" of the last {}", last) : std::string());
}

StudyConfig parse_study(ConfigDocument& doc,
                        const std::function<std::string(const std::vector<std::string>&)>& check_point) {
  StudyConfig s;
  ConfigNode root = doc.root();
  if (!root.has("search")) {
    root.problem("search", "mpigan optimize needs a search: section (dimensions, objective; docs/hpo.md)");
    return s;
  }
  ConfigNode search = root.section("search");
  try {
    s.space = SearchSpace(parse_dimensions(search, check_point));
  } catch (const ConfigError& e) {
    search.problem("dimensions", e.problems().front());
  }

  ConfigNode o = search.section("objective");
  s.objective.metric = o.get_string("metric", s.objective.metric);
  if (!known_metric(s.objective.metric))
    o.problem("metric", fmt::format("'{}' is not a metrics.csv figure: use fpd_hlf, sf_mre, gan3d_metric, kpd or "
                                    "val_<loss column> (val_g_loss, val_d_loss, ...)",
                                    s.objective.metric));
  s.objective.minimize = o.get_choice("mode", "min", {"min", "max"}) == "min";
  const std::string at = o.get_choice("at", "last", {"last", "best", "mean"});
  s.objective.at = at == "best" ? Objective::At::best : at == "mean" ? Objective::At::mean : Objective::At::last;
  s.objective.last = static_cast<int>(o.get_int("last", 3, 1, 1000));
  o.reject_unknown();

  s.algorithm = search.get_choice("algorithm", s.algorithm, {"gp", "evolution", "random"});
  s.trials = search.get_int("trials", s.trials, 1, 1000000);
  s.folds = static_cast<int>(search.get_int("folds", 1, 1, 100));
  s.seed = static_cast<std::uint64_t>(search.get_int("seed", 1, 0));
  if (s.space.size() > 0) s.points = parse_points(search, s.space, s.trials, doc.yaml(), check_point);
  parse_algorithm_options(search, s);
  search.reject_unknown();
  return s;
}

std::unique_ptr<Optimizer> make_optimizer(const StudyConfig& s) {
  std::unique_ptr<Optimizer> o;
  if (s.algorithm == "evolution")
    o = std::make_unique<EvolutionSearch>(s.space, s.evolution);
  else if (s.algorithm == "random")
    o = std::make_unique<RandomSearch>(s.space);
  else
    o = std::make_unique<BayesOptimizer>(s.space, s.gp);
  if (s.points.empty()) return o;
  return std::make_unique<GivenPointsFirst>(s.points, std::move(o));
}

Curve read_curve(const std::string& metrics_csv, const Objective& o) {
  std::ifstream in(metrics_csv);
  if (!in) MPIGAN_FATAL("{}: cannot be read (the trial wrote no metrics)", metrics_csv);
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, ',')) out.push_back(cell);
    if (!l.empty() && l.back() == ',') out.emplace_back();
    return out;
  };
  const auto header = split(line);
  const auto [kind, column] = o.source();
  const auto col = std::find(header.begin(), header.end(), column);
  const auto samples = std::find(header.begin(), header.end(), "samples");
  if (header.empty() || header[0] != "kind" || samples == header.end())
    MPIGAN_FATAL("{}: not a metrics.csv (header '{}')", metrics_csv, line);
  if (col == header.end())
    MPIGAN_FATAL("{}: no column '{}' for the objective {} (columns: {})", metrics_csv, column, o.metric,
                 fmt::join(header, ", "));
  const auto ci = static_cast<std::size_t>(col - header.begin()),
             si = static_cast<std::size_t>(samples - header.begin());
  Curve c;
  while (std::getline(in, line)) {
    const auto cells = split(line);
    if (cells.size() <= std::max(ci, si) || cells[0] != kind || cells[ci].empty()) continue;
    const std::int64_t step = std::stoll(cells[si]);
    if (!c.empty() && step <= c.back().step) continue;  // a repeated row (the final validation)
    c.push_back({step, std::stod(cells[ci])});
  }
  return c;
}

Curve minimised(Curve c, const Objective& o) {
  if (!o.minimize)
    for (auto& p : c) p.value = -p.value;
  return c;
}

}  // namespace mpigan::hpo
