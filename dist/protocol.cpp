// Header messages between masters and their children (protocol.hpp).
#include "mpigan/dist/protocol.hpp"

#include <fmt/format.h>

#include <cmath>

namespace mpigan::dist {

std::string to_string(Kind k) {
  switch (k) {
    case Kind::update:
      return "update";
    case Kind::pull:
      return "pull";
    case Kind::done:
      return "done";
    case Kind::weights:
      return "weights";
    case Kind::stop:
      return "stop";
  }
  return fmt::format("unknown kind {}", static_cast<int>(k));
}

PayloadLayout PayloadLayout::of(const models::GanModel& m) {
  return {m.generator.weights().size(), m.discriminator.weights().size(), m.generator.state().size(),
          m.discriminator.state().size()};
}

std::string nonfinite_blocks(const std::array<double, 3>& sumsq) {
  static constexpr std::array<const char*, 3> names{"generator update", "discriminator update", "BatchNorm state"};
  std::string out;
  for (std::size_t b = 0; b < sumsq.size(); ++b)
    if (!std::isfinite(sumsq[b])) out += (out.empty() ? "" : ", ") + std::string(names[b]);
  return out.empty() ? "none" : out;
}

void send_header(const Comm& c, const Header& h, int dest, int tag, const Doorbell& bell) {
  c.send_bytes(&h, sizeof(Header), dest, tag);
  bell.ring();
}

Header recv_header(const Comm& c, int source, int tag, double spin_s, const Idle& idle) {
  Header h;
  c.recv_bytes(&h, sizeof(Header), source, tag, spin_s, idle);
  return h;
}

}  // namespace mpigan::dist
