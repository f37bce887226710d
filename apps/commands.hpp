// The mpigan subcommands. Each add_*_command registers one CLI11 subcommand whose callback does
// the work; errors are mpigan::Error exceptions caught once, in main().
#pragma once

#include "run_guard.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
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

/// An integer option's check, in [@p lo, @p hi]: "--events: expected a positive integer, got '12abc'"
/// (CLI11's own number checks print a floating-point range and reject text as out of it).
/// In --help the option's type shows the range (INT:POSITIVE, INT:0..1024).
inline CLI::Validator integer_check(std::int64_t lo, std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  std::string expected, range;  // the error's words, --help's
  if (hi != std::numeric_limits<std::int64_t>::max()) {
    range = fmt::format("{}..{}", lo, hi);
    expected = "an integer in " + range;
  } else if (lo == 1) {
    range = "POSITIVE";
    expected = "a positive integer";
  } else {
    range = fmt::format(">={}", lo);
    expected = fmt::format("an integer >= {}", lo);
  }
  return CLI::Validator(
      [lo, hi, expected](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc() && p == end && v >= lo && v <= hi) return {};
        return fmt::format("expected {}, got '{}'", expected, text);
      },
      range, "");
}

/// A seed's check: an integer in 0..2^64-1 ("-1" would wrap around to 2^64-1 unnoticed).
inline CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc() && p == end) return {};
        return fmt::format("expected a seed, an integer in 0..{}, got '{}'", std::numeric_limits<std::uint64_t>::max(),
                           text);
      },
      "", "");
}

/// A real option's check: finite, above @p lo (or at it, unless @p lo_exclusive), at most @p hi.
inline CLI::Validator real_check(double lo, bool lo_exclusive, double hi = std::numeric_limits<double>::infinity()) {
  const std::string range = std::isinf(hi) ? fmt::format("{}{}", lo_exclusive ? ">" : ">=", lo)
                                           : fmt::format("{}{}, {}]", lo_exclusive ? "(" : "[", lo, hi);
  const std::string expected =
      std::isinf(hi) ? fmt::format("a number {} {}", lo_exclusive ? ">" : ">=", lo) : "a number in " + range;
  return CLI::Validator(
      [lo, hi, lo_exclusive, expected](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size() && std::isfinite(v);
        if (parsed && (lo_exclusive ? v > lo : v >= lo) && v <= hi) return {};
        return fmt::format("expected {}, got '{}'", expected, text);
      },
      range, "");
}

/// `mpigan inspect FILE.h5`: validate a calorimeter data file and print a summary (cmd_inspect_data.cpp).
int inspect_data_file(const std::string& path);

}  // namespace mpigan::apps
