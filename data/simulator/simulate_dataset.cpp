// Data-set generation (see simulate_dataset.hpp).
#include "mpigan/data/simulator/simulate_dataset.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/angle_measure.hpp"
#include "mpigan/data/event_writer.hpp"
#include "mpigan/data/parallel.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numbers>

namespace mpigan::data::sim {
namespace {

// Events simulated between two ordered writes, per thread: large enough that threads rarely wait
// at the end of a block, small enough to bound memory (compressed chunks only).
constexpr std::int64_t kBlockPerThread = 32;

struct EventOut {
  std::vector<unsigned char> chunk;
  float energy = 0, theta = 0, eta = 0, mtheta = 0, sum = 0;
};

double parse_number(std::string_view s, std::string_view what, std::string_view whole) {
  double v = 0;
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end || s.empty()) {
    MPIGAN_THROW(ConfigError, "{}: '{}' is not LO:HI with two numbers", what, whole);
  }
  return v;
}

}  // namespace

std::pair<double, double> parse_range(std::string_view text, std::string_view what) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    const double v = parse_number(text, what, text);
    return {v, v};
  }
  const double lo = parse_number(text.substr(0, colon), what, text);
  const double hi = parse_number(text.substr(colon + 1), what, text);
  if (lo > hi) {
    MPIGAN_THROW(ConfigError, "{}: '{}' has LO {} > HI {}", what, text, lo, hi);
  }
  return {lo, hi};
}

std::string simulated_file_name(Geometry g, std::int64_t index) {
  const char* stem = g == Geometry::ecal51 ? "EleEscan_RandomAngle" : g == Geometry::ecal5 ? "EleEscan5" : "EleEscan";
  return fmt::format("{}_{:03d}.h5", stem, index + 1);
}

Rng event_rng(std::uint64_t seed, std::int64_t g) {
  return Rng(seed, mix64(hash_string("mpigan.simulate.event") + static_cast<std::uint64_t>(g)));
}

void validate(const SimulateOptions& o) {
  std::vector<std::string> problems;
  if (o.events < 1) problems.push_back(fmt::format("simulate: --events must be >= 1, got {}", o.events));
  if (o.events_per_file < 1)
    problems.push_back(fmt::format("simulate: --events-per-file must be >= 1, got {}", o.events_per_file));
  if (!(o.energy_lo > 0) || !(o.energy_hi >= o.energy_lo) || !std::isfinite(o.energy_hi)) {
    problems.push_back(
        fmt::format("simulate: --energy {}:{} must satisfy 0 < LO <= HI (GeV)", o.energy_lo, o.energy_hi));
  }
  if (o.geometry != Geometry::ecal51 && (o.angle_lo != 90.0 || o.angle_hi != 90.0)) {
    problems.push_back(
        fmt::format("simulate: --angle {}:{} needs --geometry 51x51x25 (the {} set is at normal "
                    "incidence, 90 degrees)",
                    o.angle_lo, o.angle_hi, to_string(o.geometry)));
  }
  if (!(o.angle_lo >= 10.0) || !(o.angle_hi <= 170.0) || !(o.angle_lo <= o.angle_hi)) {
    problems.push_back(
        fmt::format("simulate: --angle {}:{} must satisfy 10 <= LO <= HI <= 170 (degrees)", o.angle_lo, o.angle_hi));
  }
  if (o.out_dir.empty()) problems.push_back("simulate: --out DIR is required");
  if (o.gzip_level < 0 || o.gzip_level > 9)
    problems.push_back(fmt::format("simulate: gzip level {} not in 0..9", o.gzip_level));
  if (o.threads < 0) problems.push_back(fmt::format("simulate: --threads {} must be >= 0", o.threads));
  MPIGAN_CHECK_PROBLEMS(problems);
}

SimulateReport simulate_dataset(const SimulateOptions& o,
                                const std::function<void(std::int64_t, std::int64_t)>& progress) {
  validate(o);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) MPIGAN_THROW(DataError, "simulate: cannot create output directory '{}': {}", o.out_dir, ec.message());
  // A set of this geometry already there would be overwritten file by file, or mixed with this one.
  {
    const std::string stem = simulated_file_name(o.geometry, 0);
    const std::string prefix = stem.substr(0, stem.rfind('_') + 1);
    std::vector<std::string> found;
    for (const auto& f : fs::directory_iterator(o.out_dir, ec)) {
      const std::string name = f.path().filename().string();
      if (name.size() == stem.size() && name.starts_with(prefix) && name.ends_with(".h5")) found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    if (!found.empty())
      MPIGAN_THROW(
          DataError,
          "simulate: '{}' already holds {} file(s) of a {} data set ({}{}): simulating into it would overwrite "
          "or mix two sets; give another --out, or remove them first",
          o.out_dir, found.size(), to_string(o.geometry), found.front(), found.size() > 1 ? ", ..." : "");
  }

  // A coarse geometry is simulated in its fine parent and each shower rebinned, so its Monte Carlo
  // is exactly the fine one read out with merged cells.
  const ShowerSimulator simulator(o.shower, fine_geometry(o.geometry));
  const bool coarse = fine_geometry(o.geometry) != o.geometry;
  const Dims3 dims = geometry_dims(o.geometry);
  const bool angled = o.geometry == Geometry::ecal51;
  const double scale = angled ? kX50 : 1.0;  // file units: raw GeV (25^3) or GeV x 50 (51x51x25)
  const int threads = resolve_threads(o.threads);
  const double deg = std::numbers::pi / 180.0;

  SimulateReport report;
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t nfiles = (o.events + o.events_per_file - 1) / o.events_per_file;
  for (std::int64_t f = 0; f < nfiles; ++f) {
    const std::int64_t first = f * o.events_per_file;
    const std::int64_t n = std::min(o.events_per_file, o.events - first);
    const std::string path = (fs::path(o.out_dir) / simulated_file_name(o.geometry, f)).string();
    EventWriter writer(path, dims, n, o.gzip_level);
    std::vector<float> energy(static_cast<std::size_t>(n)), theta(energy), eta(energy), mtheta(energy), sum(energy);
    const std::int64_t block = kBlockPerThread * threads;
    std::vector<EventOut> out(static_cast<std::size_t>(std::min(block, n)));
    for (std::int64_t b = 0; b < n; b += block) {
      const std::int64_t m = std::min(block, n - b);
      parallel_for(m, threads, [&](std::int64_t i) {
        const std::int64_t g = first + b + i;
        Rng rng = event_rng(o.seed, g);
        EventOut& e = out[static_cast<std::size_t>(i)];
        const double energy_gev = o.energy_lo + (o.energy_hi - o.energy_lo) * rng.uniform_double();
        const double th = (o.angle_lo + (o.angle_hi - o.angle_lo) * rng.uniform_double()) * deg;
        thread_local std::vector<float> cells, fine;
        cells.resize(static_cast<std::size_t>(dims.product()));
        if (coarse) {
          fine.resize(static_cast<std::size_t>(simulator.dims().product()));
          simulator.simulate(energy_gev, th, rng, fine);
          rebin_shower(o.geometry, fine.data(), cells.data());
        } else {
          simulator.simulate(energy_gev, th, rng, cells);
        }
        double s = 0;
        for (float& c : cells) {
          c = static_cast<float>(c * scale);
          s += c;
        }
        e.energy = static_cast<float>(energy_gev);
        e.theta = static_cast<float>(th);
        e.eta = static_cast<float>(-std::log(std::tan(th / 2.0)));
        e.mtheta = angled ? static_cast<float>(measure_angle(cells, dims)) : 0.0f;
        e.sum = static_cast<float>(s);
        e.chunk = EventWriter::compress(cells, o.gzip_level);
      });
      for (std::int64_t i = 0; i < m; ++i) {  // ordered writes: the file does not depend on threads
        const EventOut& e = out[static_cast<std::size_t>(i)];
        writer.write_compressed(b + i, e.chunk);
        const auto k = static_cast<std::size_t>(b + i);
        energy[k] = e.energy;
        theta[k] = e.theta;
        eta[k] = e.eta;
        mtheta[k] = e.mtheta;
        sum[k] = e.sum;
      }
    }
    writer.write_labels(keys::energy, energy);
    if (angled) {
      writer.write_labels(keys::theta, theta);
      writer.write_labels(keys::eta, eta);
      writer.write_labels(keys::mtheta, mtheta);
      writer.write_labels(keys::sum, sum);
    }
    writer.close();
    report.files.push_back(path);
    report.events += n;
    if (progress) progress(f + 1, report.events);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace mpigan::data::sim
