// A sub-master's link to its parent (the top master): it serves its own children with the update
// rule and, every topology.submaster_every of its versions, sends the change of its weights since
// it last pulled (and its BN state) as one update; the parent adds it (or averages it in rounds)
// and answers with its weights, which the sub-master continues from. When its children's data
// ends it tells the parent and waits for the stop.
//
// Checkpoint part (RUN_DIR/checkpoints/step-N.submaster-R.h5): its weights, BN state, the
// weights it last pulled, its rules' state, its version, the parent's version, whether its
// change since that pull is still its own (the parent stopped without applying it, or never saw
// it), its samples and those the parent has counted. Resumed, it rebases that change onto the
// parent's weights and pushes it with the samples behind it: nothing is lost, and nothing the
// parent already applied is applied or counted twice (a synchronous tree resumes bit for bit).
#pragma once

#include "mpigan/dist/launch.hpp"
#include "mpigan/master/parent_change.hpp"
#include "mpigan/master/update_service.hpp"

#include <cstdint>
#include <vector>

namespace mpigan::master {

class ParentLink {
 public:
  ParentLink(dist::RoleContext& ctx, UpdateService& service);

  /// What the parent said.
  struct Reply {
    bool stop = false;
    std::int64_t checkpoint = -1;  ///< the parent's checkpoint whose part was written (-1: none)
  };
  /// The parent's initial weights (a fresh start adopts them; a resume rebases its own change).
  Reply receive_initial();
  /// Push the change since the last pull; take the parent's weights (or its stop).
  Reply exchange();
  /// Every child's data ended: tell the parent and wait for its stop.
  Reply done();
  /// A child's update was applied or held: its losses go up with the next exchange.
  void note_losses(const dist::Header& child) { m_change.note_losses(child); }

  void write_part(std::int64_t id);
  void load_part(std::int64_t id);

 private:
  Reply take_parent_weights(const dist::Header& h, std::span<const float> buf);
  Reply take_stop(const dist::Header& h, bool unapplied);

  dist::RoleContext& m_ctx;
  UpdateService& m_service;
  ParentChange m_change;
  bool m_unapplied = false;  ///< the change since the last take is not in the parent's weights
  bool m_resumed = false;
  std::vector<float> m_buf;
};

}  // namespace mpigan::master
