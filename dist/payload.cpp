// The messages' header and payload layout (payload.hpp).
#include "mpigan/dist/payload.hpp"

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
  static constexpr std::array<const char*, 3> kNames{"generator update", "discriminator update", "BatchNorm state"};
  std::string out;
  for (std::size_t b = 0; b < sumsq.size(); ++b)
    if (!std::isfinite(sumsq[b])) out += (out.empty() ? "" : ", ") + std::string(kNames[b]);
  return out.empty() ? "none" : out;
}

}  // namespace mpigan::dist
