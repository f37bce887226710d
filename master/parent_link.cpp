// A sub-master's exchanges with its parent, and its checkpoint part (parent_link.hpp).
#include "mpigan/master/parent_link.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/dist/run_files.hpp"

namespace mpigan::master {

using dist::Header;
using dist::Kind;
using dist::kNets;
using models::Net;

namespace {
const char* net_name(Net n) {
  return n == Net::generator ? "generator" : "discriminator";
}
}  // namespace

ParentLink::ParentLink(dist::RoleContext& ctx, UpdateService& service)
    : m_ctx(ctx), m_service(service), m_change(service), m_buf(service.layout().total()) {}

ParentLink::Reply ParentLink::receive_initial() {
  const auto& t = m_ctx.topology;
  const Header h = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, m_ctx.channels.from_parent());
  MPIGAN_CHECK(h.kind == Kind::weights, "expected the initial weights from the master (rank {}), got a '{}' message",
               t.parent, dist::to_string(h.kind));
  dist::pull_payload(t.links, m_ctx.channels, t.parent, m_buf);
  m_service.set_lr_factor(h.lr_factor);
  if (!m_resumed || !m_unapplied) return take_parent_weights(h, m_buf);
  // Resumed with a change the parent never applied: keep it, on top of the parent's weights.
  m_change.rebase(m_service, m_buf, h.version);
  spdlog::info("resumed with its change since version {} of the parent still to push", h.version);
  return {};
}

ParentLink::Reply ParentLink::take_parent_weights(const Header& h, std::span<const float> buf) {
  m_service.set_lr_factor(h.lr_factor);  // the parent's schedule, for this master's rule and its replies
  m_change.adopt(m_service, buf, h.version);
  m_unapplied = false;
  if (!(h.flags & dist::kFlagCheckpoint)) return {};
  // The top master's checkpoint: write this sub-master's part and pass the request on.
  write_part(h.checkpoint);
  return {false, h.checkpoint};
}

ParentLink::Reply ParentLink::take_stop(const Header& h, bool unapplied) {
  m_unapplied = unapplied;
  Reply r{true, -1};
  if (h.flags & dist::kFlagCheckpoint) {
    write_part(h.checkpoint);
    r.checkpoint = h.checkpoint;
  }
  return r;
}

ParentLink::Reply ParentLink::exchange() {
  auto span = m_ctx.trace.span("parent_exchange", "comm");
  const auto& t = m_ctx.topology;
  std::span<float> buf(m_buf);
  Header h;
  h.state_decay = m_change.build(m_service, buf);
  h.kind = Kind::update;
  h.child = t.child_id;
  h.version = m_change.parent_version();
  h.samples = m_change.push_samples(m_service);
  m_change.put_losses(h);
  dist::push_payload(t.links, m_ctx.channels, h, t.parent, buf, m_service.layout());
  const Header r =
      dist::recv_header(t.links, t.parent, dist::kTagReply, dist::kReplySpinSeconds, m_ctx.channels.from_parent());
  if (r.kind == Kind::stop) {
    const bool unapplied = (r.flags & dist::kFlagNotApplied) != 0;
    if (unapplied) m_change.unpush_samples();
    return take_stop(r, unapplied);
  }
  dist::pull_payload(t.links, m_ctx.channels, t.parent, buf);
  return take_parent_weights(r, buf);
}

ParentLink::Reply ParentLink::done() {
  const auto& t = m_ctx.topology;
  Header h;
  h.kind = Kind::done;
  h.child = t.child_id;
  h.version = m_change.parent_version();
  dist::send_header(t.links, h, t.parent, dist::kTagHeader, m_ctx.channels.to_parent());
  const Header r = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, m_ctx.channels.from_parent());
  MPIGAN_CHECK(r.kind == Kind::stop, "expected 'stop' from the master after 'done', got a '{}' message",
               dist::to_string(r.kind));
  // Versions since the last push never reached the parent.
  return take_stop(r, true);
}

void ParentLink::write_part(std::int64_t id) {
  train::CheckpointWriter w(dist::checkpoint_part_path(m_ctx.run_dir, id, dist::submaster_part(m_ctx.topology.rank)));
  m_service.save(w);
  for (Net n : kNets) w.put(fmt::format("pulled/{}", net_name(n)), m_change.pulled(n));
  w.put_int("progress/parent_version", m_change.parent_version());
  w.put_int("progress/unapplied", m_unapplied ? 1 : 0);
  w.put_int("progress/samples", m_service.samples());
  w.put_int("progress/samples_at_push", m_change.samples_at_push());
  w.commit();
}

void ParentLink::load_part(std::int64_t id) {
  const std::string path = dist::checkpoint_part_path(m_ctx.run_dir, id, dist::submaster_part(m_ctx.topology.rank));
  train::CheckpointReader r(path);
  m_service.load(r, path);
  for (Net n : kNets) {
    auto p = r.floats(fmt::format("pulled/{}", net_name(n)));
    MPIGAN_CHECK(p.size() == m_service.weights(n).size(), "checkpoint '{}': pulled/{} has {} values, the model {}",
                 path, net_name(n), p.size(), m_service.weights(n).size());
    m_change.pulled(n) = std::move(p);
  }
  // Parts written before the samples were kept restart the count (the parent's total then misses
  // the samples of a change it had not applied).
  const bool counted = r.has("progress/samples");
  m_service.set_samples(counted ? r.get_int("progress/samples") : 0);
  m_change.restore(r.get_int("progress/parent_version"), counted ? r.get_int("progress/samples_at_push") : 0);
  m_unapplied = r.get_int("progress/unapplied") != 0;
  m_resumed = true;
  spdlog::info("resumed from {} at version {}", path, m_service.version());
}

}  // namespace mpigan::master
