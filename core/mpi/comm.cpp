// MPI wrappers (comm.hpp): RAII communicators, checked calls, collectives and quiet waits.
#include "mpigan/core/mpi/comm.hpp"
#ifdef MPIGAN_SMPI
#include <smpi/smpi.h>
#endif

#include "mpigan/core/error.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace mpigan {

namespace detail {
void raise_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(source_location(file, line), fmt::format("MPI call failed: {}: {}", call, std::string(text, len)));
}
}  // namespace detail

Comm Comm::world() {
  MPIGAN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  return Comm(MPI_COMM_WORLD, false);
}

Comm::Comm(MPI_Comm c, bool owned) : m_comm(c), m_owned(owned) {
  if (c != MPI_COMM_NULL) MPIGAN_MPI_CHECK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
}

Comm::~Comm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (m_owned && m_comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&m_comm);
}

Comm::Comm(Comm&& o) noexcept : m_comm(o.m_comm), m_owned(o.m_owned) {
  o.m_comm = MPI_COMM_NULL;
  o.m_owned = false;
}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    this->~Comm();
    m_comm = o.m_comm;
    m_owned = o.m_owned;
    o.m_comm = MPI_COMM_NULL;
    o.m_owned = false;
  }
  return *this;
}

int Comm::rank() const {
  int r = 0;
  MPIGAN_MPI_CHECK(MPI_Comm_rank(m_comm, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  MPIGAN_MPI_CHECK(MPI_Comm_size(m_comm, &s));
  return s;
}

Comm Comm::split(int color, int key) const {
  MPI_Comm c = MPI_COMM_NULL;
  MPIGAN_MPI_CHECK(MPI_Comm_split(m_comm, color, key, &c));
  return Comm(c, c != MPI_COMM_NULL);
}

Comm Comm::split_shared() const {
  MPI_Comm c = MPI_COMM_NULL;
  MPIGAN_MPI_CHECK(MPI_Comm_split_type(m_comm, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &c));
  return Comm(c, true);
}

namespace {
/// A collective, started non-blocking and waited for quietly (wait_quietly: no core spinning while
/// other ranks are slow). Under SMPI the blocking call: SMPI builds its non-blocking collectives
/// from point-to-point requests that a wait tests one by one (quadratic in the ranks: minutes at
/// 1 024), while its blocking ones run its collective algorithms.
template <class Blocking, class NonBlocking>
void collective([[maybe_unused]] Blocking&& blocking, [[maybe_unused]] NonBlocking&& nonblocking,
                [[maybe_unused]] double spin_s = 0.0, [[maybe_unused]] const Idle& idle = {}) {
#ifdef MPIGAN_SMPI
  MPIGAN_MPI_CHECK(blocking());
#else
  MPI_Request req;
  MPIGAN_MPI_CHECK(nonblocking(&req));
  wait_quietly(req, spin_s, idle);
#endif
}
}  // namespace

void Comm::barrier() const {
  collective([&] { return MPI_Barrier(m_comm); }, [&](MPI_Request* r) { return MPI_Ibarrier(m_comm, r); });
}

void Comm::broadcast(std::span<float> data, int root) const {
  const int n = static_cast<int>(data.size());
  collective([&] { return MPI_Bcast(data.data(), n, MPI_FLOAT, root, m_comm); },
             [&](MPI_Request* r) { return MPI_Ibcast(data.data(), n, MPI_FLOAT, root, m_comm, r); },
             kTransferSpinSeconds);
}

void Comm::broadcast_bytes(void* data, std::size_t bytes, int root, const Idle& idle) const {
  const int n = static_cast<int>(bytes);
  collective([&] { return MPI_Bcast(data, n, MPI_BYTE, root, m_comm); },
             [&](MPI_Request* r) { return MPI_Ibcast(data, n, MPI_BYTE, root, m_comm, r); }, 0.0, idle);
}

namespace {
/// An in-place allreduce of @p n values of @p type.
void allreduce(MPI_Comm comm, void* data, int n, MPI_Datatype type, MPI_Op op, double spin_s) {
  collective([&] { return MPI_Allreduce(MPI_IN_PLACE, data, n, type, op, comm); },
             [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, data, n, type, op, comm, r); }, spin_s);
}
}  // namespace

void Comm::allreduce_sum(std::span<float> data) const {
  allreduce(m_comm, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, kTransferSpinSeconds);
}

void Comm::allreduce_sum(std::span<double> data) const {
  allreduce(m_comm, data.data(), static_cast<int>(data.size()), MPI_DOUBLE, MPI_SUM, kTransferSpinSeconds);
}

double Comm::allreduce_max(double v) const {
  allreduce(m_comm, &v, 1, MPI_DOUBLE, MPI_MAX, 0.0);
  return v;
}

std::int64_t Comm::allreduce_sum(std::int64_t v) const {
  allreduce(m_comm, &v, 1, MPI_INT64_T, MPI_SUM, 0.0);
  return v;
}

std::vector<std::string> Comm::gather_strings(const std::string& mine, int root) const {
  const int n = size();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(n));
  MPIGAN_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, m_comm));
  std::vector<int> displs(static_cast<std::size_t>(n), 0);
  std::string all;
  if (rank() == root) {
    for (int i = 1; i < n; ++i) displs[i] = displs[i - 1] + lens[i - 1];
    all.resize(static_cast<std::size_t>(displs[n - 1] + lens[n - 1]));
  }
  MPIGAN_MPI_CHECK(
      MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, root, m_comm));
  std::vector<std::string> out;
  if (rank() == root)
    for (int i = 0; i < n; ++i)
      out.push_back(all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(lens[i])));
  return out;
}

void Comm::send_bytes(const void* data, std::size_t bytes, int dest, int tag) const {
  MPI_Request req;
  MPIGAN_MPI_CHECK(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dest, tag, m_comm, &req));
  wait_quietly(req);
}

void Comm::send(std::span<const float> data, int dest, int tag) const {
  MPI_Request req;
  MPIGAN_MPI_CHECK(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_FLOAT, dest, tag, m_comm, &req));
  wait_quietly(req, kTransferSpinSeconds);
}

void Comm::recv_bytes(void* data, std::size_t bytes, int source, int tag, double spin_s, const Idle& idle) const {
  MPI_Request req = irecv_bytes(data, bytes, source, tag);
  const MPI_Status st = wait_quietly(req, spin_s, idle);
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  MPIGAN_CHECK(static_cast<std::size_t>(count) == bytes, "MPI receive from rank {} (tag {}): expected {} bytes, got {}",
               source, tag, bytes, count);
}

void Comm::recv(std::span<float> data, int source, int tag) const {
  MPI_Request req;
  MPIGAN_MPI_CHECK(MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, source, tag, m_comm, &req));
  const MPI_Status st = wait_quietly(req, kTransferSpinSeconds);
  int count = 0;
  MPI_Get_count(&st, MPI_FLOAT, &count);
  MPIGAN_CHECK(static_cast<std::size_t>(count) == data.size(),
               "MPI receive from rank {} (tag {}): expected {} floats, got {} (do both sides run the same model?)",
               source, tag, data.size(), count);
}

MPI_Request Comm::irecv_bytes(void* data, std::size_t bytes, int source, int tag) const {
  MPI_Request req;
  MPIGAN_MPI_CHECK(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, source, tag, m_comm, &req));
  return req;
}

namespace {
/// Sleeps that start short and back off, so a quick reply costs little latency and a long wait
/// costs little CPU.
class Backoff {
 public:
  explicit Backoff(double max_s = 1e-3) : m_max_us(std::max(static_cast<int>(max_s * 1e6), 50)) {}
  void pause() {
    std::this_thread::sleep_for(std::chrono::microseconds(m_us));
    m_us = std::min(m_us * 2, m_max_us);
  }
  void restart() { m_us = 50; }

 private:
  int m_us = 50, m_max_us;
};

/// The idle loop of every wait: @p test() returns true when done. Tests without sleeping for 16
/// tries and for up to @p spin_s, then sleeps between tests: on the doorbell when there is one
/// (polling with backoff for a grace period after each ring), else with backoff.
template <class Test>
void idle_until(Test&& test, double spin_s, const Idle& idle) {
  using clock = std::chrono::steady_clock;
  // Test without sleeping first: for a few tries (short messages and collectives often complete
  // at once), or for up to spin_s while a payload is in flight. Transports that move a large
  // message in fragments (UCX over shared memory, TCP) advance only inside MPI calls, on both
  // sides: sleeping between tests would stretch a 4 MB transfer from under a millisecond to tens.
  const auto spin_until = clock::now() + std::chrono::duration<double>(spin_s);
  bool spinning = spin_s > 0;
  Backoff b(idle.max_sleep_s);
  const auto grace = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(kBellGraceSeconds));
  auto grace_until = clock::now() + grace;  // a message may be announced already
  for (int tries = 0;; ++tries) {
    // Read the bell before testing: a ring after this read makes the sleep below return at once.
    const std::uint32_t seen = idle.bell.value();
    if (test()) return;
    if (tries < 16) continue;
    if (spinning) {
      if (tries % 64 == 0 && clock::now() >= spin_until) spinning = false;
      std::this_thread::yield();  // a rank sharing this core (a master) runs at once when it wakes
      continue;
    }
    if (idle.give_up && (tries & 63) == 0 && idle.give_up()) return;
    if (!idle.bell.valid() || clock::now() < grace_until) {
      b.pause();
      continue;
    }
    if (idle.bell.wait(seen, idle.bell_timeout_s)) {
      grace_until = clock::now() + grace;
      b.restart();
    }
  }
}
}  // namespace

#ifdef MPIGAN_SMPI
// Under SimGrid's SMPI every rank is a context of one simulator thread: a real sleep stops the
// whole simulation, and each MPI_Test costs simulated time (smpi/test). A wait for one request
// blocks; the doorbell, the spin and give_up (a hung-rank check: nothing hangs in a simulation)
// do not apply.
MPI_Status wait_quietly(MPI_Request& req, double, const Idle&) {
  MPI_Status st{};
  MPIGAN_MPI_CHECK(MPI_Wait(&req, &st));
  return st;
}

std::vector<int> wait_some_quietly(std::vector<MPI_Request>& reqs, const Idle&) {
  std::vector<int> idx(reqs.size());
  std::vector<MPI_Status> st(reqs.size());
  int n = 0;
  // Not MPI_Waitsome: SimGrid 3.32's Waitsome and Waitany over a master's receives return tens of
  // milliseconds of simulated time after a header arrived (16 workers: 3.5 % of the throughput
  // lost, docs/sandbox.md). Tests with simulated sleeps between them (10 us, backing off to
  // 200 us: at most 0.01 % of a 1.6 s step); run with --cfg=smpi/test:0 so a test costs nothing.
  for (useconds_t us = 10;; us = std::min<useconds_t>(2 * us, 200)) {
    MPIGAN_MPI_CHECK(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, idx.data(), st.data()));
    if (n != 0) break;
    smpi_usleep(us);
  }
  if (n == MPI_UNDEFINED) return {};
  return {idx.begin(), idx.begin() + n};
}
#else
MPI_Status wait_quietly(MPI_Request& req, double spin_s, const Idle& idle) {
  MPI_Status st{};
  idle_until(
      [&] {
        int done = 0;
        MPIGAN_MPI_CHECK(MPI_Test(&req, &done, &st));
        return done != 0;
      },
      spin_s, idle);
  return st;
}

std::vector<int> wait_some_quietly(std::vector<MPI_Request>& reqs, const Idle& idle) {
  std::vector<int> idx(reqs.size());
  std::vector<MPI_Status> st(reqs.size());
  int n = 0;
  idle_until(
      [&] {
        MPIGAN_MPI_CHECK(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, idx.data(), st.data()));
        return n != 0;  // some completed, or MPI_UNDEFINED: nothing left to wait for
      },
      0.0, idle);
  if (n == MPI_UNDEFINED) return {};
  return {idx.begin(), idx.begin() + n};
}
#endif

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace mpigan
