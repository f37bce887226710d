#include "mpigan/worker/watchdog.hpp"

#include "mpigan/core/error.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace mpigan::worker {

namespace {

constexpr char kBye = 'B';

[[noreturn]] void die(const std::string& msg, const std::string& failure_file) {
  // The record first: the launcher may kill this process as soon as the others notice.
  if (!failure_file.empty()) {
    std::ofstream out(failure_file, std::ios::trunc);
    out << msg << "\n";
  }
  const std::string line = "mpigan: error: " + msg + "\n";
  (void)!::write(2, line.data(), line.size());
  std::_Exit(2);  // the launcher ends the other ranks
}

/// Rank 0's watchdog, for the SIGABRT handler below.
Watchdog* g_rank0 = nullptr;

/// write() the whole string (async-signal-safe).
void write_all(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

struct Address {
  char host[256] = {0};
  int port = 0;
};

}  // namespace

void Watchdog::report_dead_from_signal() {
  // Async-signal-safe: recv with MSG_DONTWAIT | MSG_PEEK, open, write.
  for (std::size_t r = 1; r < m_fds.size(); ++r) {
    if (m_fds[r] < 0) continue;
    char c;
    if (::recv(m_fds[r], &c, 1, MSG_DONTWAIT | MSG_PEEK) != 0) continue;  // alive (EAGAIN) or data
    const std::string& l = m_labels[r];
    static const char kHead[] = "mpigan: error: ";
    static const char kTail[] = " died (its connection to rank 0 closed); the MPI library aborts this rank\n";
    write_all(2, kHead, sizeof kHead - 1);
    write_all(2, l.data(), l.size());
    write_all(2, kTail, sizeof kTail - 1);
    if (!m_failure_file.empty()) {
      const int fd = ::open(m_failure_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        write_all(fd, l.data(), l.size());
        write_all(fd, kTail, sizeof kTail - 1);
        ::close(fd);
      }
    }
  }
}

namespace {
/// When the MPI library aborts rank 0 because a peer vanished mid-transfer (UCX's shared-memory
/// transport does), say which rank died before the process goes.
void on_abort(int sig) {
  if (g_rank0) g_rank0->report_dead_from_signal();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
}  // namespace

Watchdog::Watchdog(const Comm& comm, std::vector<std::string> labels, std::string failure_file)
    : m_rank(comm.rank()), m_labels(std::move(labels)), m_failure_file(std::move(failure_file)) {
  const int n = comm.size();
  Address addr;
  if (m_rank == 0) {
    m_listen = ::socket(AF_INET, SOCK_STREAM, 0);
    MPIGAN_CHECK(m_listen >= 0, "watchdog: socket(): {}", std::strerror(errno));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = 0;
    MPIGAN_CHECK(::bind(m_listen, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0, "watchdog: bind(): {}",
                 std::strerror(errno));
    MPIGAN_CHECK(::listen(m_listen, n) == 0, "watchdog: listen(): {}", std::strerror(errno));
    socklen_t len = sizeof sa;
    ::getsockname(m_listen, reinterpret_cast<sockaddr*>(&sa), &len);
    addr.port = ntohs(sa.sin_port);
    ::gethostname(addr.host, sizeof addr.host - 1);
  }
  comm.broadcast_bytes(&addr, sizeof addr, 0);
  if (m_rank == 0) {
    m_fds.assign(static_cast<std::size_t>(n), -1);
    for (int k = 1; k < n; ++k) {
      const int fd = ::accept(m_listen, nullptr, nullptr);
      MPIGAN_CHECK(fd >= 0, "watchdog: accept(): {}", std::strerror(errno));
      int who = -1;
      MPIGAN_CHECK(::recv(fd, &who, sizeof who, MSG_WAITALL) == static_cast<ssize_t>(sizeof who) && who > 0 && who < n,
                   "watchdog: a rank connected without saying which");
      m_fds[static_cast<std::size_t>(who)] = fd;
    }
    ::close(m_listen);
    m_listen = -1;
  } else {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    const std::string port = std::to_string(addr.port);
    MPIGAN_CHECK(::getaddrinfo(addr.host, port.c_str(), &hints, &res) == 0 && res != nullptr,
                 "watchdog: cannot resolve rank 0's host '{}'", addr.host);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    MPIGAN_CHECK(rc == 0, "watchdog: cannot connect to rank 0 at {}:{}: {}", addr.host, addr.port, std::strerror(errno));
    MPIGAN_CHECK(::send(fd, &m_rank, sizeof m_rank, 0) == static_cast<ssize_t>(sizeof m_rank), "watchdog: send()");
    m_fds = {fd};
  }
  MPIGAN_CHECK(::pipe(m_wake) == 0, "watchdog: pipe()");
  if (m_rank == 0) {
    g_rank0 = this;
    ::signal(SIGABRT, on_abort);
  }
  m_thread = std::thread([this] { m_rank == 0 ? watch_children() : watch_parent(); });
  comm.barrier();
}

void Watchdog::goodbye() {
  if (m_rank != 0 && !m_fds.empty() && m_fds[0] >= 0) {
    const char b = kBye;
    (void)!::send(m_fds[0], &b, 1, MSG_NOSIGNAL);
  }
}

Watchdog::~Watchdog() {
  if (g_rank0 == this) {
    ::signal(SIGABRT, SIG_DFL);
    g_rank0 = nullptr;
  }
  // Rank 0 ends normally too: tell the others, so its closing connections are not taken for a death.
  if (m_rank == 0) {
    const char b = kBye;
    for (int fd : m_fds)
      if (fd >= 0) (void)!::send(fd, &b, 1, MSG_NOSIGNAL);
  }
  m_stop = true;
  const char c = 'x';
  (void)!::write(m_wake[1], &c, 1);
  if (m_thread.joinable()) m_thread.join();
  for (int fd : m_fds)
    if (fd >= 0) ::close(fd);
  ::close(m_wake[0]);
  ::close(m_wake[1]);
}

void Watchdog::watch_children() {
  std::vector<bool> said_bye(m_fds.size(), false);
  while (!m_stop) {
    std::vector<pollfd> p;
    std::vector<int> who;
    for (std::size_t r = 1; r < m_fds.size(); ++r)
      if (m_fds[r] >= 0) p.push_back({m_fds[r], POLLIN, 0}), who.push_back(static_cast<int>(r));
    p.push_back({m_wake[0], POLLIN, 0});
    if (::poll(p.data(), p.size(), -1) < 0 && errno != EINTR) return;
    if (m_stop) return;
    for (std::size_t i = 0; i + 1 < p.size(); ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int r = who[i];
      char c = 0;
      const ssize_t got = ::recv(m_fds[static_cast<std::size_t>(r)], &c, 1, 0);
      if (got == 1 && c == kBye) {
        said_bye[static_cast<std::size_t>(r)] = true;
        continue;
      }
      if (got <= 0) {
        ::close(m_fds[static_cast<std::size_t>(r)]);
        m_fds[static_cast<std::size_t>(r)] = -1;
        if (!said_bye[static_cast<std::size_t>(r)])
          die(m_labels[static_cast<std::size_t>(r)] + " died (its connection to rank 0 closed without a goodbye); ending the job",
              m_failure_file);
      }
    }
  }
}

void Watchdog::watch_parent() {
  while (!m_stop) {
    pollfd p[2] = {{m_fds[0], POLLIN, 0}, {m_wake[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (m_stop) return;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char c = 0;
      const ssize_t got = ::recv(m_fds[0], &c, 1, 0);
      if (got == 1 && c == kBye) return;  // rank 0 finished normally
      if (got <= 0) die("rank 0 (the master) is gone: its connection closed; ending this rank", "");
    }
  }
}

}  // namespace mpigan::worker
