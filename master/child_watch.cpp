// A master's watch over its children's silences (child_watch.hpp).
#include "mpigan/master/child_watch.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace mpigan::master {

void ChildWatch::arrived(double now, double previous) {
  if (m_requests > 0) {
    const double dt = now - previous;
    m_mean_interval = m_requests == 1 ? dt : 0.9 * m_mean_interval + 0.1 * dt;
  }
  ++m_requests;
}

double ChildWatch::limit(double configured) const {
  if (m_requests == 0) return std::max(configured, 600.0);  // start-up: data, kernels, a GPU context
  if (configured > 0) return configured;
  return m_requests < 2 ? 600.0 : std::max(60.0, 20.0 * m_mean_interval);
}

std::string hung_report(std::span<const SilentChild> silent, double configured, std::int64_t latest,
                        const std::string& run_dir) {
  std::string who;
  for (const SilentChild& c : silent)
    who += fmt::format(
        "{}rank {} (child {} of this master) has sent nothing for {:.0f} s, more than its limit of {:.0f} s "
        "(topology.rank_timeout{})",
        who.empty() ? "" : "; ", c.rank, c.child, c.silent_s, c.limit_s,
        configured > 0 ? "" : ": auto, 20 of its mean intervals, at least 60 s");
  return fmt::format(
      "{}: {} hung or stopped (SIGSTOP, a deadlock, swapping); ending the job. {}", who,
      silent.size() > 1 ? "they are" : "it is",
      latest >= 0 ? fmt::format("The last complete checkpoint is step {}: resume with --resume {}", latest, run_dir)
                  : std::string("No complete checkpoint was written"));
}

}  // namespace mpigan::master
