// The figure of merit and all metrics in one call (see compare.hpp).
#include "mpigan/physics/compare.hpp"

#include <chrono>

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
  c.gan3d = gan3d_metric(ref, gen, c.bins, options.gan3d);
  c.seconds.gan3d = w.lap();
  c.sampling_fraction = sampling_fraction_mre(ref, gen, c.bins);
  c.seconds.sampling_fraction = w.lap();
  const FeatureMatrix fr = high_level_features(ref, options.features), fg = high_level_features(gen, options.features);
  c.seconds.features = w.lap();
  c.fpd = fpd(fr, fg, options.fpd);
  c.fom = figure_of_merit(c.fpd);
  c.seconds.fpd = w.lap();
  if (options.kpd_enabled) c.kpd = kpd(fr, fg, options.kpd);
  c.seconds.kpd = w.lap();
  if (options.classifier_enabled) c.classifier = classifier_test(ref, gen, options.classifier);
  return c;
}

}  // namespace mpigan::physics
