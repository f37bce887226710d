// Data-layer throughput: the shower simulator (events/s) and the Loader reading files on disk
// (events/s through EventFile reads, preprocessing, batching and the prefetch thread).
//
//   mpigan_bench_data_loader [--geometry 25x25x25|51x51x25] [--events N] [--batch B]
//                            [--read-threads T] [--sim-threads T] [--epochs E] [--dir DIR]
// Without --dir it simulates N events into a temporary directory first (that run is the simulator
// figure), then loads them. The page cache is warm after the simulation, which is the steady state
// of training (the 3DGAN data sets fit in memory; a cold first epoch is bounded by the disk).
// docs/data.md records the figures and the machine.
#include "mpigan/core/log.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/event_file.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/data/parallel.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

using namespace mpigan;
using namespace mpigan::data;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// CPU seconds of the whole process (all threads): on a shared machine, events per CPU-second is
// the figure that says what one core sustains.
double cpu_seconds() {
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}
}  // namespace

// A benchmark driver: options, set-up, timed loop and report in one place, as Google Benchmark
// mains are read (~85 lines).
int main(int argc, char** argv) {
  std::string geometry = "25x25x25", dir;
  std::int64_t events = 4000, batch = 128;
  int read_threads = 1, sim_threads = 0, epochs = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--geometry")
      geometry = v;
    else if (k == "--events")
      events = std::stoll(v);
    else if (k == "--batch")
      batch = std::stoll(v);
    else if (k == "--read-threads")
      read_threads = std::stoi(v);
    else if (k == "--sim-threads")
      sim_threads = std::stoi(v);
    else if (k == "--epochs")
      epochs = std::stoi(v);
    else if (k == "--dir")
      dir = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    init_logging("warning");
    const Geometry g = parse_geometry(geometry);
    std::filesystem::path tmp;
    if (dir.empty()) {
      tmp = std::filesystem::temp_directory_path() / ("mpigan-bench-data-" + std::to_string(::getpid()));
      dir = tmp.string();
      sim::SimulateOptions o;
      o.events = events;
      o.geometry = g;
      o.energy_lo = g == Geometry::ecal25 ? 2.0 : 100.0;
      o.energy_hi = g == Geometry::ecal25 ? 500.0 : 200.0;
      if (g == Geometry::ecal51) {
        o.angle_lo = 60;
        o.angle_hi = 120;
      }
      o.out_dir = dir;
      o.events_per_file = 1000;
      o.threads = sim_threads;
      const auto r = sim::simulate_dataset(o);
      std::printf("simulator  %-9s E %g..%g GeV  %lld events  %d threads  %.2f s  %.1f events/s\n", geometry.c_str(),
                  o.energy_lo, o.energy_hi, static_cast<long long>(r.events), resolve_threads(sim_threads), r.seconds,
                  r.events_per_second());
    }
    DatasetSpec spec;
    spec.train_files = {dir + "/*.h5"};
    spec.geometry = g;
    spec.preprocess = g == Geometry::ecal25 ? preprocess_3dgan() : preprocess_anglegan();
    auto ds = open_datasets(spec).train;

    // Raw reads: EventFile::read_event (chunk read + inflate + finiteness check), one thread.
    {
      std::vector<float> cells(static_cast<std::size_t>(ds->cells()));
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      for (std::int64_t k = 0; k < ds->size(); ++k) {
        const EventRef r = ds->ref(k);
        ds->files()[r.file].file->read_event(r.index, cells);
      }
      const double s = seconds_since(t0), c = cpu_seconds() - c0;
      std::printf("read       %-9s %lld events  1 thread   %.2f s  %.1f events/s  (%.1f events per CPU-second)\n",
                  geometry.c_str(), static_cast<long long>(ds->size()), s, static_cast<double>(ds->size()) / s,
                  static_cast<double>(ds->size()) / c);
    }
    // The Loader: shuffled epochs, preprocessing, batches, prefetch thread; the consumer only
    // takes batches, so this is the rate at which a training step could be fed.
    LoaderOptions lo;
    lo.batch = batch;
    lo.read_threads = read_threads;
    lo.seed = 1;
    Loader loader(ds, lo);
    Batch b;
    std::int64_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    for (int e = 0; e < epochs; ++e) {
      while (loader.next(b)) n += b.size();
    }
    const double s = seconds_since(t0), c = cpu_seconds() - c0;
    std::printf(
        "loader     %-9s %lld events  batch %lld  %d read thread(s)  %.2f s  %.1f events/s  (%.1f events per "
        "CPU-second)\n",
        geometry.c_str(), static_cast<long long>(n), static_cast<long long>(batch), read_threads, s,
        static_cast<double>(n) / s, static_cast<double>(n) / c);
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpigan_bench_data_loader: %s\n", e.what());
    return 1;
  }
  return 0;
}
