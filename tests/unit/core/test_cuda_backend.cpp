// What only the CUDA backend has: its internals (plans, device math, the NCCL wrapper) and its
// device-specific behaviour. Every op against the reference backend is in test_ops.cpp, whose
// backend-templated cases cover the cuda backend (CudaTag) with the 3DGAN shapes.
//
// Two kinds of tests, all in doctest suite "cuda" (run them alone with `mpigan_test_core -ts=cuda`):
//  - host checks, which run wherever the backend is compiled, GPU or not: the Philox port used
//    by dropout, the decomposition of asymmetric padding that the conv op hands to cuDNN, and the
//    element formulas / index maps that the kernels share with the host (device_math.hpp),
//    executed over every index on the host and compared with the reference;
//  - GPU checks (memory and device choice, conv re-planning, NCCL); when no GPU is visible
//    (cuda_device_count() == 0) each prints "SKIPPED: no GPU" and returns.
//
// Tolerances of the host checks are |got - want| <= abs_frac * rms(want) + rel * |want|, element
// by element; the absolute part scales with the tensor's RMS because fp32 summation errors scale
// with the magnitude of the sums, not of each element. Each tolerance says why it is what it is.
// On failure the first mismatches are printed with their multi-index.
#include <doctest/doctest.h>

#if MPIGAN_HAVE_CUDA

#include "test_utils.hpp"

#include "mpigan/backend/cuda/conv3d_graph.hpp"
#include "mpigan/backend/cuda/conv3d_plan.hpp"
#include "mpigan/backend/cuda/cuda_backend.hpp"
#include "mpigan/backend/cuda/cuda_context.hpp"
#include "mpigan/backend/cuda/device_math.hpp"
#include "mpigan/backend/cuda/nccl_comm.hpp"
#include "mpigan/backend/reference/kernels.hpp"
#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace mpigan;

// ----------------------------------------------------------------------------------------------
// Helpers

bool gpu_present() {
  return cuda_device_count() > 0;
}

#define MPIGAN_REQUIRE_GPU()                                 \
  do {                                                       \
    if (!gpu_present()) {                                    \
      MESSAGE("SKIPPED: no GPU (cuda_device_count() == 0)"); \
      return;                                                \
    }                                                        \
  } while (0)

struct Tol {
  double abs_frac = 0.0;  ///< times rms(want)
  double rel = 0.0;       ///< times |want|
};

const Tol kExact{0.0, 0.0};
// Batch norm: statistics in double on both sides, then a few fp32 operations per element
// ((x - mean) * scale + shift, and the backward's a*(dy - b - (x - mean)*k)) on values of order
// 1-10: a few ulp of 10 relative to outputs of order 1, i.e. ~1e-6; 1e-5 leaves a margin.
const Tol kBatchNorm{1e-5, 1e-5};

std::string index_string(const Shape& shape, std::size_t flat) {
  std::string s = "(";
  std::size_t rest = flat;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(shape.rank()));
  for (int i = shape.rank() - 1; i >= 0; --i) {
    const auto extent = static_cast<std::size_t>(shape[i]);
    idx[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(rest % extent);
    rest /= extent;
  }
  for (std::size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
  return s + ")";
}

/// Compares element by element; prints the first mismatches (index, got, want) and a summary.
bool close(const std::string& what, const Tensor& got, const Tensor& want, Tol tol) {
  REQUIRE(got.shape() == want.shape());
  const auto g = got.values();
  const auto w = want.values();
  double sq = 0.0;
  for (float v : w) sq += static_cast<double>(v) * v;
  const double rms = w.empty() ? 0.0 : std::sqrt(sq / static_cast<double>(w.size()));
  std::size_t bad = 0;
  double worst = 0.0;
  std::string report;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double want_i = w[i], got_i = g[i];
    const double err = std::abs(got_i - want_i);
    const double allowed = tol.abs_frac * rms + tol.rel * std::abs(want_i);
    const bool ok = std::isfinite(got_i) == std::isfinite(want_i) && (err <= allowed || (got_i == want_i));
    if (std::isfinite(err)) worst = std::max(worst, err);
    if (!ok) {
      if (bad < 8)
        report += fmt::format("\n  at {} (flat {}): got {:.9g}, want {:.9g}, |err| {:.3g} > allowed {:.3g}",
                              index_string(want.shape(), i), i, got_i, want_i, err, allowed);
      ++bad;
    }
  }
  if (bad > 0)
    MESSAGE(fmt::format("{}: {} of {} elements out of tolerance (abs {} x rms {:.4g} + rel {}); max |err| {:.3g}{}",
                        what, bad, w.size(), tol.abs_frac, rms, tol.rel, worst, report));
  return bad == 0;
}

Tensor random_host(const Shape& shape, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  rng.fill_uniform(t.values(), lo, hi);
  return t;
}

Tensor to_gpu(Backend& gpu, const Tensor& host) {
  Tensor t = gpu.allocate(host.shape());
  gpu.from_host(host, t);
  return t;
}

/// A GPU tensor filled with NaN, to prove that an op overwrites every element.
Tensor nan_gpu(Backend& gpu, const Shape& shape) {
  Tensor t = gpu.allocate(shape);
  gpu.fill(t, std::numeric_limits<float>::quiet_NaN());
  return t;
}

struct Pair {
  std::unique_ptr<Backend> ref = make_backend("reference");
  std::unique_ptr<Backend> gpu = make_backend("cuda");
};

// ----------------------------------------------------------------------------------------------
// The 3DGAN convolutions, batch 2, plus a strided asymmetric case.

struct ConvCase {
  const char* name;
  Conv3dDesc desc;
  Shape src;
};

Conv3dDesc conv(std::int64_t ic, std::int64_t oc, Dims3 k, Dims3 pad_l, Dims3 pad_r, Dims3 stride = {1, 1, 1},
                bool bias = true) {
  Conv3dDesc d;
  d.ic = ic, d.oc = oc, d.kernel = k, d.pad_l = pad_l, d.pad_r = pad_r, d.stride = stride, d.bias = bias;
  return d;
}

std::vector<ConvCase> conv_cases() {
  return {
      {"D conv 1->32 k5 'same' on 25^3", conv(1, 32, {5, 5, 5}, {2, 2, 2}, {2, 2, 2}), {2, 1, 25, 25, 25}},
      {"G conv 8->64 k(6,6,8) 'same' on 7x7x8 (pad_l (2,2,3), pad_r (3,3,4))",
       conv(8, 64, {6, 6, 8}, {2, 2, 3}, {3, 3, 4}),
       {2, 8, 7, 7, 8}},
      {"G conv 64->6 k(6,5,8) after ZeroPadding3D((2,2,0)) on 14x14x16",
       conv(64, 6, {6, 5, 8}, {2, 2, 0}, {2, 2, 0}),
       {2, 64, 14, 14, 16}},
      {"D conv 32->8 k5 pad 2 on 25^3", conv(32, 8, {5, 5, 5}, {2, 2, 2}, {2, 2, 2}), {2, 32, 25, 25, 25}},
      {"strided, asymmetric both ways, no bias",
       conv(3, 4, {3, 4, 2}, {1, 1, 0}, {0, 2, 1}, {2, 1, 2}, false),
       {2, 3, 9, 8, 7}},
  };
}

/// The weight (and bias) gradients of @p gpu_op against @p ref_op for @p c, on @p src and @p dy:
/// both accumulate onto the same random non-zero start, as the ops' contract says.
void check_weight_gradients(Backend& gpu, Conv3dOp& ref_op, Conv3dOp& gpu_op, const ConvCase& c, const Shape& out,
                            const Tensor& src, const Tensor& dy, Rng& rng) {
  const Tensor dw0 = random_host(c.desc.weights_shape(), rng), db0 = random_host({c.desc.oc}, rng);
  Tensor want = dw0.clone(), want_b = c.desc.bias ? db0.clone() : Tensor();
  ref_op.backward_weights(src, dy, want, want_b);
  Tensor g_dw = to_gpu(gpu, dw0), g_db = c.desc.bias ? to_gpu(gpu, db0) : Tensor();
  gpu_op.backward_weights(to_gpu(gpu, src), to_gpu(gpu, dy), g_dw, g_db);
  // each weight sums over the batch and the output's extent
  const double terms = static_cast<double>(out.numel() / out[1]);
  const test::Tolerance sums{std::min(1e-2, 2e-7 * terms), 1e-4};
  test::check_close("backward weights", gpu.to_host(g_dw), want, test::library_tolerance(gpu, sums, want));
  if (c.desc.bias)
    test::check_close("backward bias", gpu.to_host(g_db), want_b, test::library_tolerance(gpu, sums, want_b));
}

TEST_SUITE_BEGIN("cuda");

// ----------------------------------------------------------------------------------------------
// Host checks (no GPU needed)

TEST_CASE("cuda: device count and backend availability never throw") {
  int n = -1;
  CHECK_NOTHROW(n = cuda_device_count());
  CHECK(n >= 0);
  std::string why;
  CHECK(backend_available("cuda", &why) == (n > 0));
  if (n == 0) {
    MESSAGE("no GPU here: backend_available says: " << why);
    // Creating the backend must fail with an Error that says why, not abort.
    CHECK_THROWS_AS(make_backend("cuda"), Error);
  }
}

TEST_CASE("cuda: the Philox port is bit-identical to core/rng.cpp") {
  const std::uint64_t seeds[] = {0, 1, 42, 0xDEADBEEFCAFEF00Dull, ~0ull};
  const std::uint64_t streams[] = {0, 7, 0x123456789ull, ~0ull};
  const std::uint64_t blocks[] = {0, 1, 2, 1000, 0xFFFFFFFFull, 0x100000000ull, ~0ull / 4};
  for (auto seed : seeds)
    for (auto stream : streams)
      for (auto block : blocks) {
        const auto mine = cuda::philox_block(seed, stream, block);
        for (int k = 0; k < 4; ++k) {
          const std::uint32_t want = philox_word(seed, stream, block * 4 + static_cast<std::uint64_t>(k));
          REQUIRE_MESSAGE(mine.v[k] == want, "seed " << seed << " stream " << stream << " block " << block);
        }
      }
  Rng rng(3, 4);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t x = rng.next_u32();
    REQUIRE(cuda::unit_float(x) == u32_to_unit_float(x));
  }
}

TEST_CASE("cuda: dropout emulated with the kernel's functions equals the reference mask") {
  auto ref = make_backend("reference");
  Rng rng(11);
  const std::size_t n = 1001;  // not a multiple of 32: the kernel's partial last mask word
  Tensor src = random_host({static_cast<std::int64_t>(n)}, rng);
  Tensor mask = Tensor::empty({static_cast<std::int64_t>(dropout_mask_floats(n))});
  for (float rate : {0.0f, 0.2f, 0.5f, 0.9f}) {
    Tensor want = Tensor::empty(src.shape());
    ref->dropout(src, want, rate, 1234, 56, mask);
    Tensor got = Tensor::empty(src.shape());
    const float keep = 1.0f / (1.0f - rate);
    for (std::size_t b = 0; b < (n + 7) / 8; ++b) {
      const auto words = cuda::philox_block(1234, 56, b);
      for (std::size_t k = 0; k < 8 && 8 * b + k < n; ++k) {
        const std::size_t i = 8 * b + k;
        got.data()[i] = cuda::dropout_keep(words.v[k / 2], i, rate) ? src.data()[i] * keep : 0.0f;
      }
    }
    CHECK(close(fmt::format("dropout rate {}", rate), got, want, kExact));
  }
}

TEST_CASE("cuda: asymmetric padding = explicit zeros + symmetric cuDNN padding (host, bit-exact)") {
  Rng rng(21);
  for (const auto& c : conv_cases()) {
    const std::string case_name = c.name;  // by value: doctest prints a const char* as its address
    CAPTURE(case_name);
    const auto plan = cuda::plan_conv_padding(c.desc, c.src);
    const Conv3dDesc sym = plan.cudnn_desc(c.desc);
    CHECK(sym.output_shape(plan.padded_src) == c.desc.output_shape(c.src));
    for (int i = 0; i < 3; ++i) {
      CHECK(plan.sym[i] + plan.extra_l[i] == c.desc.pad_l[i]);
      CHECK(plan.sym[i] + plan.extra_r[i] == c.desc.pad_r[i]);
      CHECK((plan.extra_l[i] == 0 || plan.extra_r[i] == 0));
    }
    if (!plan.explicit_padding) {
      CHECK(plan.padded_src == c.src);
      continue;
    }
    const Shape dst_shape = c.desc.output_shape(c.src);
    Tensor src = random_host(c.src, rng), w = random_host(c.desc.weights_shape(), rng),
           b = random_host({c.desc.oc}, rng), dy = random_host(dst_shape, rng);
    const float* bias = c.desc.bias ? b.data() : nullptr;
    const auto g = plan.pad_geometry();
    Tensor padded = Tensor::empty(plan.padded_src);
    for (std::int64_t i = 0; i < g.padded_numel(); ++i) padded.data()[i] = cuda::pad_element(g, src.data(), i);

    Tensor want = Tensor::empty(dst_shape), got = Tensor::empty(dst_shape);
    ref::conv3d_forward(c.desc, c.src, src.data(), w.data(), bias, want.data());
    ref::conv3d_forward(sym, plan.padded_src, padded.data(), w.data(), bias, got.data());
    CHECK(close("forward", got, want, kExact));

    Tensor dx_want = Tensor::empty(c.src), dx_padded = Tensor::empty(plan.padded_src), dx_got = Tensor::empty(c.src);
    ref::conv3d_backward_data(c.desc, c.src, dy.data(), w.data(), dx_want.data());
    ref::conv3d_backward_data(sym, plan.padded_src, dy.data(), w.data(), dx_padded.data());
    for (std::int64_t i = 0; i < g.src_numel(); ++i) dx_got.data()[i] = dx_padded.data()[cuda::crop_source_index(g, i)];
    CHECK(close("backward data (crop)", dx_got, dx_want, kExact));

    Tensor dw_want = Tensor::zeros(c.desc.weights_shape()), dw_got = Tensor::zeros(c.desc.weights_shape());
    ref::conv3d_backward_weights<float>(c.desc, c.src, src.data(), dy.data(), dw_want.data(), nullptr);
    ref::conv3d_backward_weights<float>(sym, plan.padded_src, padded.data(), dy.data(), dw_got.data(), nullptr);
    CHECK(close("backward weights (padded src)", dw_got, dw_want, kExact));
  }
}

TEST_CASE("cuda: settings from the environment: defaults, named choices, and every allowed value on a bad one (host)") {
  const test::ScopedEnv algo("MPIGAN_CUDA_CONV_ALGO", nullptr), wgrad("MPIGAN_CUDA_WGRAD", nullptr);
  const cuda::Settings defaults = cuda::Settings::from_env();
  CHECK(defaults.conv_algo == cuda::Settings::ConvAlgo::find);
  CHECK(defaults.wgrad == cuda::Settings::Wgrad::measured);
  CHECK(defaults.to_string().find("conv algorithms find, weight gradients measured") != std::string::npos);
  {
    const test::ScopedEnv a("MPIGAN_CUDA_CONV_ALGO", "heuristic"), w("MPIGAN_CUDA_WGRAD", "forward");
    const cuda::Settings s = cuda::Settings::from_env();
    CHECK(s.conv_algo == cuda::Settings::ConvAlgo::heuristic);
    CHECK(s.wgrad == cuda::Settings::Wgrad::forward);
    CHECK(s.to_string().find("conv algorithms heuristic, weight gradients forward") != std::string::npos);
  }
  {
    const test::ScopedEnv w("MPIGAN_CUDA_WGRAD", "legacy");
    CHECK(cuda::Settings::from_env().wgrad == cuda::Settings::Wgrad::legacy);
  }
  {
    const test::ScopedEnv w("MPIGAN_CUDA_WGRAD", "fft");
    CHECK_THROWS_WITH_AS(cuda::Settings::from_env(),
                         doctest::Contains("MPIGAN_CUDA_WGRAD='fft': allowed are 'measured' (the faster of cuDNN's "
                                           "weight-gradient algorithms and a forward convolution of the transposed "
                                           "problem), 'legacy' (cuDNN's weight-gradient algorithms only) and "
                                           "'forward' (the forward convolution wherever the stride is 1)"),
                         Error);
  }
  {
    const test::ScopedEnv l("MPIGAN_CUDA_BF16_LAYOUT", nullptr);
    CHECK(cuda::Settings::from_env().bf16_channels_last);
  }
  {
    const test::ScopedEnv l("MPIGAN_CUDA_BF16_LAYOUT", "channels_first");
    CHECK_FALSE(cuda::Settings::from_env().bf16_channels_last);
  }
  {
    const test::ScopedEnv l("MPIGAN_CUDA_BF16_LAYOUT", "nhwc");
    CHECK_THROWS_WITH_AS(cuda::Settings::from_env(),
                         doctest::Contains("MPIGAN_CUDA_BF16_LAYOUT='nhwc': allowed are 'channels_last' (bf16 "
                                           "copies of the convolutions' operands in NDHWC) and 'channels_first' "
                                           "(bf16 copies in NCDHW, the op's own layout)"),
                         Error);
  }
  const test::ScopedEnv a("MPIGAN_CUDA_CONV_ALGO", "fastest");
  CHECK_THROWS_WITH_AS(cuda::Settings::from_env(),
                       doctest::Contains("MPIGAN_CUDA_CONV_ALGO='fastest': allowed are 'find' (benchmark the cuDNN "
                                         "algorithms once per shape) and 'heuristic' (cuDNN's heuristics, no "
                                         "benchmarking)"),
                       Error);
}

TEST_CASE("cuda: the graph API's engine filter, strides and alignment (host)") {
  const std::size_t limit = std::size_t{64} << 20;
  const cuda::EngineNotes plain{}, tc{.tensor_core = true}, fp16{.tensor_core = true, .down_convert = true},
      half_sum{.reduced_reduction = true}, atomics{.nondeterministic = true},
      rtc{.tensor_core = true, .runtime_compiled = true};
  // strict fp32: only engines that compute in fp32 on the FMA units
  CHECK_FALSE(cuda::engine_refusal(plain, 0, false, false, limit));
  CHECK(cuda::engine_refusal(tc, 0, false, false, limit) == "tensor cores (TF32) in strict fp32");
  // TF32 allows tensor cores, never inputs converted to fp16/bf16 or a reduction in less than fp32
  CHECK_FALSE(cuda::engine_refusal(tc, 0, true, false, limit));
  CHECK(cuda::engine_refusal(fp16, 0, true, false, limit) == "converts the inputs to a narrower type");
  CHECK(cuda::engine_refusal(half_sum, 0, true, false, limit) == "reduces in less than fp32");
  CHECK_FALSE(cuda::engine_refusal(atomics, 0, false, false, limit));
  CHECK(cuda::engine_refusal(atomics, 0, false, true, limit) == "nondeterministic");
  // runtime-compiled kernels: taken unless MPIGAN_CUDA_GRAPH_RTC=0
  CHECK_FALSE(cuda::engine_refusal(rtc, 0, true, false, limit));
  CHECK(cuda::engine_refusal(rtc, 0, true, false, limit, false) == "compiled at run time");
  CHECK_FALSE(cuda::engine_refusal(tc, 0, true, false, limit, false));
  CHECK_FALSE(cuda::engine_refusal(plain, limit, false, false, limit));
  CHECK(cuda::engine_refusal(plain, limit + 1, false, false, limit) == "workspace 64 MiB over the limit of 64 MiB");

  const Shape s{2, 3, 4, 5, 6};
  CHECK(cuda::packed_strides(s, false) == std::array<std::int64_t, 5>{360, 120, 30, 6, 1});
  CHECK(cuda::packed_strides(s, true) == std::array<std::int64_t, 5>{360, 1, 90, 18, 3});
  // every element at its own offset in both layouts: the strides address a packed buffer
  for (bool last : {false, true}) {
    const auto st = cuda::packed_strides(s, last);
    std::vector<int> hits(static_cast<std::size_t>(s.numel()), 0);
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t d = 0; d < 4; ++d)
          for (std::int64_t h = 0; h < 5; ++h)
            for (std::int64_t w = 0; w < 6; ++w)
              ++hits[static_cast<std::size_t>(n * st[0] + c * st[1] + d * st[2] + h * st[3] + w * st[4])];
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }

  alignas(256) static float buf[128];
  CHECK(cuda::address_alignment(buf) == 256);
  CHECK(cuda::address_alignment(buf + 1) == 4);
  CHECK(cuda::address_alignment(buf + 4) == 16);
  CHECK(cuda::address_alignment(reinterpret_cast<const char*>(buf) + 2) == 2);

  const test::ScopedEnv api("MPIGAN_CUDA_CONV_API", nullptr);
  {
    const test::ScopedEnv strict("MPIGAN_CUDA_TF32", "0");
    CHECK(cuda::Settings::from_env().conv_api == cuda::Settings::ConvApi::measured);
    const test::ScopedEnv tf32("MPIGAN_CUDA_TF32", "1");
    CHECK(cuda::Settings::from_env().conv_api == cuda::Settings::ConvApi::measured);
    // TF32 refuses runtime-compiled graph-API engines unless asked for them
    const test::ScopedEnv rtc("MPIGAN_CUDA_GRAPH_RTC", nullptr);
    CHECK_FALSE(cuda::Settings::from_env().graph_runtime_compiled);
    const test::ScopedEnv on("MPIGAN_CUDA_GRAPH_RTC", "1");
    CHECK(cuda::Settings::from_env().graph_runtime_compiled);
  }
  for (auto [name, want] :
       {std::pair{"graph", cuda::Settings::ConvApi::graph}, std::pair{"measured", cuda::Settings::ConvApi::measured}}) {
    const test::ScopedEnv set("MPIGAN_CUDA_CONV_API", name);
    CHECK(cuda::Settings::from_env().conv_api == want);
    CHECK(cuda::Settings::from_env().to_string().find(std::string("conv API ") + name) != std::string::npos);
  }
  {
    const test::ScopedEnv rtc("MPIGAN_CUDA_GRAPH_RTC", nullptr);
    CHECK(cuda::Settings::from_env().graph_runtime_compiled);
    const test::ScopedEnv off("MPIGAN_CUDA_GRAPH_RTC", "0");
    CHECK_FALSE(cuda::Settings::from_env().graph_runtime_compiled);
    CHECK(cuda::Settings::from_env().to_string().find("(no runtime-compiled engines)") != std::string::npos);
  }
  const test::ScopedEnv bad("MPIGAN_CUDA_CONV_API", "frontend");
  CHECK_THROWS_WITH_AS(cuda::Settings::from_env(), doctest::Contains("MPIGAN_CUDA_CONV_API='frontend': allowed are"),
                       Error);
}

TEST_CASE("cuda: the weight gradient as a forward convolution of the transposed problem (host)") {
  // conv3d_plan.hpp's WgradAsForward, evaluated with the reference convolution and the swap01 index
  // map of the kernels: equal to the reference weight gradient up to the order of the sums.
  Rng rng(23);
  int planned = 0;
  for (const auto& c : conv_cases()) {
    const std::string case_name = c.name;  // by value: doctest prints a const char* as its address
    CAPTURE(case_name);
    const auto pad = cuda::plan_conv_padding(c.desc, c.src);
    const auto plan = cuda::plan_wgrad_as_forward(c.desc, pad);
    const bool strided = c.desc.stride[0] != 1 || c.desc.stride[1] != 1 || c.desc.stride[2] != 1;
    CHECK(plan.has_value() == !strided);
    if (!plan) continue;
    ++planned;
    CHECK(plan->desc.output_shape(plan->in) == plan->out);
    const Shape dst_shape = c.desc.output_shape(c.src);
    Tensor src = random_host(c.src, rng), dy = random_host(dst_shape, rng);
    const auto g = pad.pad_geometry();
    Tensor padded = Tensor::empty(pad.padded_src);
    for (std::int64_t i = 0; i < g.padded_numel(); ++i) padded.data()[i] = cuda::pad_element(g, src.data(), i);
    auto swap = [](const cuda::Swap01Geometry& sg, const Tensor& from, Tensor& to, bool accumulate) {
      REQUIRE(from.numel() == sg.numel());
      REQUIRE(to.numel() == sg.numel());
      for (std::int64_t i = 0; i < sg.numel(); ++i) {
        const float v = from.data()[cuda::swap01_source_index(sg, i)];
        to.data()[i] = accumulate ? to.data()[i] + v : v;
      }
    };
    Tensor in = Tensor::empty(plan->in), filter = Tensor::empty(plan->filter), out = Tensor::empty(plan->out);
    swap(plan->src_to_in(), padded, in, false);
    swap(plan->dy_to_filter(), dy, filter, false);
    ref::conv3d_forward<float>(plan->desc, plan->in, in.data(), filter.data(), nullptr, out.data());
    // Accumulated, as the op accumulates into diff_weights.
    Tensor dw_want = Tensor::full(c.desc.weights_shape(), 0.25f), dw_got = Tensor::full(c.desc.weights_shape(), 0.25f);
    ref::conv3d_backward_weights<float>(c.desc, c.src, src.data(), dy.data(), dw_want.data(), nullptr);
    swap(plan->out_to_dw(), out, dw_got, true);
    CHECK(close("weight gradient as a forward convolution", dw_got, dw_want, {1e-5, 1e-4}));
  }
  CHECK(planned == 4);
}

TEST_CASE("cuda: bf16 rounding of the convolutions' operands (host)") {
  // Hand-computed: 1 + 2^-8 lies halfway between the bf16 values 1 and 1 + 2^-7 and goes to the
  // even one (1); 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6 and goes to the even one
  // (1 + 2^-6); 1 + 2^-8 + 2^-20 is above half and goes up.
  CHECK(cuda::float_to_bf16_bits(1.0f) == 0x3F80u);
  CHECK(cuda::bf16_to_float(cuda::float_to_bf16_bits(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(cuda::bf16_to_float(cuda::float_to_bf16_bits(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(cuda::bf16_to_float(cuda::float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);
  CHECK(cuda::bf16_to_float(cuda::float_to_bf16_bits(-2.5f)) == -2.5f);  // exact in bf16
  CHECK(cuda::float_to_bf16_bits(0.0f) == 0x0000u);
  CHECK(cuda::float_to_bf16_bits(-0.0f) == 0x8000u);
  CHECK(cuda::float_to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7F80u);
  // the largest finite float rounds up to infinity, as round-to-nearest does past bf16's maximum
  CHECK(cuda::float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7F80u);
  // a NaN whose payload lies only in the low 16 bits stays a NaN (plain rounding would make it +inf)
  const float low_nan = std::bit_cast<float>(0x7F800001u);
  CHECK(std::isnan(cuda::bf16_to_float(cuda::float_to_bf16_bits(low_nan))));
  CHECK(std::isnan(cuda::bf16_to_float(cuda::float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  // every value is within half a bf16 ulp (at most 2^-8 of it) and rounding is idempotent
  Rng rng(37);
  const Tensor x = random_host({4096}, rng, -100.0f, 100.0f);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data()[i], r = cuda::bf16_to_float(cuda::float_to_bf16_bits(v));
    REQUIRE(std::abs(r - v) <= std::abs(v) * 0x1p-8f);
    REQUIRE(cuda::float_to_bf16_bits(r) == cuda::float_to_bf16_bits(v));
  }
}

TEST_CASE("cuda: the channels-last copies' index map (host)") {
  // The swap {C, S, 1, N}: every element of the (N, S, C) copy names its source in (N, C, S), each
  // source exactly once, as the loops over (n, s, c) say; the swap {S, C, 1, N} takes it back.
  struct NCS {
    std::int64_t n, c, s;
  };
  for (const NCS g : {NCS{2, 3, 5}, NCS{1, 1, 7}, NCS{3, 8, 1}, NCS{2, 32, 6}}) {
    CAPTURE(g.n);
    CAPTURE(g.c);
    CAPTURE(g.s);
    const cuda::Swap01Geometry to{g.c, g.s, 1, g.n}, back{g.s, g.c, 1, g.n};
    REQUIRE(to.numel() == g.n * g.c * g.s);
    std::vector<int> seen(static_cast<std::size_t>(to.numel()), 0);
    std::int64_t i = 0;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t sp = 0; sp < g.s; ++sp)
        for (std::int64_t c = 0; c < g.c; ++c, ++i) {
          const std::int64_t j = cuda::swap01_source_index(to, i);
          REQUIRE(j == (n * g.c + c) * g.s + sp);
          REQUIRE(cuda::swap01_source_index(back, j) == i);
          ++seen[static_cast<std::size_t>(j)];
        }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  }
}

TEST_CASE("cuda: element formulas and index maps of the kernels match the reference (host)") {
  auto ref = make_backend("reference");
  Rng rng(31);
  const Shape shape{2, 3, 5, 4, 6};
  Tensor x = random_host(shape, rng, -3.0f, 3.0f);
  for (std::int64_t i = 0; i < x.numel(); i += 7) x.data()[i] = 0.0f;  // the kinks

  SUBCASE("activations") {
    for (const EltwiseDesc d : {EltwiseDesc{EltwiseKind::relu, 0.0f}, EltwiseDesc{EltwiseKind::leaky_relu, 0.3f},
                                EltwiseDesc{EltwiseKind::sigmoid, 0.0f}}) {
      const auto act = d.kind == EltwiseKind::relu         ? cuda::Act::relu
                       : d.kind == EltwiseKind::leaky_relu ? cuda::Act::leaky_relu
                                                           : cuda::Act::sigmoid;
      Tensor y_want = Tensor::empty(shape), y_got = Tensor::empty(shape);
      ref::eltwise_forward(d, static_cast<std::size_t>(x.numel()), x.data(), y_want.data());
      for (std::int64_t i = 0; i < x.numel(); ++i) y_got.data()[i] = cuda::act_forward(act, d.alpha, x.data()[i]);
      CHECK(close(d.to_string() + " forward", y_got, y_want, kExact));
      Tensor dy = random_host(shape, rng), dx_want = Tensor::empty(shape), dx_got = Tensor::empty(shape);
      ref::eltwise_backward(d, static_cast<std::size_t>(x.numel()), y_want.data(), dy.data(), dx_want.data());
      for (std::int64_t i = 0; i < x.numel(); ++i)
        dx_got.data()[i] = cuda::act_backward(act, d.alpha, y_want.data()[i], dy.data()[i]);
      CHECK(close(d.to_string() + " backward", dx_got, dx_want, kExact));
    }
  }
  SUBCASE("pow and its backward") {
    for (float p : {2.0f, 0.5f, 0.85f}) {
      Tensor want = Tensor::empty(shape), got = Tensor::empty(shape);
      ref->pow(x, p, want);
      for (std::int64_t i = 0; i < x.numel(); ++i) got.data()[i] = cuda::pow_forward(x.data()[i], p);
      CHECK(close(fmt::format("pow {}", p), got, want, kExact));
      Tensor dy = random_host(shape, rng), acc_want = random_host(shape, rng);
      Tensor acc_got = acc_want.clone();
      ref->pow_backward_add(x, p, dy, acc_want);
      for (std::int64_t i = 0; i < x.numel(); ++i)
        acc_got.data()[i] = cuda::pow_backward_add(x.data()[i], p, dy.data()[i], acc_got.data()[i]);
      CHECK(close(fmt::format("pow_backward_add {}", p), acc_got, acc_want, kExact));
    }
  }
  SUBCASE("optimizer steps") {
    const Shape flat{997};
    Tensor w0 = random_host(flat, rng), g = random_host(flat, rng), s0 = random_host(flat, rng, 0.0f, 1.0f),
           s1 = random_host(flat, rng, 0.0f, 1.0f);
    auto run = [&](auto&& ref_step, auto&& host_step, const char* what) {
      Tensor w_ref = w0.clone(), a_ref = s0.clone(), b_ref = s1.clone();
      Tensor w_got = w0.clone(), a_got = s0.clone(), b_got = s1.clone();
      ref_step(w_ref, a_ref, b_ref);
      for (std::int64_t i = 0; i < flat.numel(); ++i)
        host_step(w_got.data()[i], g.data()[i], a_got.data()[i], b_got.data()[i]);
      CHECK(close(std::string(what) + " w", w_got, w_ref, kExact));
      CHECK(close(std::string(what) + " state", a_got, a_ref, kExact));
      CHECK(close(std::string(what) + " state 2", b_got, b_ref, kExact));
    };
    for (const SgdStep s : {SgdStep{0.1f, 0.0f, false}, SgdStep{0.1f, 0.9f, false}, SgdStep{0.1f, 0.9f, true}})
      run([&](Tensor& w, Tensor& v, Tensor&) { ref->sgd_update(w, g, v, s); },
          [&](float& w, float gi, float& v, float&) { cuda::sgd_step(w, gi, v, s.lr, s.momentum, s.nesterov); }, "sgd");
    const RmspropStep r{1e-3f, 0.9f, 1e-7f};
    run([&](Tensor& w, Tensor& ms, Tensor&) { ref->rmsprop_update(w, g, ms, r); },
        [&](float& w, float gi, float& ms, float&) { cuda::rmsprop_step(w, gi, ms, r.lr, r.rho, r.epsilon); },
        "rmsprop");
    const AdamStep a{2e-4f, 0.5f, 0.999f, 1e-7f};
    run([&](Tensor& w, Tensor& m, Tensor& v) { ref->adam_update(w, g, m, v, a); },
        [&](float& w, float gi, float& m, float& v) {
          cuda::adam_step(w, gi, m, v, a.lr_t, a.beta1, a.beta2, a.epsilon);
        },
        "adam");
  }
  SUBCASE("upsample index maps") {
    const UpsampleDesc d{{2, 2, 3}};
    const Shape src_shape{2, 3, 4, 3, 5};
    Tensor src = random_host(src_shape, rng);
    const Shape dst_shape = d.output_shape(src_shape);
    cuda::UpsampleGeometry g;
    g.nc = 6, g.d = 4, g.h = 3, g.w = 5, g.fd = 2, g.fh = 2, g.fw = 3;
    Tensor want = Tensor::empty(dst_shape), got = Tensor::empty(dst_shape);
    ref::upsample_forward(d, src_shape, src.data(), want.data());
    for (std::int64_t i = 0; i < g.dst_numel(); ++i) got.data()[i] = src.data()[cuda::upsample_source_index(g, i)];
    CHECK(close("upsample forward", got, want, kExact));
    Tensor dy = random_host(dst_shape, rng), dx_want = Tensor::empty(src_shape), dx_got = Tensor::empty(src_shape);
    ref::upsample_backward(d, src_shape, dy.data(), dx_want.data());
    for (std::int64_t i = 0; i < g.src_numel(); ++i)
      dx_got.data()[i] = cuda::upsample_backward_element(g, dy.data(), i);
    CHECK(close("upsample backward", dx_got, dx_want, kExact));
  }
  SUBCASE("batch norm coefficients") {
    const Shape s{3, 4, 5, 6, 2};
    const std::int64_t N = s[0], C = s[1], S = s.numel() / (N * C);
    const float eps = 1e-6f;
    Tensor src = random_host(s, rng, 1.0f, 5.0f), gamma = random_host({C}, rng, 0.5f, 1.5f),
           beta = random_host({C}, rng), dy = random_host(s, rng);
    Tensor want = Tensor::empty(s), mean = Tensor::empty({C}), var = Tensor::empty({C});
    ref::batch_norm_forward_training(s, eps, src.data(), gamma.data(), beta.data(), want.data(), mean.data(),
                                     var.data());
    cuda::BnGeometry g;
    g.n = N, g.c = C, g.s = S;
    Tensor got = Tensor::empty(s), dx_got = Tensor::empty(s), dx_want = Tensor::empty(s);
    Tensor dgamma_want = Tensor::zeros({C}), dbeta_want = Tensor::zeros({C});
    Tensor dgamma_got = Tensor::zeros({C}), dbeta_got = Tensor::zeros({C});
    ref::batch_norm_backward(s, eps, src.data(), dy.data(), gamma.data(), mean.data(), var.data(), dx_want.data(),
                             dgamma_want.data(), dbeta_want.data());
    for (std::int64_t c = 0; c < C; ++c) {
      double sum = 0.0, sq = 0.0, sum_dy = 0.0, sum_dy_xmu = 0.0;
      for (std::int64_t j = 0; j < N * S; ++j) sum += src.data()[cuda::bn_channel_element(g, c, j)];
      const double mu = sum / static_cast<double>(N * S);
      for (std::int64_t j = 0; j < N * S; ++j) {
        const double d = src.data()[cuda::bn_channel_element(g, c, j)] - mu;
        sq += d * d;
      }
      const auto k = cuda::bn_forward_coef(mu, sq / static_cast<double>(N * S), eps, gamma.data()[c], beta.data()[c]);
      for (std::int64_t j = 0; j < N * S; ++j) {
        const auto i = cuda::bn_channel_element(g, c, j);
        CHECK(cuda::bn_channel_of(g, i) == c);
        got.data()[i] = cuda::bn_forward_apply(k, src.data()[i]);
        sum_dy += dy.data()[i];
        sum_dy_xmu += static_cast<double>(dy.data()[i]) * (static_cast<double>(src.data()[i]) - mean.data()[c]);
      }
      double dgamma = 0.0, dbeta = 0.0;
      const auto kb = cuda::bn_backward_coef(sum_dy, sum_dy_xmu, static_cast<double>(N * S), mean.data()[c],
                                             var.data()[c], eps, gamma.data()[c], &dgamma, &dbeta);
      dgamma_got.data()[c] = static_cast<float>(dgamma);
      dbeta_got.data()[c] = static_cast<float>(dbeta);
      for (std::int64_t j = 0; j < N * S; ++j) {
        const auto i = cuda::bn_channel_element(g, c, j);
        dx_got.data()[i] = cuda::bn_backward_apply(kb, src.data()[i], dy.data()[i]);
      }
    }
    CHECK(close("bn forward", got, want, kBatchNorm));
    CHECK(close("bn backward diff_src", dx_got, dx_want, kBatchNorm));
    CHECK(close("bn backward diff_gamma", dgamma_got, dgamma_want, kBatchNorm));
    CHECK(close("bn backward diff_beta", dbeta_got, dbeta_want, kBatchNorm));
  }
}

// ----------------------------------------------------------------------------------------------
// GPU checks

TEST_CASE("cuda: memory, copies and device choice") {
  MPIGAN_REQUIRE_GPU();
  auto gpu = make_backend("cuda");
  MESSAGE(gpu->describe());
  CHECK(gpu->device() == Device::cuda);
  CHECK(gpu->describe().find("cuda (device") != std::string::npos);
  Rng rng(41);
  Tensor host = random_host({3, 5, 7}, rng);
  Tensor dev = to_gpu(*gpu, host);
  CHECK(dev.device() == Device::cuda);
  CHECK(dev.canonical());
  CHECK(close("to_host(from_host(x))", gpu->to_host(dev), host, kExact));

  Tensor dev2 = gpu->allocate(host.shape());
  gpu->reorder(dev, dev2);  // device -> device
  CHECK(close("reorder device->device", gpu->to_host(dev2), host, kExact));
  Tensor dev3 = gpu->allocate(host.shape());
  gpu->reorder(host, dev3);  // host -> device
  CHECK(close("reorder host->device", gpu->to_host(dev3), host, kExact));
  CHECK(close("zeros", gpu->to_host(gpu->zeros({4, 4})), Tensor::zeros({4, 4}), kExact));

  auto& cuda_backend = dynamic_cast<CudaBackend&>(*gpu);
  Tensor pinned = pinned_host_tensor(host.shape());
  cuda_backend.copy_to_host(dev, pinned, /*wait=*/false);
  gpu->synchronize();
  CHECK(close("copy_to_host into pinned memory", pinned, host, kExact));
  Tensor back = gpu->allocate(host.shape());
  cuda_backend.copy_from_host(pinned, back, /*wait=*/false);
  CHECK(close("copy_from_host from pinned memory", gpu->to_host(back), host, kExact));

  CHECK_NOTHROW(gpu->allocate_storage(0));
  const std::size_t before = cuda_backend.memory_in_use();
  {
    Tensor big = gpu->allocate(Shape{1 << 20});
    CHECK(cuda_backend.memory_in_use() >= before + (4u << 20));
  }
  CHECK(cuda_backend.memory_in_use() == before);
  CHECK(gpu->device_memory_peak() >= before + (4u << 20));  // the 4 MiB block, gone but counted
  gpu->reset_device_memory_peak();
  CHECK(gpu->device_memory_peak() == cuda_backend.memory_in_use());  // from the bytes in use now
  cuda_backend.empty_cache();
  CHECK(cuda_backend.memory_cached() == 0);

  CHECK_THROWS_AS(make_cuda_backend(BackendOptions{0, cuda_device_count()}), Error);
  // device_id -1: the node-local rank from the launcher's environment, modulo the device count.
  const char* others[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK"};
  bool other_set = false;
  for (const char* o : others) other_set = other_set || std::getenv(o);
  if (!other_set) {
    const test::ScopedEnv slurm("SLURM_LOCALID", "5");
    std::string reason;
    CHECK(choose_cuda_device(-1, &reason) == 5 % cuda_device_count());
    CHECK(reason.find("SLURM_LOCALID") != std::string::npos);
  }
  CHECK(choose_cuda_device(0) == 0);
}

TEST_CASE("cuda: conv3d re-plans for another batch size and back") {
  MPIGAN_REQUIRE_GPU();
  Pair b;
  Rng rng(52);
  const Conv3dDesc d = conv(4, 5, {3, 2, 4}, {1, 0, 1}, {1, 1, 2});
  auto ref_op = b.ref->make_conv3d(d);
  auto gpu_op = b.gpu->make_conv3d(d);
  for (std::int64_t n : {3, 1, 3}) {
    CAPTURE(n);
    const Shape s{n, 4, 6, 5, 7};
    const Shape out = ref_op->setup({s, nullptr}).shape;
    REQUIRE(gpu_op->setup({s, nullptr}).shape == out);
    Tensor src = random_host(s, rng), w = random_host(d.weights_shape(), rng, -0.2f, 0.2f),
           bias = random_host({5}, rng);
    Tensor want = Tensor::empty(out);
    ref_op->forward(src, w, bias, want);
    Tensor g_dst = nan_gpu(*b.gpu, out);
    gpu_op->forward(to_gpu(*b.gpu, src), to_gpu(*b.gpu, w), to_gpu(*b.gpu, bias), g_dst);
    // cuDNN's tolerance (test_utils.hpp library_tolerance; TF32-aware).
    test::check_close("forward", b.gpu->to_host(g_dst), want, test::library_tolerance(*b.gpu, {0.0, 0.0}, want));
  }
}

TEST_CASE("cuda: conv3d weight gradients as a forward convolution (MPIGAN_CUDA_WGRAD=forward) equal the reference") {
  MPIGAN_REQUIRE_GPU();
  const test::ScopedEnv forced("MPIGAN_CUDA_WGRAD", "forward");
  Pair b;
  REQUIRE(b.gpu->describe().find("weight gradients forward") != std::string::npos);
  Rng rng(53);
  for (const auto& c : conv_cases()) {
    const std::string case_name = c.name;  // by value: doctest prints a const char* as its address
    CAPTURE(case_name);
    auto ref_op = b.ref->make_conv3d(c.desc);
    auto gpu_op = b.gpu->make_conv3d(c.desc);
    const Shape out = ref_op->setup({c.src, nullptr}).shape;
    REQUIRE(gpu_op->setup({c.src, nullptr}).shape == out);
    const Tensor src = random_host(c.src, rng), dy = random_host(out, rng);
    // the strided case stays on cuDNN's weight-gradient algorithms and is checked the same way
    check_weight_gradients(*b.gpu, *ref_op, *gpu_op, c, out, src, dy, rng);
  }
}

TEST_CASE("cuda: bf16 convolutions equal the reference on bf16-rounded inputs, accumulated in fp32") {
  MPIGAN_REQUIRE_GPU();
  std::string layout;
  SUBCASE("channels-last copies") {
    layout = "channels_last";
  }
  SUBCASE("channels-first copies") {
    layout = "channels_first";
  }
  CAPTURE(layout);
  const test::ScopedEnv layout_env("MPIGAN_CUDA_BF16_LAYOUT", layout.c_str());
  BackendOptions o;
  o.precision = Precision::bf16;
  auto gpu = make_backend("cuda", o);
  if (gpu->precision() != Precision::bf16) {
    MESSAGE("SKIPPED: this GPU has no bf16 tensor cores (" << gpu->describe() << ")");
    return;
  }
  CHECK(gpu->describe().find(layout == "channels_last"
                                 ? "bf16 convolutions (fp32 accumulation, channels-last"
                                 : "bf16 convolutions (fp32 accumulation, channels-first") != std::string::npos);
  auto ref = make_backend("reference");
  const auto rounded = [](const Tensor& t) {
    Tensor r = t.clone();
    for (std::int64_t i = 0; i < r.numel(); ++i)
      r.data()[i] = cuda::bf16_to_float(cuda::float_to_bf16_bits(r.data()[i]));
    return r;
  };
  auto& plans = dynamic_cast<CudaBackend&>(*gpu).context().graph_conv_plans();
  // The bf16 plan of one direction of a case, or none where that direction runs fp32 (and warned).
  const auto plan_of = [&](const ConvCase& c, const Shape& out, cuda::ConvDirection d) -> const cuda::GraphConv* {
    const cuda::ConvPadPlan pad = cuda::plan_conv_padding(c.desc, c.src);
    cuda::GraphConvProblem problem;
    problem.direction = d;
    problem.x = pad.padded_src;
    problem.w = c.desc.weights_shape();
    problem.y = out;
    problem.pad = pad.sym;
    problem.stride = c.desc.stride;
    problem.bf16 = true;
    problem.channels_last = layout == "channels_last";
    auto it = plans.find(problem.key());
    if ((it == plans.end() || !it->second) && problem.channels_last) {
      problem.channels_last = false;  // the op's fallback where no channels-last engine runs it
      it = plans.find(problem.key());
    }
    return it == plans.end() ? nullptr : it->second.get();
  };
  // A product of two bf16 values is exact in fp32, so the results equal the reference's on the
  // rounded inputs to fp32 summation error; where an engine writes its result in bf16 (no engine
  // wrote fp32), to half a bf16 ulp more. The reference on the unrounded inputs stands apart. A
  // direction without a bf16 engine ran fp32: the reference on the unrounded inputs.
  const auto check = [&](const std::string& what, const cuda::GraphConv* g, const Tensor& got, const Tensor& want,
                         const Tensor& plain, double terms) {
    const test::Tolerance fp32{std::min(1e-2, 2e-7 * terms), 1e-4};
    const test::Tolerance bf16_out{std::min(1e-2, 2e-7 * terms), 1e-4 + 0x1p-8};
    if (!g) {
      MESSAGE(what << ": no bf16 engine, ran fp32");
      test::check_close(what + " (fp32)", got, plain, test::library_tolerance(*gpu, fp32, plain));
      return;
    }
    const bool rounded_out = g->output_bf16();
    CAPTURE(rounded_out);
    test::check_close(what, got, want, rounded_out ? bf16_out : fp32);
    double far = 0, near = 0, sq = 0;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      far = std::max(far, static_cast<double>(std::abs(got.data()[i] - plain.data()[i])));
      near = std::max(near, static_cast<double>(std::abs(got.data()[i] - want.data()[i])));
      sq += static_cast<double>(want.data()[i]) * want.data()[i];
    }
    CAPTURE(far);
    CAPTURE(near);
    if (!rounded_out) CHECK(far > 20 * near);  // bf16 inputs ran (they lose 8 bits)
    CHECK(far > 0x1p-12 * std::sqrt(sq / static_cast<double>(got.numel())));
  };
  Rng rng(67);
  for (const auto& c : conv_cases()) {
    const std::string case_name = c.name;
    CAPTURE(case_name);
    auto ref_op = ref->make_conv3d(c.desc);
    auto gpu_op = gpu->make_conv3d(c.desc);
    const Shape out = ref_op->setup({c.src, nullptr}).shape;
    REQUIRE(gpu_op->setup({c.src, nullptr}).shape == out);
    // a zero bias: it is added in fp32 after the convolution (checked by the fp32 tests), and a
    // non-zero one would blur the forward's comparison with a bf16-written result
    const Tensor src = random_host(c.src, rng), w = random_host(c.desc.weights_shape(), rng),
                 bias = c.desc.bias ? Tensor::zeros({c.desc.oc}) : Tensor(), dy = random_host(out, rng);
    const Tensor g_src = to_gpu(*gpu, src), g_w = to_gpu(*gpu, w), g_dy = to_gpu(*gpu, dy);
    const Tensor g_bias = c.desc.bias ? to_gpu(*gpu, bias) : Tensor();
    const double fwd_terms = static_cast<double>(c.desc.weights_shape().numel() / c.desc.oc);
    using cuda::ConvDirection;

    Tensor want = Tensor::zeros(out), plain = Tensor::zeros(out);
    ref_op->forward(rounded(src), rounded(w), bias, want);
    ref_op->forward(src, w, bias, plain);
    Tensor g_y = to_gpu(*gpu, Tensor::zeros(out));
    gpu_op->forward(g_src, g_w, g_bias, g_y);
    check("forward", plan_of(c, out, ConvDirection::forward), gpu->to_host(g_y), want, plain, fwd_terms);

    Tensor want_dx = Tensor::zeros(c.src), plain_dx = Tensor::zeros(c.src);
    ref_op->backward_data(rounded(dy), rounded(w), want_dx);
    ref_op->backward_data(dy, w, plain_dx);
    Tensor g_dx = to_gpu(*gpu, Tensor::zeros(c.src));
    gpu_op->backward_data(g_dy, g_w, g_dx);
    check("backward data", plan_of(c, out, ConvDirection::backward_data), gpu->to_host(g_dx), want_dx, plain_dx,
          static_cast<double>(c.desc.oc * c.desc.kernel.product()));

    // weight gradients from zero (the accumulation is checked in fp32 elsewhere); the bias
    // gradient stays fp32
    Tensor want_dw = Tensor::zeros(c.desc.weights_shape()), plain_dw = Tensor::zeros(c.desc.weights_shape());
    Tensor no_bias, want_db = c.desc.bias ? Tensor::zeros({c.desc.oc}) : Tensor();
    ref_op->backward_weights(rounded(src), rounded(dy), want_dw, no_bias);
    ref_op->backward_weights(src, dy, plain_dw, want_db);
    Tensor g_dw = to_gpu(*gpu, Tensor::zeros(c.desc.weights_shape()));
    Tensor g_db = c.desc.bias ? to_gpu(*gpu, Tensor::zeros({c.desc.oc})) : Tensor();
    gpu_op->backward_weights(g_src, g_dy, g_dw, g_db);
    const double terms = static_cast<double>(out.numel() / out[1]);
    check("backward weights", plan_of(c, out, ConvDirection::backward_weights), gpu->to_host(g_dw), want_dw, plain_dw,
          terms);
    if (c.desc.bias)
      test::check_close("backward bias", gpu->to_host(g_db), want_db,
                        test::Tolerance{std::min(1e-2, 2e-7 * terms), 1e-4});
  }
  // Which problems ran in bf16 through the graph API (the rest ran fp32 and warned).
  int ran = 0;
  for (const auto& [key, plan] : plans) {
    MESSAGE(key << ": "
                << (plan ? plan->engine() + (plan->output_bf16() ? ", bf16 written" : ", fp32 written")
                         : std::string("no engine, fp32 legacy")));
    ran += plan != nullptr;
  }
  CHECK(ran >= 1);
}

TEST_CASE("cuda: conv3d through cuDNN's graph API (MPIGAN_CUDA_CONV_API=graph) equals the reference") {
  MPIGAN_REQUIRE_GPU();
  const test::ScopedEnv api("MPIGAN_CUDA_CONV_API", "graph");
  Pair b;
  REQUIRE(b.gpu->describe().find("conv API graph") != std::string::npos);
  Rng rng(61);
  for (const auto& c : conv_cases()) {
    const std::string case_name = c.name;  // by value: doctest prints a const char* as its address
    CAPTURE(case_name);
    auto ref_op = b.ref->make_conv3d(c.desc);
    auto gpu_op = b.gpu->make_conv3d(c.desc);
    const Shape out = ref_op->setup({c.src, nullptr}).shape;
    REQUIRE(gpu_op->setup({c.src, nullptr}).shape == out);
    const Tensor src = random_host(c.src, rng), w = random_host(c.desc.weights_shape(), rng),
                 bias = c.desc.bias ? random_host({c.desc.oc}, rng) : Tensor(), dy = random_host(out, rng);
    const Tensor g_src = to_gpu(*b.gpu, src), g_w = to_gpu(*b.gpu, w), g_dy = to_gpu(*b.gpu, dy);
    const Tensor g_bias = c.desc.bias ? to_gpu(*b.gpu, bias) : Tensor();
    // Summation error grows with the number of terms of each output; TF32 is judged by the
    // library tolerance as for the legacy path.
    const double fwd_terms = static_cast<double>(c.desc.weights_shape().numel() / c.desc.oc);
    Tensor want = Tensor::zeros(out);
    ref_op->forward(src, w, bias, want);
    Tensor g_y = to_gpu(*b.gpu, Tensor::zeros(out));
    gpu_op->forward(g_src, g_w, g_bias, g_y);
    const test::Tolerance fwd{std::min(1e-2, 2e-7 * fwd_terms), 1e-4};
    test::check_close("forward", b.gpu->to_host(g_y), want, test::library_tolerance(*b.gpu, fwd, want));

    Tensor want_dx = Tensor::zeros(c.src);
    ref_op->backward_data(dy, w, want_dx);
    Tensor g_dx = to_gpu(*b.gpu, Tensor::zeros(c.src));
    gpu_op->backward_data(g_dy, g_w, g_dx);
    test::check_close("backward data", b.gpu->to_host(g_dx), want_dx, test::library_tolerance(*b.gpu, fwd, want_dx));

    // the graph's dW is written to the workspace and added to the accumulator by the op
    check_weight_gradients(*b.gpu, *ref_op, *gpu_op, c, out, src, dy, rng);
  }
  // The graph API really ran: which problems got a plan, which fell back to the legacy calls.
  auto& plans = dynamic_cast<CudaBackend&>(*b.gpu).context().graph_conv_plans();
  int ran = 0;
  for (const auto& [key, plan] : plans) {
    MESSAGE(key << ": " << (plan ? plan->engine() : std::string("no engine, legacy")));
    ran += plan != nullptr;
  }
  CHECK(ran >= 3 * static_cast<int>(conv_cases().size()) - 3);
}

TEST_CASE("cuda: NCCL allreduce and broadcast on a one-rank communicator") {
  MPIGAN_REQUIRE_GPU();
  auto gpu = make_backend("cuda");
  auto& cuda_backend = dynamic_cast<CudaBackend&>(*gpu);
  Rng rng(131);
  Tensor host = random_host({4099}, rng);
  Tensor buf = to_gpu(*gpu, host);
  NcclComm comm(nccl_new_id(), 0, 1, cuda_backend);
  CHECK(comm.size() == 1);
  comm.allreduce_sum(buf);
  comm.broadcast(buf, 0);
  CHECK_NOTHROW(comm.check_async());
  CHECK(close("allreduce over one rank is the identity", gpu->to_host(buf), host, kExact));
  Tensor out = nan_gpu(*gpu, host.shape());
  comm.allreduce_sum(buf, out);
  CHECK(close("out-of-place allreduce", gpu->to_host(out), host, kExact));
}

TEST_CASE("cuda: the group reducer of a one-rank group sends its id through the callback and averages") {
  MPIGAN_REQUIRE_GPU();
  auto gpu = make_backend("cuda");
  int calls = 0;
  const IdBroadcast broadcast = [&](std::span<std::byte> id) {
    ++calls;
    CHECK(id.size() == kNcclIdBytes);
  };
  CHECK_THROWS_AS(gpu->make_group_reducer(1, 1, broadcast), Error);
  CHECK(calls == 0);
  std::unique_ptr<GroupReducer> reducer = gpu->make_group_reducer(0, 1, broadcast);
  REQUIRE(reducer != nullptr);
  CHECK(calls == 1);
  Rng rng(141);
  Tensor host = random_host({4099}, rng);
  Tensor buf = to_gpu(*gpu, host);
  reducer->average(buf);  // sum over one rank, times 1/1: exact
  CHECK(close("average over one rank is the identity", gpu->to_host(buf), host, kExact));
}

TEST_SUITE_END();

}  // namespace

#endif  // MPIGAN_HAVE_CUDA
