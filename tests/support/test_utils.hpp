// Helpers shared by the test suites: random tensors, backend tags, and tolerance checks that
// print the parameters and the first mismatches (style: llm.c validate_result, ggml test-backend-ops).
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/core/tensor.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::test {

/// True in the AddressSanitizer build (scripts/sanitize.sh). Its purpose is memory and UB
/// checking of every code path; the few full-size numerical comparisons against the reference
/// backend, whose naive loops run ~10x slower there, use a smaller batch or one pass instead
/// (the ordinary build runs them whole).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// Sets (nullptr: unsets) an environment variable for a scope and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (m_old)
      ::setenv(m_name, m_old->c_str(), 1);
    else
      ::unsetenv(m_name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

/// The message of the @p E that @p f throws. The case fails, without stopping, and the result is
/// empty when @p f throws nothing or another exception (its message is shown), so a caller that
/// changed process state around @p f still restores it.
template <class E, class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("expected another exception type, got: " << e.what());
    return {};
  }
  FAIL_CHECK("expected an exception, nothing was thrown");
  return {};
}

/// Backend tags for TEST_CASE_TEMPLATE: every non-reference backend is compared with the reference.
struct CpuTag {
  static constexpr const char* name = "cpu";
};
struct CudaTag {
  static constexpr const char* name = "cuda";
};

/// The backend named by a tag, or nullptr (after a visible "SKIPPED" message) when it cannot run here.
std::unique_ptr<Backend> backend_or_skip(const std::string& name);

Tensor random_tensor(const Shape& shape, Rng& rng, float lo = -1.0f, float hi = 1.0f);
/// A fresh (emptied) directory under the system's temporary directory, named after @p name and
/// this process, so concurrent test runs do not collide. The suite's main removes it at the end
/// when every case passed (made_temp_dirs).
std::string temp_dir(const std::string& name);
/// The directories temp_dir made in this process, in order.
std::vector<std::string>& made_temp_dirs();

/// Host canonical copy of a tensor of @p backend.
Tensor host(Backend& backend, const Tensor& t);
/// A tensor of @p desc on @p backend holding the values of canonical host tensor @p values.
Tensor upload(Backend& backend, const Tensor& values, const TensorDesc& desc);

struct Tolerance {
  double abs = 1e-5;
  double rel = 1e-5;
};

/// Whether MPIGAN_CUDA_TF32 asks the cuda backend for TF32 tensor-core math (1, on, true).
bool cuda_tf32_requested();
/// @p t, widened on the cuda backend to what cuDNN and cuBLAS (convolutions, inner products) may
/// differ by: 1e-4 of rms(@p want) absolute plus 1e-4 relative in strict fp32, 5e-3 with TF32.
/// Other backends get @p t unchanged.
///
/// Why: outputs are sums of K products (K up to ~15000 forward, ~30000 for weight gradients);
/// recursive fp32 summation errs by about eps*sqrt(K) of the sums' scale (1.2e-7 * 177 = 2e-5),
/// and the FFT and Winograd algorithms that cudnnFind may pick lose up to one more digit: 1e-4 of
/// the RMS. TF32 rounds operands to 10 mantissa bits (2^-11 = 4.9e-4 relative per product);
/// random-sign sums keep that relative to the RMS, so 5e-3 leaves a 10x margin.
Tolerance library_tolerance(const Backend& be, Tolerance t, const Tensor& want);

/// CHECKs |got - want| <= abs + rel*|want| everywhere; on failure prints @p what, the number of
/// mismatches, the first ones with their flat index, and the largest error.
void check_close(const std::string& what, const Tensor& got, const Tensor& want, Tolerance tol);
void check_close(const std::string& what, std::span<const double> got, std::span<const double> want, Tolerance tol);
/// CHECKs ||got - want||_2 <= max_rel * ||want||_2 + abs_rms * sqrt(n) (for quantities whose
/// elements may legitimately jump, e.g. gradients behind a LeakyReLU whose input sits within
/// rounding of 0; abs_rms covers quantities that are 0 in exact arithmetic, like the gradient of a
/// bias followed by BatchNorm).
void check_rel_l2(const std::string& what, const Tensor& got, const Tensor& want, double max_rel,
                  double abs_rms = 1e-4);

}  // namespace mpigan::test

// Templated cases are named "<name><cpu>", "<name><cuda>": `-tc="*<cuda>"` runs one backend's.
TYPE_TO_STRING_AS("cpu", mpigan::test::CpuTag);
TYPE_TO_STRING_AS("cuda", mpigan::test::CudaTag);
