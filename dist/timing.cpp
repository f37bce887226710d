// The clock models of the sandbox and of virtual workers (timing.hpp).
#include "mpigan/dist/timing.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <numbers>
#include <sstream>

namespace mpigan::dist {

namespace {

std::vector<double> parse_numbers(const std::string& spec, const std::string& args, std::size_t want) {
  std::vector<double> out;
  std::stringstream in(args);
  std::string item;
  while (std::getline(in, item, ',')) {
    double v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || !std::isfinite(v) || v < 0)
      MPIGAN_THROW(ConfigError, "compute model '{}': '{}' is not a number >= 0", spec, item);
    out.push_back(v);
  }
  if (out.size() != want)
    MPIGAN_THROW(ConfigError, "compute model '{}': expected {} number{} after ':', found {}", spec, want,
                 want == 1 ? "" : "s", out.size());
  return out;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  return cells;
}

}  // namespace

double uniform01(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t x = mix64(mix64(seed ^ mix64(stream + 0x5A4D)) ^ index);
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

ComputeModel ComputeModel::parse(const std::string& spec) {
  ComputeModel m;
  m.m_spec = spec;
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "constant") {
    m.m_kind = Kind::constant;
    m.m_a = parse_numbers(spec, args, 1)[0];
  } else if (kind == "exp") {
    m.m_kind = Kind::shifted_exponential;
    const auto v = parse_numbers(spec, args, 2);
    m.m_a = v[0];
    m.m_b = v[1];
  } else if (kind == "lognormal") {
    m.m_kind = Kind::lognormal;
    const auto v = parse_numbers(spec, args, 2);
    m.m_a = v[0];
    m.m_b = v[1];
  } else if (kind == "replay") {
    m.m_kind = Kind::replay;
    if (args.empty()) MPIGAN_THROW(ConfigError, "compute model '{}': expected replay:PATH/updates.csv", spec);
    m.m_replay = read_csv_column_by(args, "compute_s", "worker");
    if (m.m_replay.empty()) MPIGAN_THROW(ConfigError, "compute model '{}': {} holds no updates to replay", spec, args);
  } else if (kind == "cycle") {
    m.m_kind = Kind::cycle;
    if (args.empty()) MPIGAN_THROW(ConfigError, "compute model '{}': expected cycle:PATH/updates.csv", spec);
    m.m_replay = read_csv_column_by(args, "time_s", "worker");
    if (m.m_replay.empty()) MPIGAN_THROW(ConfigError, "compute model '{}': {} holds no updates to replay", spec, args);
    for (auto& seq : m.m_replay)  // arrival times -> the cycles between them (the first from the start)
      for (std::size_t i = seq.size(); i-- > 1;) seq[i] = std::max(0.0, seq[i] - seq[i - 1]);
  } else {
    MPIGAN_THROW(ConfigError,
                 "compute model '{}': expected constant:T, exp:SHIFT,MEAN, lognormal:MEDIAN,SIGMA, replay:FILE or "
                 "cycle:FILE",
                 spec);
  }
  return m;
}

double ComputeModel::draw(std::uint64_t seed, int worker, std::int64_t update, std::int64_t steps) const {
  if (m_kind == Kind::replay || m_kind == Kind::cycle) {
    const auto& seq = m_replay[static_cast<std::size_t>(worker) % m_replay.size()];
    return seq[static_cast<std::size_t>(update) % seq.size()];
  }
  double total = 0;
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto index = static_cast<std::uint64_t>(update * steps + s);
    switch (m_kind) {
      case Kind::constant:
        total += m_a;
        break;
      case Kind::shifted_exponential:
        total += m_a - m_b * std::log1p(-uniform01(seed, static_cast<std::uint64_t>(worker), index));
        break;
      case Kind::lognormal: {
        // Box-Muller from two independent streams.
        const double u1 = 1.0 - uniform01(seed, static_cast<std::uint64_t>(worker), index);
        const double u2 = uniform01(seed, static_cast<std::uint64_t>(worker) + (1ull << 32), index);
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        total += m_a * std::exp(m_b * z);
        break;
      }
      case Kind::replay:
      case Kind::cycle:
        break;
    }
  }
  return total;
}

double ComputeModel::mean() const {
  switch (m_kind) {
    case Kind::constant:
      return m_a;
    case Kind::shifted_exponential:
      return m_a + m_b;
    case Kind::lognormal:
      return m_a * std::exp(0.5 * m_b * m_b);
    case Kind::replay:
    case Kind::cycle: {
      double sum = 0;
      std::size_t n = 0;
      for (const auto& seq : m_replay)
        for (double v : seq) sum += v, ++n;
      return n ? sum / static_cast<double>(n) : 0.0;
    }
  }
  return 0;
}

std::vector<std::vector<double>> read_csv_column_by(const std::string& path, const std::string& column,
                                                    const std::string& by) {
  std::ifstream in(path);
  if (!in) MPIGAN_THROW(DataError, "{}: cannot open (expected a run's updates.csv)", path);
  std::string line;
  if (!std::getline(in, line)) MPIGAN_THROW(DataError, "{}: empty (expected a header line)", path);
  const auto header = split_csv_line(line);
  std::size_t col = header.size(), key = header.size();
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == column) col = i;
    if (header[i] == by) key = i;
  }
  if (col == header.size() || key == header.size())
    MPIGAN_THROW(DataError, "{}: the header has no '{}' or no '{}' column (expected a run's updates.csv)", path, column,
                 by);
  std::map<long, std::vector<double>> groups;
  for (std::size_t lineno = 2; std::getline(in, line); ++lineno) {
    if (line.empty()) continue;
    const auto cells = split_csv_line(line);
    double v = 0;
    long k = 0;
    const bool ok = cells.size() == header.size() &&
                    std::from_chars(cells[col].data(), cells[col].data() + cells[col].size(), v).ec == std::errc() &&
                    std::from_chars(cells[key].data(), cells[key].data() + cells[key].size(), k).ec == std::errc() &&
                    std::isfinite(v) && v >= 0 && k >= 0;
    if (!ok)
      MPIGAN_THROW(DataError, "{}:{}: expected {} cells with a number >= 0 in '{}' and a worker id in '{}'", path,
                   lineno, header.size(), column, by);
    groups[k].push_back(v);
  }
  std::vector<std::vector<double>> out;
  out.reserve(groups.size());
  for (auto& [k, values] : groups) out.push_back(std::move(values));
  return out;
}

}  // namespace mpigan::dist
