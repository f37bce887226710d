// SMPI feature probes for the MPI and OS calls mpigan makes: features TEST
//   split_type win_shared thread_mpi thread_nompi sleep_for clocks globals tls spawn socket
//   nbcoll bor_byte cancel init_null vector_new hostname
// Each prints "PROBE <test> rank <r>: ..." lines; the report reads them.
#include <mpi.h>
#include <smpi/smpi.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

int g_counter = 0;               // a global: privatized per rank only with smpi/privatization:dlopen
thread_local int t_counter = 0;  // thread-local: all ranks share one OS thread with raw contexts
static std::atomic<int> g_atomic{0};

namespace {
int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
#define SAY(...)                                        \
  do {                                                  \
    std::printf("PROBE %s rank %d: ", test, rank_of()); \
    std::printf(__VA_ARGS__);                           \
    std::printf("\n");                                  \
    std::fflush(stdout);                                \
  } while (0)

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double clock_gettime_s() {  // clock_gettime is a macro (smpi_clock_gettime) under smpicxx
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  const char* test = argc > 1 ? argv[1] : "none";
  if (std::strcmp(test, "init_null") == 0) {
    int provided = -1;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    SAY("MPI_Init_thread(nullptr, nullptr, FUNNELED) ok, provided=%d (FUNNELED=%d MULTIPLE=%d)", provided,
        MPI_THREAD_FUNNELED, MPI_THREAD_MULTIPLE);
    MPI_Finalize();
    return 0;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const std::string t = test;

  if (t == "split_type") {
    MPI_Comm node;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int ns = -1, nr = -1;
    if (rc == MPI_SUCCESS) {
      MPI_Comm_size(node, &ns);
      MPI_Comm_rank(node, &nr);
    }
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    SAY("rc=%d node size=%d node rank=%d processor=%s", rc, ns, nr, name);
  } else if (t == "win_shared" || t == "win_shared_contig") {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int nr = 0, ns = 0;
    MPI_Comm_rank(node, &nr);
    MPI_Comm_size(node, &ns);
    MPI_Info info;
    MPI_Info_create(&info);
    if (t == "win_shared") MPI_Info_set(info, "alloc_shared_noncontig", "true");
    float* base = nullptr;
    MPI_Win win;
    int rc =
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(1024 * sizeof(float)), sizeof(float), info, node, &base, &win);
    MPI_Info_free(&info);
    SAY("MPI_Win_allocate_shared rc=%d base=%p (node size %d)", rc, static_cast<void*>(base), ns);
    if (rc == MPI_SUCCESS) {
      rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
      SAY("MPI_Win_lock_all rc=%d", rc);
      base[0] = 100.0f + static_cast<float>(nr);
      rc = MPI_Win_sync(win);
      MPI_Barrier(node);
      MPI_Aint sz = 0;
      int unit = 0;
      float* peer = nullptr;
      const int other = (nr + 1) % ns;
      int rc2 = MPI_Win_shared_query(win, other, &sz, &unit, &peer);
      MPI_Win_sync(win);
      SAY("MPI_Win_sync rc=%d; shared_query(%d) rc=%d size=%ld unit=%d ptr=%p value=%g (expect %d)", rc, other, rc2,
          static_cast<long>(sz), unit, static_cast<void*>(peer), peer ? static_cast<double>(peer[0]) : -1.0,
          100 + other);
      MPI_Barrier(node);
      MPI_Win_unlock_all(win);
      MPI_Win_free(&win);
    }
  } else if (t == "thread_mpi") {
    // A second OS thread calling MPI (mpigan's watchdog thread does not; this checks whether it could).
    int rc = -1;
    std::thread th([&] {
      int r = -1;
      rc = MPI_Comm_rank(MPI_COMM_WORLD, &r);
    });
    th.join();
    SAY("MPI_Comm_rank from a std::thread returned rc=%d", rc);
  } else if (t == "thread_nompi") {
    // OS threads that compute (ScopedHostThreads / OpenMP style) and a watcher thread that polls a pipe.
    int fds[2];
    if (pipe(fds) != 0) return 1;
    std::atomic<long> sum{0};
    std::vector<std::thread> pool;
    for (int i = 0; i < 4; ++i)
      pool.emplace_back([&, i] {
        long s = 0;
        for (long k = 0; k < 10000000; ++k) s += k % (i + 3);
        sum += s;
      });
    std::thread watcher([&] {
      pollfd p{fds[0], POLLIN, 0};
      ::poll(&p, 1, -1);
      char c;
      (void)!::read(fds[0], &c, 1);
    });
    const double w0 = MPI_Wtime(), r0 = steady_s();
    for (auto& th : pool) th.join();
    (void)!::write(fds[1], "x", 1);
    watcher.join();
    SAY("4 compute threads + a poll() watcher joined; sum=%ld; MPI_Wtime advanced %.6f s (real %.3f s)", sum.load(),
        MPI_Wtime() - w0, steady_s() - r0);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (t == "sleep_for") {
    // mpigan's Backoff::pause: std::this_thread::sleep_for (libstdc++ inlines ::nanosleep, which
    // smpi_helpers.h turns into smpi_nanosleep when the file is compiled with smpicxx).
    const double w0 = MPI_Wtime(), r0 = steady_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    SAY("sleep_for(500 ms) in the rank: MPI_Wtime +%.6f s, real +%.4f s", MPI_Wtime() - w0, steady_s() - r0);
    double inner = -1;
    std::thread th([&] {
      const double r1 = steady_s();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      inner = steady_s() - r1;
    });
    th.join();
    SAY("sleep_for(50 ms) in a std::thread: returned after real %.4f s", inner);
  } else if (t == "clocks") {
    const double w0 = MPI_Wtime(), s0 = steady_s(), c0 = clock_gettime_s();
    smpi_execute_benched(2.0);
    SAY("after smpi_execute_benched(2.0): MPI_Wtime +%.6f, clock_gettime (smpi macro) +%.6f, "
        "std::chrono::steady_clock +%.6f (real)",
        MPI_Wtime() - w0, clock_gettime_s() - c0, steady_s() - s0);
    const double w1 = MPI_Wtime();
    volatile double x = 0;
    for (long k = 0; k < 200000000; ++k) x = x + 1e-9;
    SAY("after ~0.2 s of real CPU work: MPI_Wtime +%.6f (smpi/simulate-computation decides)", MPI_Wtime() - w1);
    const double w2 = MPI_Wtime();
    for (int k = 0; k < 1000; ++k) (void)MPI_Wtime();
    SAY("1000 MPI_Wtime calls cost %.3e simulated s (smpi/wtime)", MPI_Wtime() - w2);
    int flag = 0;
    MPI_Request req;
    int buf = 0;
    MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &req);
    const double w3 = MPI_Wtime();
    for (int k = 0; k < 1000; ++k) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    SAY("1000 failed MPI_Test calls cost %.3e simulated s (smpi/test, smpi/grow-injected-times)", MPI_Wtime() - w3);
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else if (t == "globals") {
    for (int k = 0; k < 10; ++k) {
      ++g_counter;
      ++t_counter;
      ++g_atomic;
      MPI_Barrier(MPI_COMM_WORLD);
    }
    SAY("after 10 increments each: global=%d thread_local=%d atomic=%d (private would be 10 10 10)", g_counter,
        t_counter, g_atomic.load());
  } else if (t == "tls") {
    SAY("&t_counter=%p &g_counter=%p", static_cast<void*>(&t_counter), static_cast<void*>(&g_counter));
  } else if (t == "spawn") {
    if (rank == 0) {
      char self[4096] = {0};
      ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
      SAY("/proc/self/exe -> %s (n=%zd); getpid()=%d (smpi_getpid)", self, n, static_cast<int>(getpid()));
      pid_t pid = 0;
      char a0[] = "true";
      char* av[] = {a0, nullptr};
      int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, av, environ);
      int st = -1;
      if (rc == 0) waitpid(pid, &st, 0);
      SAY("posix_spawn(/bin/true) rc=%d exit status=%d", rc, st);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (t == "socket") {
    // mpigan's watchdog: rank 0 listens and accepts size-1 connections; the others connect.
    int port = 0, listener = -1;
    if (rank == 0) {
      listener = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      listen(listener, size);
      socklen_t len = sizeof sa;
      getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
      port = ntohs(sa.sin_port);
    }
    MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      int got = 0;
      for (int k = 1; k < size; ++k) {
        pollfd p{listener, POLLIN, 0};
        if (::poll(&p, 1, 3000) <= 0) break;  // mpigan blocks in accept() here for ever
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd >= 0) ++got;
      }
      SAY("accepted %d of %d connections within 3 s (the other ranks cannot run while rank 0 blocks)", got, size - 1);
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      sa.sin_port = htons(static_cast<std::uint16_t>(port));
      const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      SAY("connect() rc=%d", rc);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (t == "nbcoll") {
    std::vector<float> v(1000, 1.0f);
    MPI_Request r;
    int rc1 = MPI_Iallreduce(MPI_IN_PLACE, v.data(), 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    double d = rank;
    int rc2 = MPI_Iallreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    std::int64_t i64 = 1;
    int rc3 = MPI_Iallreduce(MPI_IN_PLACE, &i64, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int rc4 = MPI_Ibcast(v.data(), 1000, MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int rc5 = MPI_Ibarrier(MPI_COMM_WORLD, &r);
    int flag = 0;
    while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    MPI_Comm dup;
    int rc6 = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm split;
    int rc7 = MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, rank, &split);
    int lens[64] = {0}, displs[64] = {0};
    int len = 3;
    int rc8 = MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int k = 1; k < size; ++k) displs[k] = displs[k - 1] + lens[k - 1];
    char all[256];
    int rc9 = MPI_Gatherv("abc", 3, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    char text[MPI_MAX_ERROR_STRING];
    int tl = 0;
    MPI_Error_string(MPI_ERR_TRUNCATE, text, &tl);
    SAY("Iallreduce f/d/i64 rc=%d/%d/%d sum=%g max=%g i64=%ld; Ibcast %d; Ibarrier+Test %d; dup %d; split(UNDEF) %d "
        "null=%d; Gather %d Gatherv %d; Error_string='%s'",
        rc1, rc2, rc3, static_cast<double>(v[0]), d, static_cast<long>(i64), rc4, rc5, rc6, rc7, split == MPI_COMM_NULL,
        rc8, rc9, text);
  } else if (t == "bor_byte") {
    // topology.cpp: MPI_Allreduce of a cpu_set_t as MPI_BYTE with MPI_BOR.
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(rank % 8, &m);
    int rc = MPI_Allreduce(MPI_IN_PLACE, &m, static_cast<int>(sizeof m), MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    SAY("Allreduce(MPI_BYTE, MPI_BOR) rc=%d CPU_COUNT=%d (expect %d)", rc, CPU_COUNT(&m), size < 8 ? size : 8);
  } else if (t == "cancel") {
    int buf = 0;
    MPI_Request req;
    MPI_Irecv(&buf, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD, &req);
    int rc = MPI_Cancel(&req);
    MPI_Status st;
    int rc2 = MPI_Wait(&req, &st);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    // A truncated receive with MPI_ERRORS_RETURN.
    char small[4];
    char big[16] = "0123456789abcde";
    int rc3 = MPI_SUCCESS;
    if (size >= 2) {
      if (rank == 0) MPI_Send(big, 16, MPI_CHAR, 1, 8, MPI_COMM_WORLD);
      if (rank == 1) rc3 = MPI_Recv(small, 4, MPI_CHAR, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    SAY("MPI_Cancel rc=%d wait rc=%d cancelled=%d; truncated recv rc=%d (MPI_ERR_TRUNCATE=%d)", rc, rc2, cancelled, rc3,
        MPI_ERR_TRUNCATE);
  } else if (t == "vector_new") {
    // Does --cfg=smpi/auto-shared-malloc-thresh catch std::vector (operator new)? Compare with malloc.
    std::vector<float> v(4u << 20);
    float* m = static_cast<float*>(malloc((4u << 20) * sizeof(float)));  // the smpi macro
    v[0] = static_cast<float>(rank);
    m[0] = static_cast<float>(rank);
    MPI_Barrier(MPI_COMM_WORLD);
    SAY("vector[0]=%g (own: %d) malloc[0]=%g (shared if auto-shared-malloc caught it)", static_cast<double>(v[0]), rank,
        static_cast<double>(m[0]));
    free(m);
  } else if (t == "hostname") {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    SAY(
        "gethostname=%s MPI_Get_processor_name=%s getpid()=%d sched_getaffinity cpus=%d hw_concurrency=%u", host, name,
        static_cast<int>(getpid()),
        [] {
          cpu_set_t m;
          CPU_ZERO(&m);
          sched_getaffinity(0, sizeof m, &m);
          return CPU_COUNT(&m);
        }(),
        std::thread::hardware_concurrency());
  } else {
    SAY("unknown test");
  }
  MPI_Finalize();
  return 0;
}
