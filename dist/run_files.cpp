// Checkpoint file names of a distributed run (run_files.hpp).
#include "mpigan/dist/run_files.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/train/run_dir.hpp"

#include <filesystem>

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
  return std::stoll(name.substr(5, name.size() - 8));
}

}  // namespace mpigan::dist
