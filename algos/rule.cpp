#include "mpigan/algos/rule.hpp"

#include <algorithm>

namespace mpigan::algos {

const char* to_string(WorkerMode m) { return m == WorkerMode::gradients ? "gradients" : "local"; }

const char* to_string(Payload p) {
  switch (p) {
    case Payload::gradient: return "gradient";
    case Payload::delta: return "delta";
    case Payload::weights: return "weights";
  }
  return "?";
}

void WorkerRule::after_reply(std::span<float> local, std::span<const float> reply, std::span<const float>) {
  std::copy(reply.begin(), reply.end(), local.begin());
}

void MasterRule::reply_after_round(int, std::span<float> reply) const {
  std::copy(weights().begin(), weights().end(), reply.begin());
}

void MasterRule::pull(int, std::span<float> out) { std::copy(weights().begin(), weights().end(), out.begin()); }

}  // namespace mpigan::algos
