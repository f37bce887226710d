// Every experiment file shipped in examples/ loads as `mpigan train` and `mpigan sandbox` load it
// (the experiment with its distributed sections), and a search section parses with every
// dimension's bounds tried against the whole experiment, as `mpigan optimize` checks it. An
// example that a release breaks fails here, not in a user's first command.
#include "test_utils.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/config.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/hpo/study.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace mpigan;
namespace fs = std::filesystem;

namespace {
/// examples/ beside tests/ (MPIGAN_TEST_DATA is tests/data in the source tree).
fs::path examples_dir() {
  const char* data = std::getenv("MPIGAN_TEST_DATA");
  REQUIRE_MESSAGE(data != nullptr, "MPIGAN_TEST_DATA is not set (ctest sets it)");
  return fs::path(data).parent_path().parent_path() / "examples";
}

std::vector<fs::path> example_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(examples_dir()))
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The problems of loading @p path with @p overrides for a job of 4 worker groups (empty: none).
std::string load_problems(const fs::path& path, const std::vector<std::string>& overrides) {
  try {
    (void)dist::load_distributed_workers(path.string(), overrides, 4);
  } catch (const ConfigError& e) {
    std::string all;
    for (const auto& p : e.problems()) all += p + "\n";
    return all;
  }
  return {};
}
}  // namespace

TEST_CASE("every example experiment loads, and every search section parses against its experiment") {
  const auto files = example_files();
  // The recipes, the quick start, the rules, the searches: a missing directory is a failure too.
  REQUIRE(files.size() >= 15);
  int searches = 0;
  int unbuilt = 0;
  for (const auto& f : files) {
    CAPTURE(f.string());
    // A GPU machine's experiment on a build without that backend: its one problem names the
    // build, and the rest of it is checked on the CPU backend.
    std::vector<std::string> base;
    ConfigDocument doc = ConfigDocument::load(f.string(), {});
    const auto built = backend_names();
    const YAML::Node backend = doc.yaml()["backend"];
    if (backend && std::find(built.begin(), built.end(), backend.as<std::string>()) == built.end()) {
      const std::string p = load_problems(f, {});
      CHECK_MESSAGE(p.find("backend: '" + backend.as<std::string>() + "': this build has no") != std::string::npos, p);
      CHECK_MESSAGE(std::count(p.begin(), p.end(), '\n') == 1, p);
      base = {"backend=cpu"};
      ++unbuilt;
    }
    const std::string problems_as_is = load_problems(f, base);
    CHECK_MESSAGE(problems_as_is.empty(), problems_as_is);
    if (!doc.yaml()["search"]) continue;
    ++searches;
    std::vector<std::string> tried;
    std::string problems;
    try {
      const hpo::StudyConfig s = hpo::parse_study(doc, [&](const std::vector<std::string>& ov) {
        tried.insert(tried.end(), ov.begin(), ov.end());
        std::vector<std::string> all = base;
        all.insert(all.end(), ov.begin(), ov.end());
        return load_problems(f, all);
      });
      CHECK(s.space.size() > 0);
      doc.finish();
    } catch (const ConfigError& e) {
      for (const auto& p : e.problems()) problems += p + "\n";
    }
    CHECK_MESSAGE(problems.empty(), problems);
    CHECK(!tried.empty());
  }
  CHECK(searches >= 2);
  MESSAGE(unbuilt << " example(s) for a backend this build lacks, checked on the CPU backend");
}

TEST_CASE("the examples test sees a broken example: a key the experiment does not know is named") {
  const auto files = example_files();
  REQUIRE(!files.empty());
  const fs::path quick = examples_dir() / "quickstart.yaml";
  REQUIRE(fs::exists(quick));
  CHECK(load_problems(quick, {}).empty());
  const std::string p = load_problems(quick, {"training.max_sample=10"});
  CHECK(p.find("max_sample") != std::string::npos);
}
