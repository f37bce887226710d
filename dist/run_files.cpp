// Checkpoint file names of a distributed run (run_files.hpp).
#include "mpigan/dist/run_files.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/run_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

namespace mpigan::dist {

std::string checkpoint_main_path(const std::string& run_dir, std::int64_t id) {
  return fmt::format("{}/checkpoints/step-{:08d}.h5", run_dir, id);
}

std::string checkpoint_part_path(const std::string& run_dir, std::int64_t id, const std::string& part) {
  return fmt::format("{}/checkpoints/step-{:08d}.{}.h5", run_dir, id, part);
}

std::string worker_part(int group) {
  return fmt::format("worker-{}", group);
}
std::string submaster_part(int rank) {
  return fmt::format("submaster-{}", rank);
}

std::int64_t latest_checkpoint_id(const std::string& run_dir) {
  train::RunDirectory run(run_dir, true);
  const std::string name = std::filesystem::path(*run.latest_checkpoint()).filename().string();
  // step-00000123.h5
  MPIGAN_CHECK(name.starts_with("step-") && name.ends_with(".h5"),
               "run directory '{}': unexpected checkpoint name '{}'", run_dir, name);
  const std::int64_t latest = std::stoll(name.substr(5, name.size() - 8));
  // The parts 'latest' has ("worker-0", "submaster-1", ...), and the newer main files.
  namespace fs = std::filesystem;
  const std::string prefix = fmt::format("step-{:08d}.", latest);
  std::vector<std::string> parts;
  std::vector<std::int64_t> newer;
  for (const auto& e : fs::directory_iterator(fs::path(run_dir) / "checkpoints")) {
    const std::string f = e.path().filename().string();
    if (!f.starts_with("step-") || !f.ends_with(".h5")) continue;
    if (f == name) continue;
    if (f.starts_with(prefix)) {
      parts.push_back(f.substr(prefix.size(), f.size() - prefix.size() - 3));
    } else if (f.size() == name.size() && f.find('.') == f.size() - 3) {
      const std::int64_t id = std::stoll(f.substr(5, f.size() - 8));
      if (id > latest) newer.push_back(id);
    }
  }
  std::sort(newer.rbegin(), newer.rend());
  for (const std::int64_t id : newer) {
    const bool complete = std::all_of(parts.begin(), parts.end(), [&](const std::string& part) {
      return fs::exists(checkpoint_part_path(run_dir, id, part));
    });
    if (complete) {
      spdlog::info(
          "checkpoint {} has all its parts although 'latest' names step {} (the job ended before it moved): "
          "resuming from it",
          checkpoint_main_path(run_dir, id), latest);
      return id;
    }
  }
  return latest;
}

std::int64_t latest_checkpoint_id_or_none(const std::string& run_dir) noexcept {
  try {
    return latest_checkpoint_id(run_dir);
  } catch (...) {
    return -1;
  }
}

}  // namespace mpigan::dist
