// `mpigan report RUN_DIR [--out FILE.png]`: a run's losses and physics figure of merit against the
// samples it has seen, drawn by scripts/plot_run.py (Debian's python3-matplotlib) from its
// metrics.csv (and updates.csv for a distributed run). Works on a run still in progress.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace mpigan::apps {
namespace {

struct ReportArgs {
  std::string run_dir, out;
};

void run_report(const ReportArgs& a) {
  namespace fs = std::filesystem;
  MPIGAN_CHECK(fs::is_directory(a.run_dir), "report: '{}' is not a run directory", a.run_dir);
  const fs::path metrics = fs::path(a.run_dir) / "metrics.csv";
  MPIGAN_CHECK(fs::exists(metrics), "report: '{}' has no metrics.csv (is it a run directory of `mpigan train`?)",
               a.run_dir);
  {
    std::ifstream in(metrics);
    std::string header, row;
    std::getline(in, header);
    MPIGAN_CHECK(
        header.starts_with("kind,"),
        "report: '{}' is not a metrics.csv of mpigan: its first line should be the header 'kind,epoch,step,...', "
        "it is '{}'",
        metrics.string(), header.substr(0, 80));
    MPIGAN_CHECK(static_cast<bool>(std::getline(in, row)), "report: '{}' holds no rows yet: nothing to draw",
                 metrics.string());
  }
  const std::string out = a.out.empty() ? (fs::path(a.run_dir) / "report.png").string() : a.out;
  check_output_file(out, "report");
  MPIGAN_CHECK(run_python_script("plot_run.py", {a.run_dir, out}), "report: drawing {} failed (see above)", out);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Plot a run's losses and physics figure of merit against samples seen");
  cmd->add_option("run_dir", args->run_dir, "run directory")->required();
  cmd->add_option("--out", args->out, "PNG file (default RUN_DIR/report.png)");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace mpigan::apps
