// mpigan: train 3D GANs for calorimeter simulation on many ranks.
// The single exit point: every error ends here, is logged with its rank and location, and ends
// the whole MPI job (MPI_Abort) when several ranks run, so no rank is left blocked in a receive.
#include "commands.hpp"
#include "run_guard.hpp"

#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/watchdog.hpp"

int main(int argc, char** argv) {
  // Rank 0 of a distributed run starts this executable again as its watchdog monitor.
  if (const auto rc = mpigan::dist::watchdog_monitor_main(argc, argv)) return *rc;
  // A signal ends the process at once until a run's loop defers it (core/stop_signal.hpp).
  mpigan::install_stop_handlers();
  CLI::App app{"mpigan: distributed training of 3D GANs for fast calorimeter simulation"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mpigan 0.1.0");
  mpigan::apps::add_train_command(app);
  mpigan::apps::add_simulate_command(app);
  mpigan::apps::add_generate_command(app);
  mpigan::apps::add_export_command(app);
  mpigan::apps::add_validate_command(app);
  mpigan::apps::add_report_command(app);
  mpigan::apps::add_sandbox_command(app);
  mpigan::apps::add_optimize_command(app);
  mpigan::apps::add_inspect_command(app);
  mpigan::apps::add_bench_command(app);
  return mpigan::apps::run_guarded([&] {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    std::fflush(stdout);
    return mpigan::apps::exit_status();
  });
}
