#include "mpigan/worker/protocol.hpp"

namespace mpigan::worker {

void send_header(const Comm& c, const Header& h, int dest, int tag) { c.send_bytes(&h, sizeof(Header), dest, tag); }

Header recv_header(const Comm& c, int source, int tag, double spin_s) {
  Header h;
  c.recv_bytes(&h, sizeof(Header), source, tag, spin_s);
  return h;
}

}  // namespace mpigan::worker
