// Test helpers (test_utils.hpp): backends or a visible skip, random tensors, tolerance checks.
#include "test_utils.hpp"

#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mpigan::test {

bool cuda_tf32_requested() {
  const char* v = std::getenv("MPIGAN_CUDA_TF32");
  return v && (std::string(v) == "1" || std::string(v) == "on" || std::string(v) == "true");
}

Tolerance library_tolerance(const Backend& be, Tolerance t, const Tensor& want) {
  if (be.name() != "cuda") return t;
  const double frac = cuda_tf32_requested() ? 5e-3 : 1e-4;
  double sq = 0.0;
  for (float v : want.values()) sq += static_cast<double>(v) * v;
  const double rms = want.numel() > 0 ? std::sqrt(sq / static_cast<double>(want.numel())) : 0.0;
  return {std::max(t.abs, frac * rms), std::max(t.rel, frac)};
}

std::unique_ptr<Backend> backend_or_skip(const std::string& name) {
  std::string why;
  if (!backend_available(name, &why)) {
    MESSAGE("SKIPPED: backend '" << name << "' cannot run here: " << why);
    return nullptr;
  }
  return make_backend(name);
}

Tensor random_tensor(const Shape& shape, Rng& rng, float lo, float hi) {
  Tensor t = Tensor::empty(shape);
  rng.fill_uniform(t.values(), lo, hi);
  return t;
}

std::vector<std::string>& made_temp_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("mpigan-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  auto& made = made_temp_dirs();
  if (std::find(made.begin(), made.end(), d.string()) == made.end()) made.push_back(d.string());
  return d.string();
}

Tensor host(Backend& backend, const Tensor& t) {
  return backend.to_host(t);
}

Tensor upload(Backend& backend, const Tensor& values, const TensorDesc& desc) {
  Tensor t = backend.allocate(desc);
  backend.from_host(values, t);
  return t;
}

namespace {
template <class Get>
void check_impl(const std::string& what, std::size_t n, Get&& get, Tolerance tol) {
  std::size_t bad = 0;
  double worst = 0.0;
  std::size_t worst_i = 0;
  std::string first;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [g, w] = get(i);
    const double err = std::abs(g - w);
    const double lim = tol.abs + tol.rel * std::abs(w);
    if (!(err <= lim)) {  // also catches NaN
      if (bad < 5) first += "\n    [" + std::to_string(i) + "] got " + std::to_string(g) + " want " + std::to_string(w);
      ++bad;
    }
    if (err > worst || std::isnan(err)) worst = err, worst_i = i;
  }
  INFO(what << ": " << bad << " of " << n << " values outside abs " << tol.abs << " + rel " << tol.rel
            << "; largest error " << worst << " at [" << worst_i << "]" << first);
  CHECK(bad == 0);
}
}  // namespace

void check_close(const std::string& what, const Tensor& got, const Tensor& want, Tolerance tol) {
  REQUIRE_MESSAGE(got.shape() == want.shape(),
                  what << ": shape " << got.shape().to_string() << " vs " << want.shape().to_string());
  const float* g = got.data();
  const float* w = want.data();
  check_impl(
      what, static_cast<std::size_t>(got.numel()),
      [&](std::size_t i) {
        return std::pair<double, double>{g[i], w[i]};
      },
      tol);
}

void check_close(const std::string& what, std::span<const double> got, std::span<const double> want, Tolerance tol) {
  REQUIRE(got.size() == want.size());
  check_impl(
      what, got.size(),
      [&](std::size_t i) {
        return std::pair<double, double>{got[i], want[i]};
      },
      tol);
}

void check_rel_l2(const std::string& what, const Tensor& got, const Tensor& want, double max_rel, double abs_rms) {
  REQUIRE_MESSAGE(got.shape() == want.shape(),
                  what << ": shape " << got.shape().to_string() << " vs " << want.shape().to_string());
  double num = 0.0, den = 0.0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double d = static_cast<double>(got.data()[i]) - want.data()[i];
    num += d * d;
    den += static_cast<double>(want.data()[i]) * want.data()[i];
  }
  const double err = std::sqrt(num), norm = std::sqrt(den);
  const double allowed = max_rel * norm + abs_rms * std::sqrt(static_cast<double>(got.numel()));
  INFO(what << ": L2 error " << err << " vs norm " << norm << " (relative " << (norm > 0 ? err / norm : 0.0)
            << "); allowed " << allowed);
  CHECK(err <= allowed);
}

}  // namespace mpigan::test
