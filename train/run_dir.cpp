// Run directories (run_dir.hpp): config.yaml, CSV logs and checkpoints, each replaced atomically.
#include "mpigan/train/run_dir.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/train/experiment.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

namespace mpigan::train {

namespace fs = std::filesystem;

RunDirectory::RunDirectory(std::string dir, bool resume) : m_dir(std::move(dir)) {
  // A resume of a directory without a run is refused before anything is created there.
  if (resume)
    MPIGAN_CHECK(latest_checkpoint().has_value(), "--resume {}: no checkpoint found (expected {}/checkpoints/latest)",
                 m_dir, m_dir);
  std::error_code ec;
  fs::create_directories(m_dir + "/checkpoints", ec);
  MPIGAN_CHECK(!ec, "cannot create the run directory '{}': {}", m_dir, ec.message());
}

void RunDirectory::refuse_existing_run() const {
  std::vector<std::string> found;
  for (const char* name : {"checkpoints/latest", "sandbox-state.h5"})
    if (fs::exists(file(name))) found.push_back(file(name));
  if (found.empty()) return;
  MPIGAN_THROW(ConfigError,
               "the run directory '{}' already holds a run ({}): a new run there would overwrite it. Continue "
               "that run with --resume {}, or give another --out (or remove the directory); nothing was written",
               m_dir, fmt::join(found, ", "), m_dir);
}

void RunDirectory::write_config(const YAML::Node& resolved) const {
  YAML::Emitter out;
  out << resolved;
  write_file_atomically(
      file("config.yaml"),
      std::string("# Resolved configuration of this run (defaults filled in).\n") + out.c_str() + "\n", "run file");
}

namespace {
/// The keys a resume may not change: they decide what the checkpoints' weights were trained on.
/// A key matches itself and every key under it.
constexpr const char* kFixedOnResume[] = {
    "seed",       "model",           "data.train",      "data.validation", "data.split",    "data.validation_fraction",
    "data.units", "data.preprocess", "data.max_events", "data.synthetic",  "training.batch"};

bool fixed_on_resume(const std::string& key) {
  return std::any_of(std::begin(kFixedOnResume), std::end(kFixedOnResume), [&](std::string_view k) {
    return key == k || (key.starts_with(k) && (key[k.size()] == '.' || key[k.size()] == '['));
  });
}

/// Every leaf of @p node as "a.b.c" (a sequence's items as "a.b[0]") -> its scalar text ("~" for null).
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node)
      flatten(kv.second, prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(), out);
  } else if (node.IsSequence() && node.size() > 0) {
    for (std::size_t i = 0; i < node.size(); ++i) flatten(node[i], fmt::format("{}[{}]", prefix, i), out);
  } else {
    out[prefix] = node.IsScalar() ? node.Scalar() : node.IsSequence() ? "[]" : node.IsMap() ? "{}" : "~";
  }
}

/// The same value: equal text, or two numbers equal to float precision (config.yaml holds the
/// numbers as the resolved configuration printed them).
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char *end_a = nullptr, *end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  if (a.empty() || b.empty() || *end_a != '\0' || *end_b != '\0') return false;
  return std::abs(x - y) <= 1e-6 * std::max(std::abs(x), std::abs(y));
}

/// The run's stored configuration resolved by this mpigan (every key it leaves out at this version's
/// default), flattened; empty when this version cannot parse it. A key that a newer mpigan added
/// is absent from the configuration an older one wrote: its default is what that run trained with.
std::map<std::string, std::string> stored_with_defaults(const std::string& path, const YAML::Node& stored) {
  std::map<std::string, std::string> out;
  std::vector<std::string> sections;  // the distributed layers' sections, read elsewhere
  const auto& own = ExperimentConfig::own_sections();
  if (stored.IsMap())
    for (const auto& kv : stored)
      if (std::find(own.begin(), own.end(), kv.first.as<std::string>()) == own.end())
        sections.push_back(kv.first.as<std::string>());
  try {
    flatten(ExperimentConfig::load(path, {}, sections).resolved, "", out);
  } catch (const std::exception& e) {
    spdlog::debug("--resume: {} does not resolve with this mpigan's defaults: {}", path, e.what());
    out.clear();
  }
  return out;
}
}  // namespace

void RunDirectory::check_resumed_config(const YAML::Node& resolved) const {
  const std::string path = file("config.yaml");
  if (!fs::exists(path)) return;
  YAML::Node stored;
  try {
    stored = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    MPIGAN_THROW(ConfigError, "--resume {}: its configuration '{}' cannot be read: {}", m_dir, path, e.what());
  }
  std::map<std::string, std::string> before, now;
  flatten(stored, "", before);
  flatten(resolved, "", now);
  std::vector<std::string> keys;
  for (const auto& [k, v] : before) keys.push_back(k);
  for (const auto& [k, v] : now)
    if (!before.contains(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> refused;
  const std::string absent = "(absent)";
  std::map<std::string, std::string> defaults;  // read once, when a key is missing from the file
  bool defaults_read = false;
  for (const auto& k : keys) {
    const std::string& a = before.contains(k) ? before.at(k) : absent;
    const std::string& b = now.contains(k) ? now.at(k) : absent;
    if (same_value(a, b)) continue;
    if (a == absent && fixed_on_resume(k)) {
      if (!defaults_read) defaults = stored_with_defaults(path, stored);
      defaults_read = true;
      if (defaults.contains(k) && same_value(defaults.at(k), b)) {
        spdlog::info("--resume {}: {} is not in {} (written by an earlier mpigan); it keeps its default, {}", m_dir, k,
                     path, b);
        continue;
      }
    }
    if (fixed_on_resume(k))
      refused.push_back(fmt::format("{} differs from the run's ({}: {}, now: {})", k, path, a, b));
    else
      spdlog::warn("--resume {}: {} changes from {} to {} for the rest of the run", m_dir, k, a, b);
  }
  if (refused.empty()) return;
  std::vector<std::string> problems;
  for (const auto& r : refused) problems.push_back(fmt::format("--resume {}: {}", m_dir, r));
  problems.back() += fmt::format(
      ". A resume cannot change what the run trains (its seed, model, data and batch): resume with the run's own "
      "configuration, `mpigan train {} --resume {}` (--set may change the budget, the learning rates, threads), or "
      "start a new run with --out; the run directory is unchanged",
      path, m_dir);
  MPIGAN_CHECK_PROBLEMS(problems);
}

std::string RunDirectory::checkpoint_path(std::int64_t step) const {
  return fmt::format("{}/checkpoints/step-{:08d}.h5", m_dir, step);
}

void RunDirectory::point_latest(const std::string& path) const {
  MPIGAN_CHECK(fs::exists(path), "run directory '{}': no checkpoint '{}' to point 'latest' at", m_dir, path);
  write_file_atomically(m_dir + "/checkpoints/latest", fs::path(path).filename().string() + "\n", "run file");
}

void RunDirectory::commit_checkpoint(const std::string& path, std::int64_t keep, const std::string& spare) const {
  write_file_atomically(m_dir + "/checkpoints/latest", fs::path(path).filename().string() + "\n", "run file");
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(m_dir + "/checkpoints")) {
    const auto name = e.path().filename().string();
    // Main files only (step-00000123.h5); parts written by other ranks (step-00000123.worker-0.h5)
    // go with their main file (master/checkpoints.cpp).
    if (name.starts_with("step-") && name.ends_with(".h5") && name.find('.') == name.size() - 3)
      all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  const std::string current = fs::path(path).filename().string();
  const std::string spared = spare.empty() ? std::string() : fs::path(spare).filename().string();
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i)
    if (all[i].filename().string() != current && all[i].filename().string() != spared) fs::remove(all[i]);
}

std::optional<std::string> RunDirectory::latest_checkpoint() const {
  std::ifstream in(m_dir + "/checkpoints/latest");
  std::string name;
  if (!(in >> name)) return std::nullopt;
  const std::string path = m_dir + "/checkpoints/" + name;
  MPIGAN_CHECK(fs::exists(path), "run directory '{}': checkpoints/latest names '{}', which does not exist", m_dir,
               name);
  return path;
}

CsvLog::CsvLog(std::string path, std::vector<std::string> columns, bool append)
    : m_path(std::move(path)), m_columns(std::move(columns)) {
  std::string header;
  for (std::size_t i = 0; i < m_columns.size(); ++i) header += (i ? "," : "") + m_columns[i];
  bool exists = append && fs::exists(m_path) && fs::file_size(m_path) > 0;
  if (exists) {
    std::ifstream in(m_path);
    std::string first;
    std::getline(in, first);
    if (first != header && header.starts_with(first + ",")) {
      // Written by an earlier version with fewer columns (new ones are only ever added at the
      // end): the header gains them; the earlier rows leave them empty.
      std::stringstream rest;
      rest << in.rdbuf();
      in.close();
      std::ofstream(m_path, std::ios::trunc) << header << '\n' << rest.str();
      spdlog::info("'{}': columns added by this version: {}", m_path, header.substr(first.size() + 1));
      first = header;
    }
    MPIGAN_CHECK(first == header, "'{}': cannot append, its columns differ from this run's:\n  file: {}\n  run:  {}",
                 m_path, first, header);
  }
  m_out.open(m_path, exists ? std::ios::app : std::ios::trunc);
  MPIGAN_CHECK(m_out.good(), "cannot write '{}'", m_path);
  if (!exists) m_out << header << '\n';
}

void CsvLog::row(const std::vector<std::string>& values) {
  MPIGAN_CHECK(values.size() == m_columns.size(), "'{}': row of {} values for {} columns", m_path, values.size(),
               m_columns.size());
  for (std::size_t i = 0; i < values.size(); ++i) m_out << (i ? "," : "") << values[i];
  m_out << '\n';
}

void CsvLog::drop_after(std::int64_t step) {
  const auto col = std::find(m_columns.begin(), m_columns.end(), "step") - m_columns.begin();
  MPIGAN_CHECK(col < static_cast<std::ptrdiff_t>(m_columns.size()), "'{}': no step column", m_path);
  m_out.close();
  std::ifstream in(m_path);
  const std::string tmp = m_path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  std::string line;
  std::int64_t dropped = 0;
  for (bool header = true; std::getline(in, line); header = false) {
    if (!header) {
      std::size_t start = 0;
      for (std::ptrdiff_t i = 0; i < col && start != std::string::npos; ++i) {
        start = line.find(',', start);
        if (start != std::string::npos) ++start;
      }
      const std::int64_t s = start == std::string::npos ? 0 : std::atoll(line.c_str() + start);
      if (s > step) {
        ++dropped;
        continue;
      }
    }
    out << line << '\n';
  }
  out.close();
  MPIGAN_CHECK(out.good(), "cannot rewrite '{}'", tmp);
  fs::rename(tmp, m_path);
  if (dropped > 0)
    spdlog::info("{}: dropped {} rows written after step {} (the run resumes there)", m_path, dropped, step);
  m_out.open(m_path, std::ios::app);
  MPIGAN_CHECK(m_out.good(), "cannot write '{}'", m_path);
}

std::string csv_number(double v) {
  return fmt::format("{}", v);
}

}  // namespace mpigan::train
