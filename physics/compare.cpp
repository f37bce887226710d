// The figure of merit and all metrics in one call (see compare.hpp).
#include "mpigan/physics/compare.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace mpigan::physics {
namespace {

class Stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - m_last).count();
    m_last = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point m_last = std::chrono::steady_clock::now();
};

}  // namespace

FigureOfMerit figure_of_merit(const Fpd& fpd) {
  FigureOfMerit f;
  f.value = fpd.value;
  f.error = fpd.error;
  return f;
}

FigureOfMerit figure_of_merit(const Observables& ref, const Observables& gen, const FomOptions& options) {
  return figure_of_merit(
      fpd(high_level_features(ref, options.features), high_level_features(gen, options.features), options.fpd));
}

Comparison compare(const Observables& ref, const Observables& gen, const CompareOptions& options) {
  Comparison c;
  Stopwatch w;
  c.bins = make_bins(options.binning);
  if (options.separation_enabled) c.separation = separation_powers(ref, gen, c.bins, options.separation);
  c.seconds.separation = w.lap();
  if (options.response_enabled) c.response = energy_response(ref, gen, c.bins, options.separation);
  c.seconds.response = w.lap();
  c.gan3d = gan3d_metric(ref, gen, c.bins, options.gan3d);
  c.seconds.gan3d = w.lap();
  c.sampling_fraction = sampling_fraction_mre(ref, gen, c.bins);
  c.seconds.sampling_fraction = w.lap();
  const FeatureMatrix fr = high_level_features(ref, options.features), fg = high_level_features(gen, options.features);
  c.seconds.features = w.lap();
  // fpd_hlf with the options' scaling and, on the same subsamples, fpd_cc with max_abs.
  std::vector<FeatureScaling> scalings{options.fpd.scaling};
  if (options.calochallenge_enabled) scalings.push_back(FeatureScaling::max_abs);
  const std::vector<Fpd> fpds = fpd(fr, fg, options.fpd, scalings);
  c.fpd = fpds[0];
  c.fom = figure_of_merit(c.fpd);
  if (options.calochallenge_enabled) {
    c.cc.fpd = kCaloChallengeScale * fpds[1].value;
    c.cc.fpd_error = kCaloChallengeScale * fpds[1].error;
  }
  c.seconds.fpd = w.lap();
  if (options.kpd_enabled) c.kpd = kpd(fr, fg, options.kpd);
  c.seconds.kpd = w.lap();
  if (options.calochallenge_enabled) {
    KpdOptions kpd_cc = options.kpd;
    kpd_cc.scaling = FeatureScaling::max_abs;
    const Kpd k = kpd(fr, fg, kpd_cc);
    c.cc.kpd = kCaloChallengeScale * k.value;
    c.cc.kpd_error = kCaloChallengeScale * k.error;
  }
  c.seconds.calochallenge = w.lap();
  if (options.bootstrap.replicas >= 2) {
    const BootstrapResult b = bootstrap(
        fr.rows, fg.rows,
        [&](std::span<const std::int64_t> ir, std::span<const std::int64_t> ig) {
          std::vector<double> v;
          for (const Fpd& f : fpd(select_rows(fr, ir), select_rows(fg, ig), options.bootstrap_fpd, scalings))
            v.push_back(f.value);
          return v;
        },
        options.bootstrap);
    c.fom.bootstrap_error = b.errors[0];
    if (options.calochallenge_enabled) c.cc.fpd_bootstrap_error = kCaloChallengeScale * b.errors[1];
  }
  c.seconds.bootstrap = w.lap();
  if (options.classifier_enabled && std::min(ref.events, gen.events) >= kClassifierMinEvents)
    c.classifier = classifier_test(ref, gen, options.classifier);
  c.seconds.classifier = w.lap();
  return c;
}

}  // namespace mpigan::physics
