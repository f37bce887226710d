#include "mpigan/dist/watchdog.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/stop_signal.hpp"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace mpigan::dist {

namespace {

constexpr char kBye = 'B';    ///< rank -> monitor: finished normally; monitor -> rank: rank 0 finished
constexpr char kEnd = 'E';    ///< monitor -> rank: a rank died, the failure is reported; exit now
constexpr char kAbort = 'A';  ///< rank 0 -> monitor: rank 0 is aborting (SIGABRT)
constexpr const char* kMonitorFlag = "--watchdog-monitor";

/// Rank 0's end of the pipe to its monitor, for the SIGABRT handler.
int g_life_fd = -1;
/// Ranks > 0: the connection to rank 0's monitor, for the terminal-signal hook.
int g_watch_fd = -1;

/// rank -> monitor, just before a signal ends the rank (a second SIGTERM, or one during set-up):
/// one byte naming the signal, so the report says the rank was stopped, not that it died.
char signal_byte(int signo) {
  return signo == SIGTERM ? 'T' : signo == SIGINT ? 'I' : signo == SIGUSR1 ? 'U' : 'X';
}
std::string signal_of_byte(char c) {
  return c == 'T' ? "SIGTERM" : c == 'I' ? "SIGINT" : c == 'U' ? "SIGUSR1" : "a signal";
}
bool is_signal_byte(char c) {
  return c == 'T' || c == 'I' || c == 'U' || c == 'X';
}

/// The terminal-signal hook (core/stop_signal.hpp): async-signal-safe writes only.
void tell_monitor_signalled(int signo) {
  const char b = signal_byte(signo);
  if (g_life_fd >= 0) (void)!::write(g_life_fd, &b, 1);
  if (g_watch_fd >= 0) (void)!::send(g_watch_fd, &b, 1, MSG_NOSIGNAL);
}

/// The MPI library aborts rank 0 when a peer vanishes in the middle of a transfer (UCX's
/// shared-memory transport does): tell the monitor, so it names the peer rather than rank 0.
void on_abort(int sig) {
  if (g_life_fd >= 0) {
    const char a = kAbort;
    (void)!::write(g_life_fd, &a, 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// What rank 0 tells every rank over MPI: where to connect, and the job's secret. Only the job's
/// own ranks learn it, so only they can take a rank's place in the monitor.
struct Address {
  char host[256] = {0};
  int port = 0;
  std::array<std::uint8_t, 16> secret{};
};

/// A rank's first words on its connection: its number and the secret.
struct Hello {
  int rank = -1;
  std::array<std::uint8_t, 16> secret{};
};

/// How long rank 0 waits for a connection's hello: a rank sends it as soon as it connects.
constexpr int kHelloTimeoutS = 5;

/// "10.0.0.7:51234" of an accepted connection's peer.
std::string peer_name(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return fmt::format("{}:{}", ip, ntohs(a.sin_port));
}

/// Test hook (MPIGAN_WATCHDOG_STRANGERS=1): before the ranks connect, rank 0 itself connects three
/// times the way a stranger on the network could: claiming rank 1 without the secret, saying nothing,
/// and closing half-way through a hello. The job must refuse them and still watch every rank.
std::vector<int> connect_strangers(int port, const std::array<std::uint8_t, 16>& secret) {
  const char* hook = std::getenv("MPIGAN_WATCHDOG_STRANGERS");
  if (hook == nullptr || std::strcmp(hook, "1") != 0) return {};
  std::vector<int> fds;
  for (int k = 0; k < 3; ++k) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    MPIGAN_CHECK(fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0,
                 "watchdog: the stranger test hook cannot connect: {}", std::strerror(errno));
    Hello claim{1, secret};
    claim.secret[0] ^= 1;  // one bit wrong
    if (k == 0) (void)!::send(fd, &claim, sizeof claim, 0);
    if (k == 2) {
      (void)!::send(fd, &claim, sizeof claim.rank, 0);
      ::shutdown(fd, SHUT_WR);
    }
    fds.push_back(fd);
  }
  return fds;
}

void write_line(const std::string& s) {
  const std::string line = s + "\n";
  const char* p = line.data();
  std::size_t n = line.size();
  while (n > 0) {
    const ssize_t w = ::write(2, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// ------------------------------------------------------------------------------ the monitor

struct Peer {
  int rank = -1;
  int fd = -1;
  std::string label;
  bool bye = false;
  char signalled = 0;  ///< the signal byte the rank sent before a signal ended it
};

/// Close every descriptor the monitor inherited except stdin/out/err and @p keep (MPI's and the
/// launcher's sockets must not be held open by it).
void close_other_fds(const std::vector<int>& keep) {
  std::vector<int> open;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > 2) open.push_back(fd);
    }
    ::closedir(d);
  }
  for (int fd : open)
    if (std::find(keep.begin(), keep.end(), fd) == keep.end()) ::close(fd);
}

/// The monitor process's whole life, one loop over poll(): rank 0's pipe (its goodbye, its abort)
/// and every other rank's connection (a goodbye, or a close that is a death). It reports the first
/// death, with the ranks found dead at the same moment, writes FAILED and ends the job; it is one
/// function because its few states (running, rank 0 aborting, reporting) share the same
/// descriptors and must be read in one place to be ordered correctly.
int run_monitor(int life, pid_t rank0, const std::string& failure_file, const std::string& rank0_label,
                std::vector<Peer> peers) {
  std::vector<int> keep{life};
  for (const auto& p : peers) keep.push_back(p.fd);
  close_other_fds(keep);
  ::signal(SIGPIPE, SIG_IGN);
  // scancel and the batch system signal every process of the job, this one too: it must outlive
  // the ranks' graceful stop (core/stop_signal.hpp), and it ends with rank 0 anyway.
  for (int s : {SIGTERM, SIGINT, SIGUSR1, SIGHUP}) ::signal(s, SIG_IGN);
  auto tell_all = [&](char c) {
    for (auto& p : peers)
      if (p.fd >= 0) {
        (void)!::send(p.fd, &c, 1, MSG_NOSIGNAL);
        ::close(p.fd);
        p.fd = -1;
      }
  };
  auto report = [&](const std::vector<std::string>& lines) {
    // stderr first, then the record in the run directory.
    for (const auto& l : lines) write_line("mpigan: error: " + l);
    if (!failure_file.empty()) {
      // Written aside and renamed into place: the launcher may return while this process still
      // writes, and whoever reads FAILED then must see the rank's own words or the whole report.
      const std::string tmp = failure_file + ".tmp";
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& l : lines) out << l << "\n";
      // A rank that failed with an error left it beside FAILED (dist/launch.cpp): say what it was.
      std::error_code ec;
      const auto dir = std::filesystem::path(failure_file).parent_path();
      for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
        if (!f.path().filename().string().starts_with("FAILED.rank-")) continue;
        std::ifstream in(f.path());
        const std::string words((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        out << "its error: " << words;
        write_line("mpigan: error: the error: " + words.substr(0, words.find_last_not_of('\n') + 1));
      }
      out.close();
      std::filesystem::rename(tmp, failure_file, ec);
    }
  };
  // After a report: keep rank 0's stderr open a moment. Hydra forwards a pipe's contents until
  // every writer has closed it, but may stop reading a pipe whose writer it already saw die.
  auto linger = [] {
    const timespec one_s{1, 0};
    ::nanosleep(&one_s, nullptr);
  };
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> rank0_gone;
  bool rank0_aborted = false;
  char rank0_signalled = 0;
  while (true) {
    std::vector<pollfd> p;
    std::vector<std::size_t> who;
    for (std::size_t i = 0; i < peers.size(); ++i)
      if (peers[i].fd >= 0) p.push_back({peers[i].fd, POLLIN, 0}), who.push_back(i);
    if (!rank0_gone) p.push_back({life, POLLIN, 0});
    // When rank 0 aborted, wait a little for a closed connection: a rank that died in the middle
    // of a transfer makes the MPI library abort rank 0 within microseconds, and the dead rank is
    // the one to name.
    int timeout_ms = -1;
    if (rank0_gone)
      timeout_ms = static_cast<int>(std::max<long>(
          0, 300 - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *rank0_gone).count()));
    if (::poll(p.data(), p.size(), timeout_ms) < 0 && errno != EINTR) return 3;
    std::vector<std::string> dead;
    bool any_signalled = false;  // a rank among them was stopped by a signal, not killed
    bool rank0_closed_now = false;
    for (std::size_t k = 0; k < who.size(); ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Peer& peer = peers[who[k]];
      char c = 0;
      const ssize_t got = ::recv(peer.fd, &c, 1, 0);
      if (got == 1) {
        peer.bye = peer.bye || c == kBye;
        if (!is_signal_byte(c)) continue;
        peer.signalled = c;
        // The rank ends right after its signal byte: its close may already be here, and must be
        // seen in this wake-up, with rank 0's end that it causes.
        if (::recv(peer.fd, &c, 1, MSG_DONTWAIT) != 0) continue;
      }
      ::close(peer.fd);
      peer.fd = -1;
      any_signalled = any_signalled || peer.signalled != 0;
      if (peer.signalled)
        dead.push_back(peer.label + " was stopped by " + signal_of_byte(peer.signalled) +
                       " (a second signal, or one before training started, ends a rank at once; the job ends)");
      else if (!peer.bye)
        dead.push_back(peer.label + " died (its connection to rank 0 closed without a goodbye); ending the job");
    }
    if (!rank0_gone && (p.back().revents & (POLLIN | POLLHUP | POLLERR))) {
      char c = 0;
      const ssize_t got = ::read(life, &c, 1);
      if (got == 1 && c == kBye) {  // rank 0 finished (normally or after reporting its own error)
        tell_all(kBye);
        return 0;
      }
      rank0_aborted = rank0_aborted || (got == 1 && c == kAbort);
      if (got == 1 && is_signal_byte(c)) rank0_signalled = c;
      if (got <= 0) rank0_gone = Clock::now(), rank0_closed_now = true;
    }
    if (!dead.empty()) {
      // Rank 0's end (not an abort) seen in the same wake-up as these: on a loaded node this
      // process may wake only after the launcher has ended every rank, so the closures cannot be
      // ordered; name rank 0 with them rather than blame only the others (mpi.cli caught it).
      if (rank0_closed_now && rank0_signalled)
        dead.insert(dead.begin(), rank0_label + " was stopped by " + signal_of_byte(rank0_signalled));
      else if (rank0_closed_now && !rank0_aborted && any_signalled)
        dead.insert(dead.begin(), rank0_label +
                                      " ended with the job at the same moment: the launcher ends every rank as soon "
                                      "as one has ended");
      else if (rank0_closed_now && !rank0_aborted)
        dead.insert(dead.begin(), rank0_label +
                                      " died at the same moment as the rank(s) below: the launcher ends every rank "
                                      "as soon as one dies, so which of them died first is unknown");
      report(dead);
      if (!rank0_gone) ::kill(rank0, SIGKILL);  // blocked on a receive from the dead rank; SIGTERM only asks
      tell_all(kEnd);
      linger();
      return 2;
    }
    // A rank stopped by a signal whose close is not seen yet: wait for it as for an abort, so the
    // report names it rather than rank 0, which the launcher ended because of it.
    const bool signalled_open =
        std::any_of(peers.begin(), peers.end(), [](const Peer& q) { return q.fd >= 0 && q.signalled != 0; });
    if (rank0_gone &&
        (!(rank0_aborted || signalled_open) || Clock::now() - *rank0_gone >= std::chrono::milliseconds(300))) {
      const std::string how = rank0_signalled ? " was stopped by " + signal_of_byte(rank0_signalled)
                              : rank0_aborted ? " aborted (see its message above)"
                                              : " died";
      report({rank0_label + how + "; ending the job"});
      tell_all(kEnd);
      linger();
      return 2;
    }
  }
}

}  // namespace

std::optional<int> watchdog_monitor_main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], kMonitorFlag) != 0) return std::nullopt;
  // mpigan --watchdog-monitor LIFE_FD RANK0_PID FAILURE_FILE RANK0_LABEL {RANK FD LABEL}...
  if (argc < 6 || (argc - 6) % 3 != 0) {
    write_line("mpigan: error: --watchdog-monitor is internal (started by rank 0 of a distributed run)");
    return 1;
  }
  std::vector<Peer> peers;
  for (int i = 6; i + 2 < argc; i += 3) peers.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1]), argv[i + 2]});
  return run_monitor(std::atoi(argv[2]), static_cast<pid_t>(std::atol(argv[3])), argv[4], argv[5], std::move(peers));
}

// ------------------------------------------------------------------------------ the ranks

Watchdog::Watchdog(const Comm& comm, const std::vector<std::string>& labels, std::string failure_file)
    : m_rank(comm.rank()), m_failure_file(std::move(failure_file)) {
#ifdef MPIGAN_SMPI
  // Under SMPI the ranks are contexts of one simulator process: rank 0's accept() would block the
  // simulation, and a rank cannot die apart from the others. No watchdog.
  (void)labels;
  return;
#endif
  const int n = comm.size();
  // A job on one node listens on the loopback only: nothing outside the node can reach it.
  const bool one_node = comm.split_shared().size() == n;
  Address addr;
  int listener = -1;
  std::vector<int> strangers;
  if (m_rank == 0) {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    MPIGAN_CHECK(listener >= 0, "watchdog: socket(): {}", std::strerror(errno));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(one_node ? INADDR_LOOPBACK : INADDR_ANY);
    sa.sin_port = 0;
    MPIGAN_CHECK(::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0, "watchdog: bind(): {}",
                 std::strerror(errno));
    MPIGAN_CHECK(::listen(listener, n) == 0, "watchdog: listen(): {}", std::strerror(errno));
    socklen_t len = sizeof sa;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
    addr.port = ntohs(sa.sin_port);
    if (one_node)
      std::strcpy(addr.host, "127.0.0.1");
    else
      ::gethostname(addr.host, sizeof addr.host - 1);
    MPIGAN_CHECK(::getrandom(addr.secret.data(), addr.secret.size(), 0) == static_cast<ssize_t>(addr.secret.size()),
                 "watchdog: getrandom(): {}", std::strerror(errno));
    strangers = connect_strangers(addr.port, addr.secret);
  }
  comm.broadcast_bytes(&addr, sizeof addr, 0);
  if (m_rank == 0) {
    std::vector<int> fds(static_cast<std::size_t>(n), -1);
    for (int joined = 1; joined < n;) {
      sockaddr_in from{};
      socklen_t from_len = sizeof from;
      const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
      MPIGAN_CHECK(fd >= 0, "watchdog: accept(): {}", std::strerror(errno));
      // The hello, within kHelloTimeoutS: a stranger that says nothing holds the start-up no longer.
      const timeval limit{kHelloTimeoutS, 0}, none{0, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      Hello hello;
      const ssize_t got = ::recv(fd, &hello, sizeof hello, MSG_WAITALL);
      std::string refused;
      if (got < 0)
        refused = fmt::format("sent no complete hello within {} s", kHelloTimeoutS);
      else if (got != static_cast<ssize_t>(sizeof hello))
        refused = fmt::format("closed after {} of the hello's {} bytes", got, sizeof hello);
      else if (hello.secret != addr.secret)
        refused = "does not know the job's secret";
      else if (hello.rank <= 0 || hello.rank >= n)
        refused = fmt::format("claimed rank {}, not in [1, {})", hello.rank, n);
      else if (fds[static_cast<std::size_t>(hello.rank)] >= 0)
        refused = fmt::format("claimed rank {}, already connected", hello.rank);
      if (!refused.empty()) {
        spdlog::warn("watchdog: refused a connection from {}: it {}", peer_name(from), refused);
        ::close(fd);
        continue;
      }
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
      fds[static_cast<std::size_t>(hello.rank)] = fd;
      ++joined;
    }
    ::close(listener);
    for (const int fd : strangers) ::close(fd);
    start_monitor(fds, labels);
  } else {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    const std::string port = std::to_string(addr.port);
    MPIGAN_CHECK(::getaddrinfo(addr.host, port.c_str(), &hints, &res) == 0 && res != nullptr,
                 "watchdog: cannot resolve rank 0's host '{}'", addr.host);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    MPIGAN_CHECK(rc == 0, "watchdog: cannot connect to rank 0 at {}:{}: {}", addr.host, addr.port,
                 std::strerror(errno));
    const Hello hello{m_rank, addr.secret};
    MPIGAN_CHECK(::send(fd, &hello, sizeof hello, 0) == static_cast<ssize_t>(sizeof hello), "watchdog: send()");
    m_fd = fd;
    g_watch_fd = fd;
    set_terminal_signal_hook(&tell_monitor_signalled);
    MPIGAN_CHECK(::pipe2(m_wake, O_CLOEXEC) == 0, "watchdog: pipe()");
    m_thread = std::thread([this] { watch_parent(); });
  }
  comm.barrier();
}

void Watchdog::start_monitor(const std::vector<int>& fds, const std::vector<std::string>& labels) {
  int life[2] = {-1, -1};
  MPIGAN_CHECK(::pipe2(life, O_CLOEXEC) == 0, "watchdog: pipe(): {}", std::strerror(errno));
  // The monitor inherits the read end of the pipe and the connections (CLOEXEC cleared on these
  // only); it closes whatever else leaks through at once.
  auto inherit = [](int fd) { ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) & ~FD_CLOEXEC); };
  inherit(life[0]);
  std::vector<std::string> args{"mpigan",       kMonitorFlag, std::to_string(life[0]), std::to_string(::getpid()),
                                m_failure_file, labels.at(0)};
  for (std::size_t r = 1; r < fds.size(); ++r) {
    inherit(fds[r]);
    args.insert(args.end(), {std::to_string(r), std::to_string(fds[r]), labels.at(r)});
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own session: a launcher that kills rank 0's process group does not take the monitor along.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  const int rc = ::posix_spawn(&m_monitor, "/proc/self/exe", nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  ::close(life[0]);
  for (std::size_t r = 1; r < fds.size(); ++r) ::close(fds[r]);
  MPIGAN_CHECK(rc == 0, "watchdog: cannot start the monitor process (posix_spawn of /proc/self/exe): {}",
               std::strerror(rc));
  m_life = life[1];
  g_life_fd = m_life;
  set_terminal_signal_hook(&tell_monitor_signalled);
  ::signal(SIGABRT, on_abort);
}

void Watchdog::goodbye() {
  if (m_rank != 0 && m_fd >= 0) {
    const char b = kBye;
    (void)!::send(m_fd, &b, 1, MSG_NOSIGNAL);
  }
}

Watchdog::~Watchdog() {
  if (m_rank == 0) {
    // Rank 0 ends (normally, or unwinding after an error it reports itself): the monitor tells
    // the others, so its closing connections are not taken for a death, and exits.
    if (m_life >= 0) {
      ::signal(SIGABRT, SIG_DFL);
      g_life_fd = -1;
      set_terminal_signal_hook(nullptr);
      const char b = kBye;
      (void)!::write(m_life, &b, 1);
      ::close(m_life);
    }
    if (m_monitor > 0) ::waitpid(m_monitor, nullptr, 0);
    return;
  }
  m_stop = true;
  const char c = 'x';
  (void)!::write(m_wake[1], &c, 1);
  if (m_thread.joinable()) m_thread.join();
  set_terminal_signal_hook(nullptr);
  g_watch_fd = -1;
  if (m_fd >= 0) ::close(m_fd);
  ::close(m_wake[0]);
  ::close(m_wake[1]);
}

void Watchdog::watch_parent() {
  while (!m_stop) {
    pollfd p[2] = {{m_fd, POLLIN, 0}, {m_wake[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (m_stop) return;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char c = 0;
      const ssize_t got = ::recv(m_fd, &c, 1, 0);
      if (got == 1 && c == kBye) return;         // rank 0 finished
      if (got == 1 && c == kEnd) std::_Exit(2);  // a rank died; rank 0's monitor has reported it
      if (got <= 0) {
        write_line("mpigan: error: rank 0 (the master) is gone: its connection closed; ending rank " +
                   std::to_string(m_rank));
        std::_Exit(2);
      }
    }
  }
}

}  // namespace mpigan::dist
