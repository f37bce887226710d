// The mpigan subcommands. Each add_*_command registers one CLI11 subcommand whose callback does
// the work; errors are mpigan::Error exceptions caught once, in main().
#pragma once

#include "run_guard.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mpigan::apps {

void add_train_command(CLI::App& app);     // cmd_train.cpp
void add_bench_command(CLI::App& app);     // cmd_bench.cpp
void add_inspect_command(CLI::App& app);   // cmd_inspect.cpp (models; data files via inspect_data_file)
void add_simulate_command(CLI::App& app);  // cmd_simulate.cpp
void add_generate_command(CLI::App& app);  // cmd_generate.cpp
void add_export_command(CLI::App& app);    // cmd_export.cpp
void add_validate_command(CLI::App& app);  // cmd_validate.cpp
void add_report_command(CLI::App& app);    // cmd_report.cpp
void add_sandbox_command(CLI::App& app);   // cmd_sandbox.cpp
void add_optimize_command(CLI::App& app);  // cmd_optimize.cpp
void add_bench_master(CLI::App& bench);    // cmd_bench_master.cpp: `mpigan bench master`

/// Runs NAME from $MPIGAN_SCRIPTS, else from scripts/ of the source tree mpigan was built from, with
/// /usr/bin/python3 and @p args;
/// false, with the reason printed, when it cannot (plot_script.cpp).
bool run_python_script(const std::string& name, const std::vector<std::string>& args);

/// `--precision fp32|bf16` on @p cmd, into @p target; @p what opens its help (what runs in that
/// precision, and the default). One option for every command that makes a backend.
inline CLI::Option* add_precision_option(CLI::App& cmd, std::string& target, const std::string& what) {
  return cmd
      .add_option("--precision", target,
                  what +
                      "; bf16 needs a CPU with native bf16 (avx512_core_bf16 or newer; MPIGAN_BF16_EMULATION=1 "
                      "emulates it on other AVX-512 CPUs) or a GPU of compute capability 8.0 or newer")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

/// `mpigan inspect FILE.h5`: validate a calorimeter data file and print a summary (cmd_inspect_data.cpp).
int inspect_data_file(const std::string& path);

}  // namespace mpigan::apps
