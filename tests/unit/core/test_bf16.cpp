// Precision::bf16 on the cpu backend: each convolution reads its inputs rounded to bfloat16 and
// accumulates in float32. So its result must equal the reference backend's on the same inputs
// rounded to bf16 (to fp32 summation tolerance: a product of two bf16 values is exact in fp32),
// and stand visibly apart from the reference on the unrounded inputs (bf16 really ran). Where the
// CPU has no native bf16, the backend runs fp32 unless emulation is asked for; on a CPU without
// AVX-512 oneDNN cannot emulate it either and the numerics cases print "SKIPPED".
#include "test_utils.hpp"

#include "mpigan/backend/cpu/cpu_backend.hpp"
#include "mpigan/backend/reference/reference_backend.hpp"
#include "mpigan/core/error.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

using namespace mpigan;
using namespace mpigan::test;

namespace {

/// @p x rounded to the nearest bfloat16 (ties to even), as oneDNN's f32 -> bf16 reorder does.
float round_bf16(float x) {
  auto u = std::bit_cast<std::uint32_t>(x);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

Tensor rounded(const Tensor& t) {
  Tensor r = t.clone();
  for (std::int64_t i = 0; i < r.numel(); ++i) r.data()[i] = round_bf16(r.data()[i]);
  return r;
}

/// The oneDNN ISA named in describe(): the word after "ISA ".
std::string isa_of(const Backend& be) {
  const std::string d = be.describe();
  const auto at = d.find("ISA ");
  REQUIRE(at != std::string::npos);
  const auto begin = at + 4;
  const auto end = d.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_", begin);
  REQUIRE(end != begin);
  return d.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

/// max |got - want| / rms(want): how far apart two results are, in units of the result's scale.
double scaled_distance(const Tensor& got, const Tensor& want) {
  double worst = 0, sq = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got.data()[i] - want.data()[i])));
    sq += static_cast<double>(want.data()[i]) * want.data()[i];
  }
  return worst / std::sqrt(sq / static_cast<double>(want.numel()));
}

/// A bf16 cpu backend (emulated where the CPU has AVX-512 without native bf16) whose backward data
/// runs in the form @p bwd_data ("native" or "forward", MPIGAN_CPU_BWD_DATA); null where bf16
/// cannot run at all.
std::unique_ptr<Backend> bf16_backend_or_skip(const char* bwd_data) {
  BackendOptions o;
  o.precision = Precision::bf16;
  o.bf16_emulation = true;
  auto be = [&] {
    const test::ScopedEnv form("MPIGAN_CPU_BWD_DATA", bwd_data);
    return make_backend("cpu", o);
  }();
  if (be->precision() != Precision::bf16) {
    MESSAGE("SKIPPED: this CPU (oneDNN ISA " << isa_of(*be) << ") can neither run nor emulate bf16");
    return nullptr;
  }
  return be;
}

}  // namespace

TEST_CASE("bf16 support by ISA, and the fallback to fp32 without it") {
  CHECK(bf16_support("avx512_core_bf16") == "native");
  CHECK(bf16_support("avx512_core_amx") == "native");
  CHECK(bf16_support("avx512_core_vnni") == "emulated");
  CHECK(bf16_support("avx512_core") == "emulated");
  CHECK(bf16_support("avx2") == "none");
  CHECK(bf16_support("sse41") == "none");
  // Native bf16 measured slower than fp32 on an Intel CPU without AMX: named, with the figures.
  CHECK(bf16_speed_note("avx512_core_bf16", "GenuineIntel").find("0.56-0.58x") != std::string::npos);
  CHECK(bf16_speed_note("avx512_core_bf16", "AuthenticAMD").empty());
  CHECK(bf16_speed_note("avx512_core_amx", "GenuineIntel").empty());
  CHECK(bf16_speed_note("avx512_core_vnni", "GenuineIntel").empty());
  // The backward data as a forward convolution: by default on AMX only, the variable overrides.
  {
    const test::ScopedEnv unset("MPIGAN_CPU_BWD_DATA", nullptr);
    CHECK(bf16_bwd_data_as_forward("avx512_core_amx"));
    CHECK_FALSE(bf16_bwd_data_as_forward("avx512_core_bf16"));
    CHECK_FALSE(bf16_bwd_data_as_forward("avx512_core"));
  }
  {
    const test::ScopedEnv empty("MPIGAN_CPU_BWD_DATA", "");
    CHECK(bf16_bwd_data_as_forward("avx512_core_amx"));
  }
  {
    const test::ScopedEnv forward("MPIGAN_CPU_BWD_DATA", "forward");
    CHECK(bf16_bwd_data_as_forward("avx512_core_bf16"));
  }
  {
    const test::ScopedEnv native("MPIGAN_CPU_BWD_DATA", "native");
    CHECK_FALSE(bf16_bwd_data_as_forward("avx512_core_amx"));
  }
  {
    const test::ScopedEnv bad("MPIGAN_CPU_BWD_DATA", "fast");
    CHECK_THROWS_WITH_AS(bf16_bwd_data_as_forward("avx512_core_amx"),
                         doctest::Contains("MPIGAN_CPU_BWD_DATA='fast': allowed are 'forward' (a forward convolution"),
                         ConfigError);
  }

  BackendOptions o;
  o.precision = Precision::bf16;
  auto be = make_backend("cpu", o);
  const std::string isa = isa_of(*be);
  INFO("ISA " << isa << ": " << be->describe());
  // Without emulation asked for, bf16 runs only where it is native.
  CHECK((be->precision() == Precision::bf16) == (bf16_support(isa) == "native"));
  CHECK(be->describe().find(be->precision() == Precision::bf16 ? "bf16 convolutions" : "fp32 convolutions") !=
        std::string::npos);
  CHECK(make_backend("cpu")->precision() == Precision::fp32);
  CHECK(make_backend("reference", o)->precision() == Precision::fp32);

  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK(std::string(precision_name(parse_precision("fp32"))) == "fp32");
  CHECK_THROWS_WITH_AS(parse_precision("fp16"), doctest::Contains("expected fp32 or bf16"), Error);
}

TEST_CASE("bf16 convolutions: the reference on bf16-rounded inputs, accumulated in fp32") {
  // Both forms of the backward data (oneDNN's backward kernel; for stride 1 the forward
  // convolution with the transposed, reversed weights), whichever this CPU uses by default.
  for (const char* bwd_data : {"native", "forward"}) {
    INFO("backward data: " << std::string(bwd_data));
    auto be = bf16_backend_or_skip(bwd_data);
    if (!be) return;
    struct Case {
      std::string name;
      Shape src;
      Conv3dDesc desc;
    };
    const std::vector<Case> cases{
        {"k3 same", {2, 4, 6, 6, 6}, {4, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true}},
        {"3dgan-5 G 8->6 k3", {2, 8, 5, 5, 5}, {8, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true}},
        {"one input channel, k5", {2, 1, 9, 9, 9}, {1, 8, {5, 5, 5}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2}, true}},
        {"stride 2, no bias", {2, 6, 9, 8, 7}, {6, 8, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false}},
        // asymmetric padding and an even kernel (3dgan-25's generator has both): the backward data as
        // a forward convolution pads K - 1 - pad on each side
        {"asymmetric, k(4,3,2)", {2, 4, 7, 6, 5}, {4, 8, {4, 3, 2}, {1, 1, 1}, {2, 1, 0}, {1, 1, 1}, true}},
        // 32 input channels: the weight gradient in oneDNN's blocked layout (conv3d.cpp)
        {"3dgan-25 D 32->8 k5", {2, 32, 7, 7, 7}, {32, 8, {5, 5, 5}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2}, true}},
    };
    ReferenceBackend ref;
    for (const auto& c : cases) {
      INFO("case " << c.name);
      Rng rng(hash_string(c.name));
      auto op = be->make_conv3d(c.desc);
      auto rop = ref.make_conv3d(c.desc);
      const TensorDesc dst = op->setup({c.src, nullptr});
      const Shape dshape = rop->setup({c.src, nullptr}).shape;
      const double k = static_cast<double>(c.desc.ic * c.desc.kernel.product());
      const Tolerance tol{std::min(1e-2, 2e-7 * k), 1e-4};

      const Tensor src = random_tensor(c.src, rng), w = random_tensor(c.desc.weights_shape(), rng, -0.2f, 0.2f);
      const Tensor b = random_tensor({c.desc.oc}, rng), dd = random_tensor(dshape, rng);
      const Tensor bsrc = upload(*be, src, {c.src, nullptr}), bw = upload(*be, w, {w.shape(), nullptr});
      const Tensor bb = upload(*be, b, {b.shape(), nullptr}), bdd = upload(*be, dd, dst);
      const Tensor none;

      // A convolution of a single input channel runs in fp32 in every direction (the faster kernels
      // there): the reference on the unrounded inputs.
      const bool fp32 = c.desc.ic == 1;
      const auto input = [fp32](const Tensor& t) { return fp32 ? t : rounded(t); };

      Tensor out = be->allocate(dst), want = Tensor::empty(dshape), plain = Tensor::empty(dshape);
      op->forward(bsrc, bw, c.desc.bias ? bb : none, out);
      rop->forward(rounded(src), rounded(w), c.desc.bias ? b : none, want);
      rop->forward(src, w, c.desc.bias ? b : none, plain);
      check_close(c.name + " forward", host(*be, out), fp32 ? plain : want, tol);
      // bf16 ran (or, for one input channel, did not): the reference on the other inputs lies far
      // outside fp32's rounding (bf16 inputs lose 8 bits).
      if (fp32) {
        CHECK(scaled_distance(host(*be, out), want) > 20 * scaled_distance(host(*be, out), plain));
      } else {
        CHECK(scaled_distance(host(*be, out), plain) > 20 * scaled_distance(host(*be, out), want));
      }

      Tensor ds = be->allocate({c.src, nullptr}), rds = Tensor::empty(c.src);
      op->backward_data(bdd, bw, ds);
      rop->backward_data(input(dd), input(w), rds);
      check_close(c.name + " backward_data", host(*be, ds), rds,
                  {std::min(1e-2, 2e-7 * c.desc.oc * c.desc.kernel.product()), 1e-4});

      // Weight (and bias) gradients accumulate into the given values; the bias gradient sums the
      // incoming gradient as bf16 too.
      Tensor bdw = be->zeros(w.shape()), bdb = be->zeros(b.shape()), no_bias;
      Tensor rdw = Tensor::empty(w.shape()), rdb = Tensor::empty(b.shape());
      std::fill_n(rdw.data(), rdw.numel(), 0.0f);
      std::fill_n(rdb.data(), rdb.numel(), 0.0f);
      op->backward_weights(bsrc, bdd, bdw, c.desc.bias ? bdb : no_bias);
      rop->backward_weights(input(src), input(dd), rdw, c.desc.bias ? rdb : no_bias);
      const double terms = static_cast<double>(dshape.numel() / dshape[1]);
      check_close(c.name + " backward_weights", host(*be, bdw), rdw, {std::min(1e-2, 2e-7 * terms), 1e-4});
      if (c.desc.bias)
        check_close(c.name + " backward_bias", host(*be, bdb), rdb, {std::min(1e-2, 2e-7 * terms), 1e-4});
    }
  }
}
