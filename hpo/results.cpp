// The search's results database (results.hpp).
#include "mpigan/hpo/results.hpp"

#include "mpigan/core/error.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace mpigan::hpo {
namespace {

using nlohmann::json;

const char* const kStatusNames[] = {"running", "done", "pruned", "failed", "interrupted"};

TrialStatus status_from_name(const std::string& s) {
  for (int i = 0; i < 5; ++i)
    if (s == kStatusNames[i]) return static_cast<TrialStatus>(i);
  MPIGAN_FATAL("unknown trial status '{}'", s);
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}
std::optional<double> optional_value(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}

json to_json(const TrialRecord& t, const char* event) {
  json folds = json::array();
  for (const FoldResult& f : t.folds)
    folds.push_back({{"fold", f.fold},
                     {"run_dir", f.run_dir},
                     {"status", f.status},
                     {"value", optional_json(f.value)},
                     {"message", f.message},
                     {"seconds", f.seconds},
                     {"cpu_seconds", f.cpu_seconds}});
  return {{"event", event},
          {"trial", t.id},
          {"x", t.x},
          {"overrides", t.overrides},
          {"status", trial_status_name(t.status)},
          {"block", t.block},
          {"run_dir", t.run_dir},
          {"started", t.started},
          {"ended", t.ended},
          {"value", optional_json(t.value)},
          {"spread", t.spread},
          {"folds", folds},
          {"message", t.message},
          {"rerun_of", t.rerun_of},
          {"config_hash", t.config_hash}};
}

TrialRecord from_json(const json& j) {
  TrialRecord t;
  t.id = j.at("trial").get<std::int64_t>();
  t.x = j.at("x").get<Point>();
  t.overrides = j.at("overrides").get<std::vector<std::string>>();
  t.status = status_from_name(j.at("status").get<std::string>());
  t.block = j.at("block").get<int>();
  t.run_dir = j.at("run_dir").get<std::string>();
  t.started = j.at("started").get<double>();
  t.ended = j.at("ended").get<double>();
  t.value = optional_value(j.at("value"));
  t.spread = j.at("spread").get<double>();
  for (const json& f : j.at("folds")) t.folds.push_back(fold_from_json(f));
  t.message = j.at("message").get<std::string>();
  t.rerun_of = j.value("rerun_of", std::int64_t{-1});
  t.config_hash = j.value("config_hash", std::string());
  return t;
}

}  // namespace

const char* trial_status_name(TrialStatus s) {
  return kStatusNames[static_cast<int>(s)];
}

ResultsDb::ResultsDb(std::string dir) : m_dir(std::move(dir)) {
  std::filesystem::create_directories(m_dir);
  std::ifstream in(m_dir + "/trials.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) apply(line, ++n);
  if (m_skipped > 0)
    spdlog::warn("{}/trials.jsonl: {} unreadable line(s) skipped (a search killed while writing)", m_dir, m_skipped);
}

void ResultsDb::apply(const std::string& line, int line_no) {
  if (line.empty()) return;
  try {
    TrialRecord t = from_json(json::parse(line));
    const auto id = static_cast<std::size_t>(t.id);
    if (id > m_trials.size()) MPIGAN_FATAL("trial {} before trial {} was started", t.id, m_trials.size());
    if (id == m_trials.size())
      m_trials.push_back(std::move(t));
    else
      m_trials[id] = std::move(t);
  } catch (const std::exception& e) {
    spdlog::warn("{}/trials.jsonl line {}: {}", m_dir, line_no, e.what());
    ++m_skipped;
  }
}

void ResultsDb::append(const std::string& line) {
  const std::string path = m_dir + "/trials.jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) MPIGAN_FATAL("{}: cannot open for appending: {}", path, std::strerror(errno));
  const std::string text = line + "\n";
  const ssize_t w = ::write(fd, text.data(), text.size());
  const int sync = ::fsync(fd);
  ::close(fd);
  if (w != static_cast<ssize_t>(text.size()) || sync != 0)
    MPIGAN_FATAL("{}: writing a trial record failed: {}", path, std::strerror(errno));
}

void ResultsDb::start(const TrialRecord& t) {
  append(to_json(t, "start").dump());
  apply(to_json(t, "start").dump(), 0);
}

void ResultsDb::end(const TrialRecord& t) {
  append(to_json(t, "end").dump());
  apply(to_json(t, "end").dump(), 0);
}

FoldResult fold_from_json(const json& f) {
  return {f.at("fold").get<int>(),       f.at("run_dir").get<std::string>(), f.at("status").get<std::string>(),
          optional_value(f.at("value")), f.at("message").get<std::string>(), f.at("seconds").get<double>(),
          f.value("cpu_seconds", -1.0)};
}

std::vector<std::int64_t> pending_reruns(const std::vector<TrialRecord>& trials) {
  const auto n = static_cast<std::int64_t>(trials.size());
  // The original trial of each one: rerun_of points to an earlier trial (ids are positions).
  std::vector<std::int64_t> root(trials.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = trials[static_cast<std::size_t>(i)].rerun_of;
    root[static_cast<std::size_t>(i)] = r >= 0 && r < i ? root[static_cast<std::size_t>(r)] : i;
  }
  std::vector<std::int64_t> latest(trials.size(), -1);  // per original: its latest trial, -1 once settled
  std::vector<bool> settled(trials.size(), false);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto o = static_cast<std::size_t>(root[static_cast<std::size_t>(i)]);
    if (trials[static_cast<std::size_t>(i)].status != TrialStatus::interrupted) settled[o] = true;
    latest[o] = i;
  }
  std::vector<std::int64_t> out;
  for (std::size_t o = 0; o < trials.size(); ++o)
    if (latest[o] >= 0 && !settled[o]) out.push_back(latest[o]);
  return out;
}

}  // namespace mpigan::hpo
