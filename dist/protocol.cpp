// Header messages between masters and their children (protocol.hpp).
#include "mpigan/dist/protocol.hpp"

namespace mpigan::dist {

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
