// SMPI probe: a master-worker exchange shaped like mpigan's (header + P-float payload up, header +
// P-float weights down), flat (one master) or as a tree (top master, k sub-masters).
//
//   mw [--mode flat|tree] [--subs K] [--every E] [--P floats] [--U updates] [--step s] [--jitter f]
//      [--serve s] [--fwd-serve s] [--compute benched|flops|sleep|execute|none] [--shared 0|1]
//      [--wait waitany|waitsome|testsome]
//
// Rank 0: the (top) master. Flat: ranks 1..N-1 are workers. Tree: ranks 1..K are sub-masters and
// worker w (rank >= K+1) belongs to sub-master 1 + (w-K-1) % K; a sub-master applies each worker
// update and, every E of its updates, pushes its accumulated change to the top master and takes
// the top master's weights back (blocking), before answering the worker (as mpigan's server.cpp).
// The top master stops after U worker updates in total (sub-masters report how many they hold).
// No globals: runs with --cfg=smpi/privatization:no.
#include <mpi.h>
#ifdef SMPI_PROBE_SMPI
#include <simgrid/host.h>
#include <smpi/smpi.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

enum Kind : std::int32_t { kUpdate = 1, kWeights = 2, kStop = 3 };
constexpr int kTagHeader = 10, kTagPayload = 11, kTagReply = 12, kTagReplyPayload = 13;

struct Header {  // 64 bytes, like mpigan's (kind, version, counts, three sums of squares)
  std::int32_t kind = 0, flags = 0;
  std::int64_t version = 0, samples = 0, updates = 0;
  double sumsq[3] = {0, 0, 0};
  std::int64_t pad = 0;
};
static_assert(sizeof(Header) == 64);

struct Options {
  std::string mode = "flat", compute = "benched", wait = "waitany";
  int subs = 4;
  long every = 1;
  long P = 1500000;
  long U = 0;  // 0: 10 per worker, at least 200
  double step = 0.25, jitter = 0.05, serve = 3e-4, fwd_serve = 1e-4;
  int shared = 1;
  int verbose = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode")
      o.mode = v;
    else if (k == "--subs")
      o.subs = std::atoi(v.c_str());
    else if (k == "--every")
      o.every = std::atol(v.c_str());
    else if (k == "--P")
      o.P = std::atol(v.c_str());
    else if (k == "--U")
      o.U = std::atol(v.c_str());
    else if (k == "--step")
      o.step = std::atof(v.c_str());
    else if (k == "--jitter")
      o.jitter = std::atof(v.c_str());
    else if (k == "--serve")
      o.serve = std::atof(v.c_str());
    else if (k == "--fwd-serve")
      o.fwd_serve = std::atof(v.c_str());
    else if (k == "--compute")
      o.compute = v;
    else if (k == "--shared")
      o.shared = std::atoi(v.c_str());
    else if (k == "--wait")
      o.wait = v;
    else if (k == "--verbose")
      o.verbose = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  return o;
}

/// Inject @p seconds of simulated time on this rank without executing anything.
void inject(const Options& o, double seconds) {
  if (seconds <= 0) return;
#ifdef SMPI_PROBE_SMPI
  if (o.compute == "benched")
    smpi_execute_benched(seconds);  // exactly `seconds` at this host's speed
  else if (o.compute == "flops")
    smpi_execute_flops(seconds * sg_host_get_speed(sg_host_self()));
  else if (o.compute == "execute")
    smpi_execute(seconds);  // scaled by smpi/host-speed / host speed
  else if (o.compute == "sleep")
    smpi_usleep(static_cast<useconds_t>(seconds * 1e6));
#else
  (void)o;
  (void)seconds;  // a real MPI build: nothing to inject (a real GPU would compute here)
#endif
}

/// Payload buffers: SMPI_SHARED_MALLOC keeps the memory of 1024 simulated ranks bounded (every
/// rank's buffer maps the same pages; contents are garbage, which this probe does not read).
float* alloc_payload(const Options& o, std::size_t n) {
#ifdef SMPI_PROBE_SMPI
  if (o.shared) return static_cast<float*>(SMPI_SHARED_MALLOC(n * sizeof(float)));
#endif
  (void)o;
  auto* p = static_cast<float*>(std::malloc(n * sizeof(float)));
  std::memset(p, 0, n * sizeof(float));
  return p;
}
void free_payload(const Options& o, float* p) {
#ifdef SMPI_PROBE_SMPI
  if (o.shared) {
    SMPI_SHARED_FREE(p);
    return;
  }
#endif
  (void)o;
  std::free(p);
}

// ------------------------------------------------------------------------------------ a child
/// A worker (or a sub-master towards the top): push header + payload, take header (+ payload).
bool exchange_up(int parent, Header& h, float* up, float* down, long P) {
  MPI_Send(&h, sizeof h, MPI_BYTE, parent, kTagHeader, MPI_COMM_WORLD);
  MPI_Send(up, static_cast<int>(P), MPI_FLOAT, parent, kTagPayload, MPI_COMM_WORLD);
  Header r;
  MPI_Recv(&r, sizeof r, MPI_BYTE, parent, kTagReply, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (r.kind == kStop) return false;
  MPI_Recv(down, static_cast<int>(P), MPI_FLOAT, parent, kTagReplyPayload, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  h.version = r.version;
  return true;
}

void run_worker(const Options& o, int rank, int parent) {
  float* up = alloc_payload(o, static_cast<std::size_t>(o.P));
  float* down = alloc_payload(o, static_cast<std::size_t>(o.P));
  std::mt19937_64 rng(0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  // The initial weights.
  Header r;
  MPI_Recv(&r, sizeof r, MPI_BYTE, parent, kTagReply, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Recv(down, static_cast<int>(o.P), MPI_FLOAT, parent, kTagReplyPayload, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  Header h;
  h.kind = kUpdate;
  h.version = r.version;
  for (;;) {
    inject(o, o.step * (1.0 + o.jitter * u(rng)));  // the GPU's training step
    h.samples += 1;
    h.updates = 1;
    if (!exchange_up(parent, h, up, down, o.P)) break;
  }
  free_payload(o, up);
  free_payload(o, down);
}

// ------------------------------------------------------------------------------------ a master
struct Stats {
  long applied = 0;  // worker updates applied (top: as reported by children)
  double t_start = 0, t_target = -1, t_end = 0, busy = 0;
  long served = 0;
};

/// Serve @p children round robin over one posted header receive each. @p on_update: called after
/// each applied update with the number of worker updates it carries; returns false to stop.
/// A sub-master's hook exchanges with the top master there.
template <class OnUpdate>
void serve(const Options& o, const std::vector<int>& children, float* inbuf, float* reply, OnUpdate&& on_update,
           double serve_s, Stats& st) {
  const std::size_t n = children.size();
  std::vector<Header> hdr(n);
  std::vector<MPI_Request> req(n, MPI_REQUEST_NULL);
  std::vector<char> stopped(n, 0);
  bool stopping = false;
  // Initial weights to everyone.
  for (std::size_t i = 0; i < n; ++i) {
    Header w;
    w.kind = kWeights;
    MPI_Send(&w, sizeof w, MPI_BYTE, children[i], kTagReply, MPI_COMM_WORLD);
    MPI_Send(reply, static_cast<int>(o.P), MPI_FLOAT, children[i], kTagReplyPayload, MPI_COMM_WORLD);
  }
  for (std::size_t i = 0; i < n; ++i)
    MPI_Irecv(&hdr[i], sizeof(Header), MPI_BYTE, children[i], kTagHeader, MPI_COMM_WORLD, &req[i]);
  std::size_t live = n, next = 0;
  std::vector<int> idx(n);
  std::vector<MPI_Status> sts(n);
  std::int64_t version = 0;
  while (live > 0) {
    int count = 0;
    if (o.wait == "waitany") {
      int k = MPI_UNDEFINED;
      MPI_Waitany(static_cast<int>(n), req.data(), &k, MPI_STATUS_IGNORE);
      if (k == MPI_UNDEFINED) break;
      idx[0] = k;
      count = 1;
    } else if (o.wait == "waitsome") {
      MPI_Waitsome(static_cast<int>(n), req.data(), &count, idx.data(), sts.data());
      if (count == MPI_UNDEFINED) break;
      std::sort(idx.begin(), idx.begin() + count, [&](int a, int b) {
        return (static_cast<std::size_t>(a) + n - next) % n < (static_cast<std::size_t>(b) + n - next) % n;
      });
    } else {  // testsome in a loop (mpigan's wait_some_quietly, without the sleeps)
      do {
        MPI_Testsome(static_cast<int>(n), req.data(), &count, idx.data(), sts.data());
      } while (count == 0);
      if (count == MPI_UNDEFINED) break;
      std::sort(idx.begin(), idx.begin() + count, [&](int a, int b) {
        return (static_cast<std::size_t>(a) + n - next) % n < (static_cast<std::size_t>(b) + n - next) % n;
      });
    }
    for (int c = 0; c < count; ++c) {
      const auto i = static_cast<std::size_t>(idx[c]);
      const double t0 = MPI_Wtime();
      MPI_Recv(inbuf, static_cast<int>(o.P), MPI_FLOAT, children[i], kTagPayload, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      Header out;
      if (!stopping) {
        inject(o, serve_s);  // the update rule on the master's core
        ++version;
        ++st.served;
        st.applied += hdr[i].updates;
        stopping = !on_update(hdr[i].updates, st);
      }
      if (stopping) {
        out.kind = kStop;
        MPI_Send(&out, sizeof out, MPI_BYTE, children[i], kTagReply, MPI_COMM_WORLD);
        stopped[i] = 1;
        --live;
      } else {
        out.kind = kWeights;
        out.version = version;
        MPI_Send(&out, sizeof out, MPI_BYTE, children[i], kTagReply, MPI_COMM_WORLD);
        MPI_Send(reply, static_cast<int>(o.P), MPI_FLOAT, children[i], kTagReplyPayload, MPI_COMM_WORLD);
        MPI_Irecv(&hdr[i], sizeof(Header), MPI_BYTE, children[i], kTagHeader, MPI_COMM_WORLD, &req[i]);
      }
      st.busy += MPI_Wtime() - t0;
      next = (i + 1) % n;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o = parse(argc, argv);
  const bool tree = o.mode == "tree";
  if (!tree) o.subs = 0;
  const int workers = size - 1 - o.subs;
  if (workers < 1 || (tree && workers < o.subs)) {
    if (rank == 0) std::fprintf(stderr, "need more ranks: %d ranks, %d sub-masters\n", size, o.subs);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (o.U <= 0) o.U = std::max(200L, 10L * workers);
  const auto parent_of = [&](int r) { return tree ? 1 + (r - o.subs - 1) % o.subs : 0; };

  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (rank == 0) {
    std::vector<int> children;
    if (tree)
      for (int s = 1; s <= o.subs; ++s) children.push_back(s);
    else
      for (int w = 1; w < size; ++w) children.push_back(w);
    float* in = alloc_payload(o, static_cast<std::size_t>(o.P));
    float* reply = alloc_payload(o, static_cast<std::size_t>(o.P));
    Stats st;
    st.t_start = t0;
    // Throughput is measured between the first 10% and the U-th update (start-up burst excluded).
    const long warm = std::max(1L, o.U / 10);
    double t_warm = -1;
    long applied_warm = 0;
    serve(
        o, children, in, reply,
        [&](long, Stats& s) {
          if (t_warm < 0 && s.applied >= warm) {
            t_warm = MPI_Wtime();
            applied_warm = s.applied;
          }
          if (s.applied >= o.U) {
            if (s.t_target < 0) s.t_target = MPI_Wtime();
            return false;
          }
          return true;
        },
        o.serve, st);
    const double t_end = MPI_Wtime();
    const double per_update = (st.t_target - t_warm) / static_cast<double>(st.applied - applied_warm);
    // One worker alone: its step plus one exchange (measured by the N=2 run; printed for reference).
    std::printf(
        "RESULT mode=%s ranks=%d workers=%d subs=%d every=%ld P=%ld U=%ld applied=%ld served=%ld step=%g serve=%g "
        "t_target=%.6f t_end=%.6f s_per_update=%.6e updates_per_s=%.3f master_busy_frac=%.3f\n",
        o.mode.c_str(), size, workers, o.subs, o.every, o.P, o.U, st.applied, st.served, o.step, o.serve,
        st.t_target - t0, t_end - t0, per_update, 1.0 / per_update, st.busy / (t_end - t0));
    std::fflush(stdout);
    free_payload(o, in);
    free_payload(o, reply);
  } else if (tree && rank <= o.subs) {
    std::vector<int> children;
    for (int w = o.subs + 1; w < size; ++w)
      if (parent_of(w) == rank) children.push_back(w);
    float* in = alloc_payload(o, static_cast<std::size_t>(o.P));
    float* reply = alloc_payload(o, static_cast<std::size_t>(o.P));
    float* up = alloc_payload(o, static_cast<std::size_t>(o.P));
    Stats st;
    // The initial weights from the top.
    Header r;
    MPI_Recv(&r, sizeof r, MPI_BYTE, 0, kTagReply, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(reply, static_cast<int>(o.P), MPI_FLOAT, 0, kTagReplyPayload, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    long since = 0, pending = 0;
    bool parent_stopped = false;
    serve(
        o, children, in, reply,
        [&](long n, Stats&) {
          if (parent_stopped) return false;
          pending += n;
          if (++since < o.every) return true;
          since = 0;
          Header h;
          h.kind = kUpdate;
          h.updates = pending;
          pending = 0;
          inject(o, o.fwd_serve);  // the change since the last pull (a vector difference)
          if (!exchange_up(0, h, up, reply, o.P)) {
            parent_stopped = true;
            return false;
          }
          return true;
        },
        o.serve, st);
    // If the children stopped first (cannot happen here: they stop only when we do), nothing more.
    free_payload(o, in);
    free_payload(o, reply);
    free_payload(o, up);
  } else {
    run_worker(o, rank, parent_of(rank));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
