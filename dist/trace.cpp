#include "mpigan/dist/trace.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"

#include <fmt/format.h>

namespace mpigan::dist {

Trace::Trace(bool enabled, int pid, std::string name, double start)
    : m_enabled(enabled), m_pid(pid), m_name(std::move(name)), m_start(start) {
  if (m_enabled)
    add(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"{}"}}}})", m_pid, m_name));
}

Trace::Span::Span(Trace* t, const char* name, const char* cat)
    : m_trace(t), m_name(name), m_cat(cat), m_t0(t ? MPI_Wtime() : 0) {}

Trace::Span::~Span() {
  if (!m_trace) return;
  const double t1 = MPI_Wtime();
  m_trace->add(fmt::format(R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":0,"ts":{:.1f},"dur":{:.1f}}})", m_name,
                           m_cat, m_trace->m_pid, (m_t0 - m_trace->m_start) * 1e6, (t1 - m_t0) * 1e6));
}

void Trace::counter(const char* name, double value) {
  if (!m_enabled) return;
  add(fmt::format(R"({{"name":"{}","ph":"C","pid":{},"ts":{:.1f},"args":{{"value":{}}}}})", name, m_pid,
                  (MPI_Wtime() - m_start) * 1e6, value));
}

void Trace::add(const std::string& event) {
  if (!m_events.empty()) m_events += ",\n";
  m_events += event;
}

void Trace::write(const Comm& comm, const std::string& path) const {
  const auto all = comm.gather_strings(m_events, 0);
  if (comm.rank() != 0) return;
  std::string text = "{\"traceEvents\":[\n";
  bool first = true;
  for (const auto& s : all) {
    if (s.empty()) continue;
    text += first ? "" : ",\n";
    text += s;
    first = false;
  }
  text += "\n],\"displayTimeUnit\":\"ms\"}\n";
  write_file_atomically(path, text, "trace");
}

}  // namespace mpigan::dist
