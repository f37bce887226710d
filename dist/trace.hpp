// Timeline tracing (--trace): every rank records spans (compute, send, receive, wait, apply, ...)
// with MPI_Wtime relative to a start shared by all ranks (taken after a barrier); at the end the
// events are gathered to rank 0 and written as one Chrome-trace JSON file that Perfetto and
// chrome://tracing load: one process per rank, named by its role.
#pragma once

#include "mpigan/core/mpi/comm.hpp"

#include <string>
#include <vector>

namespace mpigan::dist {

class Trace {
 public:
  Trace() = default;
  /// Enabled trace for process @p pid (the rank) named @p name; @p start = MPI_Wtime() at the
  /// common start.
  Trace(bool enabled, int pid, std::string name, double start);

  class Span {
   public:
    Span(Trace* t, const char* name, const char* cat);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Trace* m_trace;
    const char* m_name;
    const char* m_cat;
    double m_t0;
  };
  /// A span from now until the returned object is destroyed.
  [[nodiscard]] Span span(const char* name, const char* cat) { return Span(m_enabled ? this : nullptr, name, cat); }
  void counter(const char* name, double value);
  bool enabled() const { return m_enabled; }

  /// Gathers every rank's events to rank 0 of @p comm, which writes @p path. Collective.
  void write(const Comm& comm, const std::string& path) const;

 private:
  void add(const std::string& event);
  bool m_enabled = false;
  int m_pid = 0;
  std::string m_name;
  double m_start = 0;
  std::string m_events;
};

}  // namespace mpigan::dist
