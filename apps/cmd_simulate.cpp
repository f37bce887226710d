// `mpigan simulate`: write a data set of GFlash-style parametrised showers in the real 3DGAN
// layouts (data/simulator/simulate_dataset.hpp; physics and figures in docs/data.md).
//
//   mpigan simulate --events N --geometry 25x25x25|51x51x25 --energy LO:HI [--angle LO:HI]
//                   --out DIR [--seed S] [--events-per-file K] [--threads T]
// Angles are degrees on the command line and radians in the files; a fixed energy is --energy E:E.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"

#include <memory>

namespace mpigan::apps {
namespace {
struct SimulateArgs {
  std::int64_t events = 0;
  std::string geometry = "25x25x25";
  std::string energy = "2:500";
  std::string angle;
  std::string out;
  std::uint64_t seed = 1;
  std::int64_t events_per_file = 10000;
  int threads = 0;
  double moliere_scale = 1.0;
  double stochastic = 0.166;
};

void run_simulate(const SimulateArgs& a) {
  using namespace mpigan::data;
  sim::SimulateOptions o;
  o.events = a.events;
  o.geometry = parse_geometry(a.geometry);
  std::tie(o.energy_lo, o.energy_hi) = sim::parse_range(a.energy, "--energy");
  if (!a.angle.empty()) {
    std::tie(o.angle_lo, o.angle_hi) = sim::parse_range(a.angle, "--angle");
  } else if (o.geometry == Geometry::ecal51) {
    o.angle_lo = 60.0;  // the variable-angle set: theta uniform in 60..120 degrees
    o.angle_hi = 120.0;
  }
  o.out_dir = a.out;
  o.seed = a.seed;
  o.events_per_file = a.events_per_file;
  o.threads = a.threads;
  o.shower.calorimeter.moliere_scale = a.moliere_scale;
  o.shower.stochastic_term = a.stochastic;
  sim::validate(o);
  spdlog::info("simulate: {} events, geometry {}, E {}..{} GeV, theta {}..{} deg, seed {}, {} events per file -> {}",
               o.events, to_string(o.geometry), o.energy_lo, o.energy_hi, o.angle_lo, o.angle_hi, o.seed,
               o.events_per_file, o.out_dir);
  spdlog::info("{}", sim::Calorimeter(o.shower.calorimeter).describe());
  const auto report = sim::simulate_dataset(o, [&](std::int64_t files, std::int64_t events) {
    spdlog::info("simulate: file {} written, {} of {} events", files, events, o.events);
  });
  fmt::print("simulated {} events into {} files in {:.2f} s: {:.1f} events/s\n", report.events, report.files.size(),
             report.seconds, report.events_per_second());
}
}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd =
      app.add_subcommand("simulate", "write a data set of parametrised (GFlash) showers in the 3DGAN layouts");
  cmd->add_option("--events", args->events, "number of events")->required()->check(integer_check(1));
  cmd->add_option("--geometry", args->geometry,
                  "25x25x25 (fixed angle, raw GeV), 51x51x25 (variable angle, GeV x 50) or 5x5x5 (the "
                  "25x25x25 showers read out in cells of 5x5 pads x 5 layers, raw GeV)")
      ->capture_default_str();
  cmd->add_option("--energy", args->energy, "energy range LO:HI in GeV (uniform); E:E for a fixed energy")
      ->capture_default_str();
  cmd->add_option("--angle", args->angle, "polar angle range LO:HI in degrees (51x51x25 only; default 60:120)");
  cmd->add_option("--out", args->out, "output directory")->required();
  cmd->add_option("--seed", args->seed, "random seed (same seed, same files)")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--events-per-file", args->events_per_file, "events per file")
      ->check(integer_check(1))
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "worker threads (0 = all cores)")
      ->check(integer_check(0, 1024))
      ->capture_default_str();
  cmd->add_option("--moliere-scale", args->moliere_scale, "scale of the effective Moliere radius (tuning)")
      ->check(real_check(0, true))
      ->capture_default_str();
  cmd->add_option("--stochastic", args->stochastic, "sampling term a in GeV^1/2 (thin layers)")
      ->check(real_check(0, false))
      ->capture_default_str();
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace mpigan::apps
