// The master-worker protocol over MPI. Every message is a fixed header (dist/payload.hpp),
// optionally followed by one float payload (its layout: dist::PayloadLayout):
//
//   worker -> master   kUpdate  + payload (the update of both networks + the worker's BN state)
//                      kPull    (pull-then-push rules: asks for the current weights first)
//                      kDone    (its data is exhausted)
//   master -> worker   kWeights + payload (weights or the rule's reply + the canonical BN state)
//                      kStop    (training is over; no payload)
#pragma once

#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/dist/payload.hpp"

namespace mpigan::dist {

constexpr int kTagHeader = 101;
constexpr int kTagPayload = 102;
constexpr int kTagReply = 103;
constexpr int kTagReplyPayload = 104;

/// Send @p h to @p dest, then ring @p bell (the receiver's doorbell, when it shares this node).
void send_header(const Comm& c, const Header& h, int dest, int tag, const Doorbell& bell = {});
/// How long a worker polls without sleeping for the master's reply to its update (the master
/// usually answers within a millisecond; after this the wait backs off to sleeps).
inline constexpr double kReplySpinSeconds = 0.002;

/// Receive a header from @p source; @p idle: how to wait (PayloadChannels::from_parent()).
Header recv_header(const Comm& c, int source, int tag, double spin_s = 0.0, const Idle& idle = {});

}  // namespace mpigan::dist
