// The validation report: report.json and the CSV tables behind the plots (report.hpp).
#include "mpigan/physics/report.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/data/event_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

namespace mpigan::physics {

namespace {

using nlohmann::json;

/// NaN and infinities as JSON null (JSON has no NaN).
json number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

std::ofstream open_csv(const std::string& dir, const std::string& name, const std::string& header) {
  std::ofstream out(dir + "/" + name);
  MPIGAN_CHECK(out.good(), "validate: cannot write '{}/{}'", dir, name);
  out << header << '\n';
  return out;
}

/// Per bin and sample: the event-averaged profiles along x, y, z (GeV), each cell's mean with its
/// standard error (the events' standard deviation / sqrt(n); 0 for a single event).
void write_profiles(const std::string& dir, const Observables& ref, const Observables& gen,
                    const std::vector<EventBin>& bins) {
  auto out = open_csv(dir, "profiles.csv", "bin,sample,axis,index,mean_gev,error_gev");
  for (const auto& b : bins)
    for (const auto* o : {&ref, &gen}) {
      const auto idx = select_bin(*o, b);
      if (idx.empty()) continue;
      const auto n = static_cast<double>(idx.size());
      for (int a = 0; a < 3; ++a) {
        std::vector<double> sum(static_cast<std::size_t>(o->extent(a)), 0.0), sum2(sum.size(), 0.0);
        for (auto e : idx) {
          const auto p = o->profile_of(a, e);
          for (std::size_t i = 0; i < sum.size(); ++i) {
            sum[i] += p[i];
            sum2[i] += static_cast<double>(p[i]) * p[i];
          }
        }
        for (std::size_t i = 0; i < sum.size(); ++i) {
          const double mean = sum[i] / n;
          const double var = idx.size() > 1 ? std::max(0.0, (sum2[i] - n * mean * mean) / (n - 1)) : 0.0;
          out << '"' << b.label << "\"," << (o == &ref ? "reference" : "generated") << ',' << "xyz"[a] << ',' << i
              << ',' << mean << ',' << std::sqrt(var / n) << '\n';
        }
      }
    }
}

/// Per event and sample: the scalars the plots histogram (one row per event).
void write_events(const std::string& dir, const Observables& ref, const Observables& gen) {
  auto out = open_csv(dir, "events.csv",
                      "sample,energy_gev,ecal_sum_gev,sampling_fraction,hits,m1_x,m1_y,m1_z,m2_x,m2_y,m2_z");
  for (const auto* o : {&ref, &gen})
    for (std::int64_t e = 0; e < o->events; ++e) {
      const auto k = static_cast<std::size_t>(e);
      out << (o == &ref ? "reference" : "generated") << ',' << o->energy[k] << ',' << o->ecal_sum[k] << ','
          << o->sampling_fraction[k] << ',' << o->hits[k];
      for (int a = 0; a < 3; ++a) out << ',' << o->m1[static_cast<std::size_t>(a)][k];
      for (int a = 0; a < 3; ++a) out << ',' << o->m2[static_cast<std::size_t>(a)][k];
      out << '\n';
    }
}

/// Per bin and sample: the cell-energy spectrum (cells per event in each log bin).
void write_spectrum(const std::string& dir, const Observables& ref, const Observables& gen,
                    const std::vector<EventBin>& bins) {
  auto out = open_csv(dir, "spectrum.csv", "bin,sample,lo_gev,hi_gev,cells_per_event");
  const auto& sb = ref.options.spectrum;
  for (const auto& b : bins)
    for (const auto* o : {&ref, &gen}) {
      const auto idx = select_bin(*o, b);
      if (idx.empty()) continue;
      for (int k = 1; k < sb.bins(); ++k) {
        double n = 0;
        for (auto e : idx) n += o->spectrum_of(e)[static_cast<std::size_t>(k)];
        const double hi = k + 1 < sb.bins() ? sb.edge(k + 1) : std::numeric_limits<double>::infinity();
        out << '"' << b.label << "\"," << (o == &ref ? "reference" : "generated") << ',' << sb.edge(k) << ','
            << (std::isfinite(hi) ? std::to_string(hi) : "inf") << ',' << n / static_cast<double>(idx.size()) << '\n';
      }
    }
}

json to_json(const ComparedValue& v) {
  return {{"ref", number(v.ref)},     {"ref_error", number(v.ref_error)},
          {"gen", number(v.gen)},     {"gen_error", number(v.gen_error)},
          {"ratio", number(v.ratio)}, {"ratio_error", number(v.ratio_error)},
          {"pull", number(v.pull)}};
}

/// Per bin: resolution, linearity, occupancy and shape of E / Ep (response.hpp), with the largest
/// |pull| of each over the bins.
json to_json(const EnergyResponse& r) {
  json j = {{"max_abs_pull",
             {{"linearity", number(r.max_abs_pull_linearity)},
              {"resolution", number(r.max_abs_pull_resolution)},
              {"occupancy", number(r.max_abs_pull_occupancy)},
              {"shape", number(r.max_abs_pull_shape)}}},
            {"bins", json::array()}};
  for (const auto& b : r.bins)
    j["bins"].push_back({{"bin", b.bin},
                         {"n_ref", b.n_ref},
                         {"n_gen", b.n_gen},
                         {"resolution", to_json(b.resolution)},
                         {"linearity", to_json(b.linearity)},
                         {"occupancy", to_json(b.occupancy)},
                         {"shape",
                          {{"s", number(b.shape_s)},
                           {"floor", number(b.shape_floor)},
                           {"floor_error", number(b.shape_floor_error)},
                           {"pull", number(b.shape_pull)}}}});
  return j;
}

/// response.csv: one row per bin and figure; for the shape, gen = S, ref = its floor and
/// ref_error the floor's spread.
void write_response(const std::string& dir, const EnergyResponse& r) {
  auto out =
      open_csv(dir, "response.csv", "bin,quantity,n_ref,n_gen,ref,ref_error,gen,gen_error,ratio,ratio_error,pull");
  const auto row = [&](const ResponseBin& b, const char* name, const ComparedValue& v) {
    out << '"' << b.bin << "\"," << name << ',' << b.n_ref << ',' << b.n_gen << ',' << v.ref << ',' << v.ref_error
        << ',' << v.gen << ',' << v.gen_error << ',' << v.ratio << ',' << v.ratio_error << ',' << v.pull << '\n';
  };
  for (const auto& b : r.bins) {
    row(b, "resolution", b.resolution);
    row(b, "linearity", b.linearity);
    row(b, "occupancy", b.occupancy);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    row(b, "shape_separation",
        ComparedValue{b.shape_floor, b.shape_floor_error, b.shape_s, nan, nan, nan, b.shape_pull});
  }
}

json to_json(const Comparison& c) {
  json j;
  j["figure_of_merit"] = {{"name", c.fom.name},
                          {"value", number(c.fom.value)},
                          {"error", number(c.fom.error)},
                          {"bootstrap_error", number(c.fom.bootstrap_error)}};
  j["fpd"] = {{"value", number(c.fpd.value)},
              {"error", number(c.fpd.error)},
              {"bootstrap_error", number(c.fom.bootstrap_error)},
              {"slope", number(c.fpd.slope)}};
  j["kpd"] = {{"value", number(c.kpd.value)}, {"error", number(c.kpd.error)}};
  // The CaloChallenge convention: max_abs-scaled features, x 10^3 (compare.hpp).
  j["fpd_cc"] = {{"value", number(c.cc.fpd)},
                 {"error", number(c.cc.fpd_error)},
                 {"bootstrap_error", number(c.cc.fpd_bootstrap_error)},
                 {"scaled_by", 1000}};
  j["kpd_cc"] = {{"value", number(c.cc.kpd)}, {"error", number(c.cc.kpd_error)}, {"scaled_by", 1000}};
  j["response"] = to_json(c.response);
  if (c.classifier)
    j["classifier"] = {
        {"auc", number(c.classifier->auc)},           {"auc_error", number(c.classifier->auc_error)},
        {"jsd", number(c.classifier->jsd)},           {"test_bce", number(c.classifier->test_bce)},
        {"train_events", c.classifier->train_events}, {"validation_events", c.classifier->validation_events},
        {"test_events", c.classifier->test_events},   {"epochs", c.classifier->epochs_run},
        {"best_epoch", c.classifier->best_epoch},     {"seconds", number(c.classifier->seconds)},
        {"repeats", c.classifier->repeats},           {"auc_spread", number(c.classifier->auc_spread)}};
  j["gan3d_metric"] = {{"total", number(c.gan3d.total)},
                       {"moments", number(c.gan3d.moments)},
                       {"profiles", number(c.gan3d.profiles)},
                       {"angle", number(c.gan3d.angle)}};
  for (const auto& b : c.gan3d.bins)
    j["gan3d_metric"]["bins"].push_back({{"bin", b.bin},
                                         {"n_ref", b.n_ref},
                                         {"n_gen", b.n_gen},
                                         {"moments", number(b.moments)},
                                         {"profiles", number(b.profiles)}});
  j["sampling_fraction"] = {{"mre", number(c.sampling_fraction.mre)}, {"error", number(c.sampling_fraction.error)}};
  for (const auto& b : c.sampling_fraction.bins)
    j["sampling_fraction"]["bins"].push_back({{"bin", b.bin},
                                              {"n_ref", b.n_ref},
                                              {"n_gen", b.n_gen},
                                              {"mean_ref", number(b.mean_ref)},
                                              {"mean_gen", number(b.mean_gen)},
                                              {"sigma_ref", number(b.sigma_ref)},
                                              {"sigma_gen", number(b.sigma_gen)},
                                              {"mre", number(b.mre)},
                                              {"error", number(b.error)}});
  // Separation powers: the median over observables of S / floor per bin, and the worst ones.
  json sep = json::object();
  for (const auto& r : c.separation.rows)
    if (r.observable.find('[') == std::string::npos)  // scalars only here; per-layer rows are in the CSV
      sep[r.bin][r.observable] = {
          {"s", number(r.s)}, {"floor", number(r.floor)}, {"floor_error", number(r.floor_error)}};
  j["separation_power"] = sep;
  j["seconds"] = {{"separation", c.seconds.separation},
                  {"gan3d", c.seconds.gan3d},
                  {"sampling_fraction", c.seconds.sampling_fraction},
                  {"fpd", c.seconds.fpd},
                  {"kpd", c.seconds.kpd},
                  {"calochallenge", c.seconds.calochallenge},
                  {"bootstrap", c.seconds.bootstrap},
                  {"response", c.seconds.response},
                  {"classifier", c.seconds.classifier},
                  {"total", c.seconds.total()}};
  return j;
}

}  // namespace

Observables read_observables(const std::string& path, std::int64_t max_events) {
  std::string angle_key;
  if (data::EventFile::open(path, std::nullopt)->file().has(data::keys::theta)) angle_key = data::keys::theta;
  const auto g = data::EventFile::open(path, std::nullopt, angle_key);
  const std::int64_t n = max_events > 0 ? std::min(max_events, g->events()) : g->events();
  MPIGAN_CHECK(n > 0, "validate: '{}' holds no events", path);
  std::vector<float> cells(static_cast<std::size_t>(n * g->cells()));
  g->read_events(0, n, cells);
  const std::vector<float> energy(g->energy().begin(), g->energy().begin() + n);
  std::vector<float> angle;
  if (!angle_key.empty()) angle.assign(g->angle().begin(), g->angle().begin() + n);
  ObservableOptions o;
  if (g->geometry() == data::Geometry::ecal51) o.cell_scale = 1.0 / data::kX50;  // GeV x 50 files
  return compute_observables(cells, data::geometry_dims(g->geometry()), energy, angle, o);
}

ReportSummary write_report(const std::string& generated, const std::string& reference, const std::string& dir,
                           const CompareOptions& options, std::int64_t max_events) {
  make_output_directory(dir, "validate: cannot create the report directory");
  const Observables ref = read_observables(reference, max_events);
  const Observables gen = read_observables(generated, max_events);
  MPIGAN_CHECK(ref.dims == gen.dims, "validate: '{}' has showers of {} cells, '{}' of {}", generated,
               gen.dims.to_string(), reference, ref.dims.to_string());
  ReportSummary s;
  s.comparison = compare(ref, gen, options);
  const Comparison& c = s.comparison;

  json j = to_json(c);
  j["generated"] = {{"file", generated}, {"events", gen.events}};
  j["reference"] = {{"file", reference}, {"events", ref.events}};
  s.json_path = dir + "/report.json";
  std::ofstream(s.json_path) << j.dump(2) << '\n';

  auto sep = open_csv(dir, "separation.csv", "observable,bin,n_ref,n_gen,s,floor,floor_error");
  for (const auto& r : c.separation.rows)
    sep << '"' << r.observable << "\",\"" << r.bin << "\"," << r.n_ref << ',' << r.n_gen << ',' << r.s << ',' << r.floor
        << ',' << r.floor_error << '\n';
  auto sf = open_csv(dir, "sampling_fraction.csv", "bin,n_ref,n_gen,mean_ref,mean_gen,sigma_ref,sigma_gen,mre,error");
  for (const auto& b : c.sampling_fraction.bins)
    sf << '"' << b.bin << "\"," << b.n_ref << ',' << b.n_gen << ',' << b.mean_ref << ',' << b.mean_gen << ','
       << b.sigma_ref << ',' << b.sigma_gen << ',' << b.mre << ',' << b.error << '\n';
  auto g3 = open_csv(dir, "gan3d_metric.csv", "bin,n_ref,n_gen,moments,profiles");
  for (const auto& b : c.gan3d.bins)
    g3 << '"' << b.bin << "\"," << b.n_ref << ',' << b.n_gen << ',' << b.moments << ',' << b.profiles << '\n';
  write_response(dir, c.response);
  write_profiles(dir, ref, gen, c.bins);
  write_events(dir, ref, gen);
  write_spectrum(dir, ref, gen, c.bins);
  return s;
}

}  // namespace mpigan::physics
