#include "mpigan/algos/rule.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include <algorithm>

namespace mpigan::algos {

const char* to_string(WorkerMode m) {
  return m == WorkerMode::gradients ? "gradients" : "local";
}

const char* to_string(Payload p) {
  switch (p) {
    case Payload::gradient:
      return "gradient";
    case Payload::delta:
      return "delta";
    case Payload::weights:
      return "weights";
  }
  return "?";
}

void WorkerRule::after_reply(std::span<float> local, std::span<const float> reply, std::span<const float>) {
  std::copy(reply.begin(), reply.end(), local.begin());
}

void MasterRule::reply_after_round(int, std::span<float> reply) const {
  MPIGAN_CHECK(reply.size() == weights().size(), "reply of {} values for {} weights", reply.size(), weights().size());
  cpu::stream_copy_range(weights().data(), reply.data(), reply.size());
}

void MasterRule::pull(int, std::span<float> out) {
  MPIGAN_CHECK(out.size() == weights().size(), "pull into {} values for {} weights", out.size(), weights().size());
  cpu::stream_copy_range(weights().data(), out.data(), out.size());
}

void sum_scaled(std::span<const std::span<const float>> parts, float scale, std::span<float> out) {
  MPIGAN_CHECK(!parts.empty(), "sum_scaled: no parts");
  for (const auto& p : parts)
    MPIGAN_CHECK(p.size() == out.size(), "sum_scaled: a part of {} values for an output of {}", p.size(), out.size());
  const std::size_t n = out.size(), k = parts.size();
  float* o = out.data();
  const float* a = parts[0].data();
  if (k == 1) {
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) o[i] = scale * a[i];
    return;
  }
  // (p0 + p1) first, then each further part; the scale goes with the last addition.
  const float* b = parts[1].data();
  if (k == 2) {
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) o[i] = scale * (a[i] + b[i]);
    return;
  }
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
  for (std::size_t p = 2; p + 1 < k; ++p) {
    const float* c = parts[p].data();
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) o[i] += c[i];
  }
  const float* last = parts[k - 1].data();
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) o[i] = scale * (o[i] + last[i]);
}

}  // namespace mpigan::algos
