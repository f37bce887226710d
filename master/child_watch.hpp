// How long a master may wait for a child's next message (topology.rank_timeout): each child's
// timing, and the report that ends a job whose child has gone silent.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace mpigan::master {

class ChildWatch {
 public:
  /// The master starts waiting for the child's next message at @p now.
  void awaiting(double now) { m_awaited_since = now; }
  /// A request arrived at @p now (the previous one at @p previous, 0 for the first).
  void arrived(double now, double previous);
  /// Seconds the child may stay silent: at least 600 s before its first request (start-up: data,
  /// kernels, a GPU context); then @p configured (> 0), else 20 of its mean intervals, at least
  /// 60 s, and 600 s until its second request.
  double limit(double configured) const;
  double silent_for(double now) const { return now - m_awaited_since; }
  bool too_long(double now, double configured) const { return silent_for(now) > limit(configured); }

 private:
  double m_awaited_since = 0, m_mean_interval = 0;
  std::int64_t m_requests = 0;
};

/// A child found silent for longer than its limit.
struct SilentChild {
  int rank = -1;
  std::size_t child = 0;
  double silent_s = 0;  ///< how long it had been silent when it was found
  double limit_s = 0;   ///< its limit then
};

/// The FAILED line of a job ended because the children @p silent stayed silent (one, or more when
/// another went silent while the job was ending). @p configured: topology.rank_timeout (0: auto);
/// @p latest: the last complete checkpoint, -1 when none.
std::string hung_report(std::span<const SilentChild> silent, double configured, std::int64_t latest,
                        const std::string& run_dir);

}  // namespace mpigan::master
