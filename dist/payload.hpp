// The master-worker messages without their transport: the header every message carries and the
// layout of the payload that may follow (dist/protocol.hpp sends them over MPI). MPI-free, so
// that the update service, the rules and the sandbox use them without MPI.
//
// The payload holds, in this order: the generator's block, the discriminator's block, the
// generator's BatchNorm state, the discriminator's BatchNorm state (so a push, a pull or a
// broadcast is one contiguous message). Headers carry the versions (staleness), sample counts,
// the worker's data position (for resuming), the losses of its last step, its compute and wait
// times, checkpoint flags and, with an update, the sums of squares of its blocks (norms and
// finiteness).
#pragma once

#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace mpigan::dist {

enum class Kind : std::int32_t { update = 1, pull = 2, done = 3, weights = 10, stop = 11 };
/// The kind's name for messages ("update", "pull", ...; "unknown kind 7" otherwise).
std::string to_string(Kind k);

constexpr int kMaxLosses = 16;
constexpr std::int32_t kFlagCheckpoint = 1;  ///< master -> worker: write your part of checkpoint `checkpoint`
/// master -> sub-master, with a stop: the update this answers was not applied (training had ended),
/// so the sub-master's change since its last pull is still its own (it keeps it for a resume).
constexpr std::int32_t kFlagNotApplied = 2;

struct Header {
  Kind kind = Kind::update;
  std::int32_t child = -1;             ///< sender's id at its master (worker -> master)
  std::int64_t version = 0;            ///< worker: master version its weights came from; master: version now
  std::int64_t samples = 0;            ///< samples behind this update
  std::int64_t steps = 0;              ///< the worker's training steps so far
  std::int64_t epoch = 0, cursor = 0;  ///< the worker's data position after this update
  std::int32_t flags = 0;
  std::int32_t n_losses = 0;
  std::int64_t checkpoint = -1;  ///< master: checkpoint id to write; worker: last checkpoint id written
  double compute_s = 0;          ///< worker: seconds computing this update
  double wait_s = 0;             ///< worker: seconds waiting for the previous reply
  /// Update headers: the sums of squares (in double) of the payload's G block, D block and
  /// BatchNorm state, computed by the sender in the pass that copies the payload out
  /// (push_payload). The master takes the update's norms and finiteness from them, so it does not
  /// read the update an extra time: a NaN or an infinity makes its block's sum non-finite.
  std::array<double, 3> sumsq{};
  /// Update headers: per network, how much of the BatchNorm state the sender was last given is
  /// left in the state it sends (nn::Network::state_decay: momentum^k after k updates of the
  /// running statistics). The master merges the state with it (master/update_service.hpp).
  std::array<double, 2> state_decay{1.0, 1.0};
  std::array<double, kMaxLosses> losses{};
  /// Master replies: the learning-rate schedule's factor now (optimizer.schedule), for the rates
  /// the receiver applies (a worker's local optimizer and rule, a sub-master's rule).
  double lr_factor = 1.0;
};

/// Sizes of the four payload blocks. Network n (models::Net: 0 generator, 1 discriminator) has
/// a block of weights (or its update) and a block of BatchNorm state.
struct PayloadLayout {
  std::size_t g = 0, d = 0, g_state = 0, d_state = 0;
  /// The layout of @p m's networks.
  static PayloadLayout of(const models::GanModel& m);
  std::size_t total() const { return g + d + g_state + d_state; }
  std::size_t weights(models::Net n) const { return n == models::Net::generator ? g : d; }
  std::size_t state(models::Net n) const { return n == models::Net::generator ? g_state : d_state; }
  /// Network n's weight block, and its BatchNorm state block.
  template <class T>
  std::span<T> block(models::Net n, std::span<T> p) const {
    return n == models::Net::generator ? p.subspan(0, g) : p.subspan(g, d);
  }
  template <class T>
  std::span<T> state_block(models::Net n, std::span<T> p) const {
    return n == models::Net::generator ? p.subspan(g + d, g_state) : p.subspan(g + d + g_state, d_state);
  }
  /// Network n's part of a state vector that holds both networks' state (all_state of a payload).
  template <class T>
  std::span<T> in_state(models::Net n, std::span<T> state) const {
    return n == models::Net::generator ? state.subspan(0, g_state) : state.subspan(g_state, d_state);
  }
  /// Both networks' weight blocks, and both state blocks (each contiguous).
  template <class T>
  std::span<T> all_weights(std::span<T> p) const {
    return p.subspan(0, g + d);
  }
  template <class T>
  std::span<T> all_state(std::span<T> p) const {
    return p.subspan(g + d, g_state + d_state);
  }
};

/// Both networks, in payload order: `for (models::Net n : kNets)`.
inline constexpr std::array<models::Net, 2> kNets{models::Net::generator, models::Net::discriminator};
inline constexpr std::size_t index(models::Net n) {
  return static_cast<std::size_t>(n);
}

/// The blocks whose sum of squares in @p sumsq (Header::sumsq) is not finite: "generator
/// update, BatchNorm state"; "none" when all are finite.
std::string nonfinite_blocks(const std::array<double, 3>& sumsq);

}  // namespace mpigan::dist
