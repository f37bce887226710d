// Every op of every compiled backend against the reference backend, on random inputs, including
// the exact shapes of the 3DGAN (batch 2; batch 1 for the AngleGAN's largest). The backends are
// cpu, and cuda when the build has it (CudaTag: each case prints "SKIPPED" and returns where no
// GPU is visible); test_cuda_backend.cpp holds only what is particular to the cuda backend. Inputs
// are canonical; the cpu backend stages them into its own layouts, so each edge reorder is
// exercised too (chains of blocked layouts are covered by the network tests in tests/unit/models).
//
// Tolerances: the reference accumulates in double, the backends in float32. For a sum of K
// products of values in [-1, 1], float32 rounding gives errors ~ sqrt(K) * 6e-8 * sqrt(K) (the
// partial sums grow like sqrt(K)); we allow abs = 2e-6 * K^(3/4)... kept simple: abs = 1e-6*K
// capped below, rel = 1e-4. Element-wise ops: abs 1e-6, rel 1e-5. On the cuda backend the
// convolutions and inner products (cuDNN, cuBLAS, whose algorithms may lose a digit more, and
// TF32 with MPIGAN_CUDA_TF32=1) also get library_tolerance (test_utils.hpp), which says why.
#include "test_utils.hpp"

#include "mpigan/backend/reference/reference_backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

using namespace mpigan;
using namespace mpigan::test;

#if MPIGAN_HAVE_CUDA
#define MPIGAN_TEST_BACKENDS CpuTag, CudaTag
#else
#define MPIGAN_TEST_BACKENDS CpuTag
#endif

namespace {

Tolerance sum_tolerance(double terms) {
  return {std::min(1e-2, 2e-7 * terms), 1e-4};
}

struct ConvCase {
  std::string name;
  Shape src;
  Conv3dDesc desc;
};

Conv3dDesc conv(std::int64_t ic, std::int64_t oc, Dims3 k, Dims3 pl = {0, 0, 0}, Dims3 pr = {0, 0, 0}, bool bias = true,
                Dims3 stride = {1, 1, 1}) {
  Conv3dDesc d{ic, oc, k, stride, pl, pr, bias};
  return d;
}

void run_conv_case(Backend& be, ConvCase c) {
  if (test::kSanitized) c.src[0] = 1;  // batch 1 in the sanitizer build: the same code paths (test_utils.hpp)
  ReferenceBackend ref;
  Rng rng(hash_string(c.name));
  INFO("case " << c.name << " src " << c.src.to_string() << " " << c.desc.to_string());
  auto op = be.make_conv3d(c.desc);
  auto rop = ref.make_conv3d(c.desc);
  const TensorDesc dst = op->setup({c.src, nullptr});
  const TensorDesc rdst = rop->setup({c.src, nullptr});
  REQUIRE(dst.shape == rdst.shape);
  const double k = static_cast<double>(c.desc.ic * c.desc.kernel.product());

  Tensor src = random_tensor(c.src, rng), w = random_tensor(c.desc.weights_shape(), rng, -0.2f, 0.2f);
  Tensor b = random_tensor({c.desc.oc}, rng);
  Tensor bsrc = upload(be, src, {c.src, nullptr}), bw = upload(be, w, {w.shape(), nullptr}),
         bb = upload(be, b, {b.shape(), nullptr});
  Tensor out = be.allocate(dst), rout = Tensor::empty(rdst.shape);
  op->forward(bsrc, bw, c.desc.bias ? bb : Tensor(), out);
  rop->forward(src, w, c.desc.bias ? b : Tensor(), rout);
  check_close(c.name + " forward", host(be, out), rout, library_tolerance(be, sum_tolerance(k * 0.2), rout));

  Tensor dd = random_tensor(rdst.shape, rng);
  Tensor bdd = upload(be, dd, dst);
  Tensor ds = be.allocate({c.src, nullptr}), rds = Tensor::empty(c.src);
  op->backward_data(bdd, bw, ds);
  rop->backward_data(dd, w, rds);
  check_close(c.name + " backward_data", host(be, ds), rds,
              library_tolerance(be, sum_tolerance(c.desc.oc * c.desc.kernel.product() * 0.2), rds));

  // Gradients accumulate: start from the same non-zero values on both.
  Tensor dw0 = random_tensor(w.shape(), rng), db0 = random_tensor(b.shape(), rng);
  Tensor bdw = upload(be, dw0, {w.shape(), nullptr}), bdb = upload(be, db0, {b.shape(), nullptr});
  Tensor rdw = dw0.clone(), rdb = db0.clone();
  Tensor none;
  op->backward_weights(bsrc, bdd, bdw, c.desc.bias ? bdb : none);
  rop->backward_weights(src, dd, rdw, c.desc.bias ? rdb : none);
  const double terms = static_cast<double>(rdst.shape.numel() / rdst.shape[1]);
  check_close(c.name + " backward_weights", host(be, bdw), rdw, library_tolerance(be, sum_tolerance(terms), rdw));
  if (c.desc.bias) {
    check_close(c.name + " backward_bias", host(be, bdb), rdb, library_tolerance(be, sum_tolerance(terms), rdb));
    // An undefined diff_bias skips the bias gradient (a frozen bias); the weights still accumulate.
    Tensor bdw2 = upload(be, dw0, {w.shape(), nullptr});
    op->backward_weights(bsrc, bdd, bdw2, none);
    check_close(c.name + " backward_weights without diff_bias", host(be, bdw2), rdw,
                library_tolerance(be, sum_tolerance(terms), rdw));
  } else {
    check_close(c.name + " bias untouched", host(be, bdb), db0, {0, 0});
  }
}

}  // namespace

TEST_CASE_TEMPLATE("conv3d matches the reference: small cases", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  const ConvCase cases[] = {
      {"1x1x1", {2, 3, 4, 5, 6}, conv(3, 4, {1, 1, 1})},
      {"k3 valid", {2, 5, 7, 6, 5}, conv(5, 7, {3, 3, 3})},
      {"k3 same", {3, 4, 6, 6, 6}, conv(4, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1})},
      {"even kernel TF same", {2, 3, 7, 7, 8}, conv(3, 5, {6, 6, 8}, {2, 2, 3}, {3, 3, 4})},
      {"asymmetric pads", {2, 2, 5, 6, 7}, conv(2, 3, {2, 3, 4}, {1, 0, 2}, {0, 2, 1})},
      {"no bias", {1, 6, 9, 9, 9}, conv(6, 1, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, false)},
      {"stride 2", {2, 4, 9, 8, 7}, conv(4, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true, {2, 2, 2})},
      {"strided, asymmetric both ways, no bias",
       {2, 3, 9, 8, 7},
       conv(3, 4, {3, 4, 2}, {1, 1, 0}, {0, 2, 1}, false, {2, 1, 2})},
      {"many channels", {1, 32, 6, 6, 6}, conv(32, 32, {3, 3, 3}, {1, 1, 1}, {1, 1, 1})},
  };
  for (const auto& c : cases) run_conv_case(*be, c);
}

TEST_CASE_TEMPLATE("conv3d matches the reference: 3DGAN 25x25x25 shapes", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  const ConvCase cases[] = {
      {"G conv1 8->64 k(6,6,8) same", {2, 8, 7, 7, 8}, conv(8, 64, {6, 6, 8}, {2, 2, 3}, {3, 3, 4})},
      {"G conv2 64->6 k(6,5,8) pad(2,2,0)", {2, 64, 14, 14, 16}, conv(64, 6, {6, 5, 8}, {2, 2, 0}, {2, 2, 0})},
      {"G conv3 6->6 k(3,3,8) pad(1,0,3)", {2, 6, 26, 28, 27}, conv(6, 6, {3, 3, 8}, {1, 0, 3}, {1, 0, 3})},
      {"G conv4 6->1 k2 no bias", {2, 6, 26, 26, 26}, conv(6, 1, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, false)},
      {"D conv1 1->32 k5 same", {2, 1, 25, 25, 25}, conv(1, 32, {5, 5, 5}, {2, 2, 2}, {2, 2, 2})},
      {"D conv2 32->8 k5 pad 2", {2, 32, 25, 25, 25}, conv(32, 8, {5, 5, 5}, {2, 2, 2}, {2, 2, 2})},
      {"D conv3 8->8 k5 pad 2", {2, 8, 25, 25, 25}, conv(8, 8, {5, 5, 5}, {2, 2, 2}, {2, 2, 2})},
      {"D conv4 8->8 k5 pad 1", {2, 8, 25, 25, 25}, conv(8, 8, {5, 5, 5}, {1, 1, 1}, {1, 1, 1})},
  };
  for (const auto& c : cases) run_conv_case(*be, c);
}

TEST_CASE_TEMPLATE("conv3d matches the reference: AngleGAN 51x51x25 shapes", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  const ConvCase cases[] = {
      {"D conv1 1->16 k(5,6,6) same", {1, 1, 51, 51, 25}, conv(1, 16, {5, 6, 6}, {2, 2, 2}, {2, 3, 3})},
      {"D conv2 16->8 k(5,6,6) pad(0,0,1)", {1, 16, 51, 51, 25}, conv(16, 8, {5, 6, 6}, {0, 0, 1}, {0, 0, 1})},
      {"G conv2 8->6 k(4,4,6) pad(2,2,1)", {1, 8, 49, 49, 41}, conv(8, 6, {4, 4, 6}, {2, 2, 1}, {2, 2, 1})},
  };
  for (const auto& c : cases) run_conv_case(*be, c);
}

TEST_CASE_TEMPLATE("inner product matches the reference", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  struct Case {
    std::int64_t n, ic, oc;
    bool bias;
  };
  for (const Case c : {Case{16, 200, 3136, true}, Case{4, 10648, 1, true}, Case{3, 7, 5, false}}) {
    INFO("inner product " << c.n << "x" << c.ic << " -> " << c.oc);
    Rng rng(static_cast<std::uint64_t>(c.ic * 131 + c.oc));
    const InnerProductDesc d{c.ic, c.oc, c.bias};
    auto op = be->make_inner_product(d);
    auto rop = ref.make_inner_product(d);
    const TensorDesc src{{c.n, c.ic}, nullptr};
    const TensorDesc dst = op->setup(src);
    rop->setup(src);
    Tensor x = random_tensor(src.shape, rng), w = random_tensor({c.oc, c.ic}, rng, -0.1f, 0.1f),
           b = random_tensor({c.oc}, rng);
    Tensor bx = upload(*be, x, src), bw = upload(*be, w, {w.shape(), nullptr}),
           bb = upload(*be, b, {b.shape(), nullptr});
    Tensor y = be->allocate(dst), ry = Tensor::empty(dst.shape);
    op->forward(bx, bw, c.bias ? bb : Tensor(), y);
    rop->forward(x, w, c.bias ? b : Tensor(), ry);
    check_close("forward", host(*be, y), ry, library_tolerance(*be, sum_tolerance(c.ic * 0.1), ry));
    Tensor dy = random_tensor(dst.shape, rng);
    Tensor bdy = upload(*be, dy, dst);
    Tensor dx = be->allocate(src), rdx = Tensor::empty(src.shape);
    op->backward_data(bdy, bw, dx);
    rop->backward_data(dy, w, rdx);
    check_close("backward_data", host(*be, dx), rdx, library_tolerance(*be, sum_tolerance(c.oc * 0.1), rdx));
    Tensor dw0 = random_tensor(w.shape(), rng), db0 = random_tensor(b.shape(), rng);
    Tensor bdw = upload(*be, dw0, {w.shape(), nullptr}), bdb = upload(*be, db0, {b.shape(), nullptr});
    Tensor rdw = dw0.clone(), rdb = db0.clone(), none;
    op->backward_weights(bx, bdy, bdw, c.bias ? bdb : none);
    rop->backward_weights(x, dy, rdw, c.bias ? rdb : none);
    const Tolerance batch_sum = sum_tolerance(static_cast<double>(c.n));
    check_close("backward_weights (accumulated)", host(*be, bdw), rdw, library_tolerance(*be, batch_sum, rdw));
    check_close("backward_bias (accumulated)", host(*be, bdb), rdb, library_tolerance(*be, batch_sum, rdb));
  }
}

TEST_CASE_TEMPLATE("activations match the reference, including the kinks", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  const Shape shape{2, 6, 5, 4, 3};
  Rng rng(7);
  Tensor x = random_tensor(shape, rng, -3.0f, 3.0f);
  for (std::int64_t i = 0; i < x.numel(); i += 7) x.data()[i] = 0.0f;  // exact kinks
  for (const EltwiseDesc d : {EltwiseDesc{EltwiseKind::relu, 0.0f}, EltwiseDesc{EltwiseKind::leaky_relu, 0.3f},
                              EltwiseDesc{EltwiseKind::sigmoid, 0.0f}}) {
    INFO("eltwise " << d.to_string());
    auto op = be->make_eltwise(d);
    auto rop = ref.make_eltwise(d);
    const TensorDesc td = op->setup({shape, nullptr});
    rop->setup({shape, nullptr});
    Tensor bx = upload(*be, x, td), y = be->allocate(td), ry = Tensor::empty(shape);
    op->forward(bx, y);
    rop->forward(x, ry);
    check_close("forward", host(*be, y), ry, {1e-6, 1e-5});
    Tensor dy = random_tensor(shape, rng), dx = be->allocate(td), rdx = Tensor::empty(shape);
    op->backward(y, upload(*be, dy, td), dx);
    rop->backward(ry, dy, rdx);
    check_close("backward", host(*be, dx), rdx, {1e-6, 1e-5});
    // In place: forward over its input, backward over its diff.
    Tensor inplace = upload(*be, x, td);
    op->forward(inplace, inplace);
    check_close("forward in place", host(*be, inplace), ry, {1e-6, 1e-5});
  }
}

TEST_CASE_TEMPLATE("batch norm matches the reference", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  // eps 1e-6 is below cuDNN's minimum; (16, 2, 32^3) has 2^19 values per channel (the cuda
  // kernels' partial sums split them over many blocks); (5, 3) is a batch norm after a dense layer.
  for (const auto& [shape, eps] : {std::pair{Shape{2, 64, 7, 7, 8}, 1e-3f}, std::pair{Shape{2, 6, 13, 14, 9}, 1e-3f},
                                   std::pair{Shape{4, 8, 25, 25, 25}, 1e-3f}, std::pair{Shape{2, 6, 9, 8, 7}, 1e-6f},
                                   std::pair{Shape{16, 2, 32, 32, 32}, 1e-3f}, std::pair{Shape{5, 3}, 1e-5f}}) {
    INFO("batch norm " << shape.to_string() << " eps " << eps);
    Rng rng(static_cast<std::uint64_t>(shape.numel()));
    const std::int64_t C = shape[1];
    const BatchNormDesc d{C, eps};
    auto op = be->make_batch_norm(d);
    auto rop = ref.make_batch_norm(d);
    const TensorDesc td = op->setup({shape, nullptr});
    rop->setup({shape, nullptr});
    Tensor x = random_tensor(shape, rng, -2.0f, 3.0f), g = random_tensor({C}, rng, 0.5f, 1.5f),
           b = random_tensor({C}, rng);
    Tensor bx = upload(*be, x, td), bg = upload(*be, g, {{C}, nullptr}), bb = upload(*be, b, {{C}, nullptr});
    Tensor y = be->allocate(td), mean = be->allocate(Shape{C}), var = be->allocate(Shape{C});
    Tensor ry = Tensor::empty(shape), rmean = Tensor::empty({C}), rvar = Tensor::empty({C});
    op->forward_training(bx, bg, bb, y, mean, var);
    rop->forward_training(x, g, b, ry, rmean, rvar);
    const double m = static_cast<double>(shape.numel() / C);
    check_close("training forward", host(*be, y), ry, {1e-4, 1e-4});
    check_close("batch mean", host(*be, mean), rmean, {1e-5, 1e-5});
    check_close("batch variance (biased)", host(*be, var), rvar, {1e-5, 1e-4});
    Tensor iy = be->allocate(td), riy = Tensor::empty(shape);
    Tensor rm = random_tensor({C}, rng), rv = random_tensor({C}, rng, 0.5f, 2.0f);
    op->forward_inference(bx, bg, bb, upload(*be, rm, {{C}, nullptr}), upload(*be, rv, {{C}, nullptr}), iy);
    rop->forward_inference(x, g, b, rm, rv, riy);
    check_close("inference forward", host(*be, iy), riy, {1e-5, 1e-5});
    Tensor dy = random_tensor(shape, rng);
    Tensor bdy = upload(*be, dy, td), dx = be->allocate(td), rdx = Tensor::empty(shape);
    Tensor dg0 = random_tensor({C}, rng), db0 = random_tensor({C}, rng);
    Tensor bdg = upload(*be, dg0, {{C}, nullptr}), bdb = upload(*be, db0, {{C}, nullptr});
    Tensor rdg = dg0.clone(), rdb = db0.clone();
    op->backward(bx, bdy, bg, mean, var, dx, bdg, bdb);
    rop->backward(x, dy, g, rmean, rvar, rdx, rdg, rdb);
    check_close("backward diff_src", host(*be, dx), rdx, {1e-4, 1e-3});
    check_close("backward diff_gamma (accumulated)", host(*be, bdg), rdg, sum_tolerance(m));
    check_close("backward diff_beta (accumulated)", host(*be, bdb), rdb, sum_tolerance(m));
    Tensor none, dx2 = be->allocate(td);
    op->backward(bx, bdy, bg, mean, var, dx2, none, none);
    check_close("backward data only", host(*be, dx2), rdx, {1e-4, 1e-3});
  }
}

TEST_CASE_TEMPLATE("average pooling and upsampling match the reference", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  Rng rng(11);
  // 23 -> 11 leaves the last plane outside every window (its gradient is 0); the last case has
  // overlapping windows in one dim and gaps between them in another.
  const AvgPoolDesc pool2{{2, 2, 2}, {2, 2, 2}};
  for (const auto& [s, d] :
       {std::pair{Shape{2, 8, 23, 23, 23}, pool2}, std::pair{Shape{1, 8, 39, 36, 14}, pool2},
        std::pair{Shape{2, 3, 4, 5, 6}, pool2}, std::pair{Shape{2, 3, 9, 8, 7}, AvgPoolDesc{{3, 2, 2}, {2, 3, 1}}}}) {
    INFO("avg pool " << s.to_string() << " " << d.to_string());
    auto op = be->make_avg_pool(d);
    auto rop = ref.make_avg_pool(d);
    const TensorDesc dst = op->setup({s, nullptr});
    const TensorDesc rdst = rop->setup({s, nullptr});
    REQUIRE(dst.shape == rdst.shape);
    Tensor x = random_tensor(s, rng), y = be->allocate(dst), ry = Tensor::empty(rdst.shape);
    op->forward(upload(*be, x, {s, nullptr}), y);
    rop->forward(x, ry);
    check_close("avg pool forward", host(*be, y), ry, {1e-6, 1e-5});
    Tensor dy = random_tensor(rdst.shape, rng), dx = be->allocate({s, nullptr}), rdx = Tensor::empty(s);
    op->backward(upload(*be, dy, dst), dx);
    rop->backward(dy, rdx);
    check_close("avg pool backward", host(*be, dx), rdx, {1e-6, 1e-5});
  }
  for (const auto& [s, f] :
       {std::pair{Shape{2, 64, 7, 7, 8}, Dims3{2, 2, 2}}, std::pair{Shape{2, 6, 13, 14, 9}, Dims3{2, 2, 3}},
        std::pair{Shape{1, 8, 9, 9, 8}, Dims3{6, 6, 6}}, std::pair{Shape{2, 3, 2, 3, 4}, Dims3{1, 3, 2}}}) {
    INFO("upsample " << s.to_string() << " x " << f.to_string());
    const UpsampleDesc d{f};
    auto op = be->make_upsample(d);
    auto rop = ref.make_upsample(d);
    const TensorDesc dst = op->setup({s, nullptr});
    const TensorDesc rdst = rop->setup({s, nullptr});
    Tensor x = random_tensor(s, rng), y = be->allocate(dst), ry = Tensor::empty(rdst.shape);
    op->forward(upload(*be, x, {s, nullptr}), y);
    rop->forward(x, ry);
    check_close("upsample forward (exact repeat)", host(*be, y), ry, {0, 0});
    Tensor dy = random_tensor(rdst.shape, rng), dx = be->allocate({s, nullptr}), rdx = Tensor::empty(s);
    op->backward(upload(*be, dy, dst), dx);
    rop->backward(dy, rdx);
    check_close("upsample backward", host(*be, dx), rdx, {1e-5, 1e-5});
  }
}

TEST_CASE_TEMPLATE("flat math matches the reference", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  Rng rng(3);
  const Shape s{70001};  // odd, larger than the parallel threshold
  Tensor x = random_tensor(s, rng), y = random_tensor(s, rng);
  auto both = [&](const Tensor& h) { return std::pair{upload(*be, h, {s, nullptr}), h.clone()}; };

  auto [bx, rx] = both(x);
  auto [by, ry] = both(y);
  be->axpby(0.5f, bx, -2.0f, by);
  ref.axpby(0.5f, rx, -2.0f, ry);
  check_close("axpby", host(*be, by), ry, {1e-6, 1e-6});
  {  // b = 0, as in BLAS: y is written, not read (here it holds NaN)
    Tensor nan_y = Tensor::full(s, std::numeric_limits<float>::quiet_NaN());
    auto [bn, rn] = both(nan_y);
    be->axpby(3.0f, bx, 0.0f, bn);
    ref.axpby(3.0f, rx, 0.0f, rn);
    const Tensor got = host(*be, bn);
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      REQUIRE(got.data()[i] == 3.0f * x.data()[i]);
      REQUIRE(rn.data()[i] == 3.0f * x.data()[i]);
    }
  }
  Tensor bm = be->allocate(s), rm = Tensor::empty(s);
  be->mul(bx, by, bm);
  ref.mul(rx, ry, rm);
  check_close("mul", host(*be, bm), rm, {1e-6, 1e-6});
  CHECK(be->sum_squares(bx) == doctest::Approx(ref.sum_squares(rx)).epsilon(1e-9));
  CHECK(be->sum_squares(be->allocate(Shape{0})) == 0.0);

  Tensor bad = x.clone();
  bad.data()[5] = std::nanf("");
  bad.data()[70000] = INFINITY;
  bad.data()[123] = -INFINITY;
  CHECK(be->count_nonfinite(upload(*be, bad, {s, nullptr})) == 3);
  CHECK(ref.count_nonfinite(bad) == 3);

  // Dropout: the same mask on every backend, in place too, about the right keep rate, and a
  // backward that uses the forward's mask.
  Tensor ones = Tensor::full(s, 1.0f);
  const Shape ms{static_cast<std::int64_t>(dropout_mask_floats(static_cast<std::size_t>(s.numel())))};
  Tensor bd = be->allocate(s), rd = Tensor::empty(s), bmask = be->allocate(ms), rmask = Tensor::empty(ms);
  be->dropout(upload(*be, ones, {s, nullptr}), bd, 0.2f, 42, 7, bmask);
  ref.dropout(ones, rd, 0.2f, 42, 7, rmask);
  check_close("dropout mask", host(*be, bd), rd, {0, 0});
  std::size_t kept = 0;
  for (float v : rd.values()) kept += v != 0.0f;
  CHECK(static_cast<double>(kept) / s.numel() == doctest::Approx(0.8).epsilon(0.01));
  for (float v : rd.values()) REQUIRE((v == 0.0f || std::abs(v - 1.25f) < 1e-6f));
  const Tensor hmask = host(*be, bmask);
  CHECK(std::memcmp(hmask.data(), rmask.data(), ms.numel() * sizeof(float)) == 0);
  Tensor inplace = upload(*be, x, {s, nullptr});
  be->dropout(inplace, inplace, 0.2f, 42, 7, bmask);
  Tensor rdx = Tensor::empty(s);
  ref.dropout(x, rdx, 0.2f, 42, 7, rmask);
  check_close("dropout in place", host(*be, inplace), rdx, {0, 0});
  Tensor g = random_tensor(s, rng), bg = be->allocate(s), rg = Tensor::empty(s);
  be->dropout_backward(upload(*be, g, {s, nullptr}), bg, 0.2f, bmask);
  ref.dropout_backward(g, rg, 0.2f, rmask);
  check_close("dropout backward", host(*be, bg), rg, {0, 0});
  for (std::int64_t i = 0; i < s.numel(); ++i)
    REQUIRE((rg.data()[i] == 0.0f) == (rdx.data()[i] == 0.0f || x.data()[i] == 0.0f));

  const Shape img{3, 1, 5, 6, 7};
  Tensor im = random_tensor(img, rng, 0.0f, 2.0f);
  Tensor bs = be->allocate(Shape{3, 1}), rs = Tensor::empty({3, 1});
  be->sum_per_item(upload(*be, im, {img, nullptr}), bs);
  ref.sum_per_item(im, rs);
  check_close("sum_per_item", host(*be, bs), rs, {1e-4, 1e-6});
  g = random_tensor({3, 1}, rng);
  Tensor bacc = upload(*be, im, {img, nullptr}), racc = im.clone();
  be->add_per_item(upload(*be, g, {{3, 1}, nullptr}), bacc);
  ref.add_per_item(g, racc);
  check_close("add_per_item", host(*be, bacc), racc, {1e-6, 1e-6});
  im.data()[0] = 0.0f;
  Tensor bp = be->allocate(img), rp = Tensor::empty(img);
  be->pow(upload(*be, im, {img, nullptr}), 1.0f / 0.85f, bp);
  ref.pow(im, 1.0f / 0.85f, rp);
  check_close("pow", host(*be, bp), rp, {1e-6, 1e-5});
  Tensor dd = random_tensor(img, rng), bpa = be->zeros(img), rpa = Tensor::zeros(img);
  be->pow_backward_add(upload(*be, im, {img, nullptr}), 1.0f / 0.85f, upload(*be, dd, {img, nullptr}), bpa);
  ref.pow_backward_add(im, 1.0f / 0.85f, dd, rpa);
  check_close("pow backward", host(*be, bpa), rpa, {1e-6, 1e-5});
}

TEST_CASE_TEMPLATE("optimizer updates match the reference", T, MPIGAN_TEST_BACKENDS) {
  auto be = backend_or_skip(T::name);
  if (!be) return;
  ReferenceBackend ref;
  Rng rng(5);
  const Shape s{40000};
  Tensor w = random_tensor(s, rng), g = random_tensor(s, rng), a = random_tensor(s, rng, 0.0f, 1.0f),
         b = random_tensor(s, rng, 0.0f, 1.0f);
  auto up = [&](const Tensor& h) { return upload(*be, h, {s, nullptr}); };
  for (bool nesterov : {false, true}) {
    Tensor bw = up(w), bv = up(a), rw = w.clone(), rv = a.clone();
    be->sgd_update(bw, up(g), bv, {0.1f, 0.9f, nesterov});
    ref.sgd_update(rw, g, rv, {0.1f, 0.9f, nesterov});
    check_close("sgd weights", host(*be, bw), rw, {1e-6, 1e-6});
    check_close("sgd velocity", host(*be, bv), rv, {1e-6, 1e-6});
  }
  {
    Tensor bw = up(w), bms = up(a), rw = w.clone(), rms = a.clone();
    be->rmsprop_update(bw, up(g), bms, {1e-3f, 0.9f, 1e-7f});
    ref.rmsprop_update(rw, g, rms, {1e-3f, 0.9f, 1e-7f});
    check_close("rmsprop weights", host(*be, bw), rw, {1e-6, 1e-6});
    check_close("rmsprop ms", host(*be, bms), rms, {1e-6, 1e-6});
  }
  {
    Tensor bw = up(w), bm = up(a), bv = up(b), rw = w.clone(), rm = a.clone(), rv = b.clone();
    be->adam_update(bw, up(g), bm, bv, {1e-3f, 0.9f, 0.999f, 1e-7f});
    ref.adam_update(rw, g, rm, rv, {1e-3f, 0.9f, 0.999f, 1e-7f});
    check_close("adam weights", host(*be, bw), rw, {1e-6, 1e-6});
    check_close("adam m", host(*be, bm), rm, {1e-6, 1e-6});
    check_close("adam v", host(*be, bv), rv, {1e-6, 1e-6});
  }
}

TEST_CASE_TEMPLATE("optimizer updates with a mirror: the same bits, in the weights and the mirror", T,
                   MPIGAN_TEST_BACKENDS) {
  // The mirror (a master's reply slot) may start anywhere: an odd offset exercises the scalar head
  // and tail around the streaming stores; the length is not a multiple of any vector width.
  auto be = backend_or_skip(T::name);
  if (!be) return;
  Rng rng(6);
  const std::int64_t n = 40013;
  const Shape s{n};
  Tensor w = random_tensor(s, rng), g = random_tensor(s, rng), a = random_tensor(s, rng, 0.0f, 1.0f),
         b = random_tensor(s, rng, 0.0f, 1.0f);
  auto up = [&](const Tensor& h) { return upload(*be, h, {s, nullptr}); };
  auto check = [&](const char* what, const Tensor& plain, const Tensor& mirrored, const Tensor& mirror) {
    INFO(what);
    const Tensor p = host(*be, plain), m = host(*be, mirrored), r = host(*be, mirror);
    CHECK(std::memcmp(p.data(), m.data(), static_cast<std::size_t>(n) * sizeof(float)) == 0);
    CHECK(std::memcmp(p.data(), r.data(), static_cast<std::size_t>(n) * sizeof(float)) == 0);
  };
  for (std::int64_t offset : {0, 3}) {
    CAPTURE(offset);
    Tensor backing = be->zeros(Shape{n + 16});
    Tensor mirror = Tensor::view_of(s, backing.data() + offset, backing.device());
    for (float momentum : {0.0f, 0.9f})
      for (bool nesterov : {false, true}) {
        Tensor w1 = up(w), v1 = up(a), w2 = up(w), v2 = up(a);
        be->sgd_update(w1, up(g), v1, {0.1f, momentum, nesterov});
        be->sgd_update(w2, up(g), v2, {0.1f, momentum, nesterov, &mirror});
        check("sgd", w1, w2, mirror);
      }
    {
      Tensor w1 = up(w), m1 = up(a), w2 = up(w), m2 = up(a);
      be->rmsprop_update(w1, up(g), m1, {1e-3f, 0.9f, 1e-7f});
      be->rmsprop_update(w2, up(g), m2, {1e-3f, 0.9f, 1e-7f, &mirror});
      check("rmsprop", w1, w2, mirror);
      check("rmsprop ms", m1, m2, m2);
    }
    {
      Tensor w1 = up(w), m1 = up(a), v1 = up(b), w2 = up(w), m2 = up(a), v2 = up(b);
      be->adam_update(w1, up(g), m1, v1, {1e-3f, 0.9f, 0.999f, 1e-7f});
      be->adam_update(w2, up(g), m2, v2, {1e-3f, 0.9f, 0.999f, 1e-7f, &mirror});
      check("adam", w1, w2, mirror);
      check("adam v", v1, v2, v2);
    }
  }
  Tensor wrong = be->zeros(Shape{n - 1}), w1 = up(w), m1 = up(a);
  CHECK_THROWS_WITH_AS(be->rmsprop_update(w1, up(g), m1, {1e-3f, 0.9f, 1e-7f, &wrong}), doctest::Contains("mirror"),
                       Error);
}

TEST_CASE("master update kernels: the formula's bits, in place and in the reply, at any alignment") {
  Rng rng(9);
  const std::size_t n = 40013;
  std::vector<float> w0(n), u(n);
  rng.fill_uniform(w0, -1.0f, 1.0f);
  rng.fill_uniform(u, -1.0f, 1.0f);
  for (std::size_t offset : {0, 1, 5}) {
    CAPTURE(offset);
    std::vector<float> backing(n + 32, -9.0f);
    float* mirror = backing.data() + offset;
    for (float scale : {1.0f, 0.37f}) {
      std::vector<float> w = w0, plain = w0;
      cpu::add_scaled_range(w.data(), u.data(), scale, mirror, n);
      cpu::add_scaled_range(plain.data(), u.data(), scale, nullptr, n);
      bool exact = true;
      for (std::size_t i = 0; i < n; ++i) exact = exact && w[i] == w0[i] + scale * u[i] && plain[i] == w[i];
      CHECK(exact);
      CHECK(std::memcmp(mirror, w.data(), n * sizeof(float)) == 0);
    }
    std::vector<float> c = w0;
    cpu::elastic_range(c.data(), u.data(), 0.3f, mirror, n);
    bool exact = true;
    for (std::size_t i = 0; i < n; ++i) exact = exact && c[i] == w0[i] + 0.3f * (u[i] - w0[i]);
    CHECK(exact);
    CHECK(std::memcmp(mirror, w0.data(), n * sizeof(float)) == 0);  // the centre before the move
    std::fill(backing.begin(), backing.end(), -9.0f);
    cpu::stream_copy_range(u.data(), mirror, n);
    CHECK(std::memcmp(mirror, u.data(), n * sizeof(float)) == 0);
    CHECK(backing[offset + n] == -9.0f);  // nothing written past the end
    if (offset > 0) CHECK(backing[offset - 1] == -9.0f);
  }
}

TEST_CASE("dropout kernels: the Philox mask element by element, at any range and rate") {
  // The kernel this machine dispatches to (AVX-512 where present) against the definition: element
  // i is kept iff dropout_uniform(philox_word(seed, stream, i / 2), i) >= rate. Ranges start at a
  // multiple of 32 as the backend hands them, shorter and longer than one group of 128; rates at
  // the edges of the 16-bit threshold.
  Rng rng(11);
  const std::size_t n = 4096 + 77;
  std::vector<float> x(n);
  rng.fill_uniform(x, -2.0f, 2.0f);
  for (const float rate : {0.0f, 0.2f, 0.5f, 1.0f / 65536.0f, 0.9999f, 65535.0f / 65536.0f, 0.99999f}) {
    for (const auto& [begin, end] :
         std::vector<std::pair<std::size_t, std::size_t>>{{0, n}, {32, 32 + 128}, {64, 100}, {96, n - 5}}) {
      CAPTURE(rate);
      CAPTURE(begin);
      CAPTURE(end);
      const float scale = 1.0f / (1.0f - std::min(rate, 0.5f));
      std::vector<float> y(n, -7.0f);
      std::vector<std::uint32_t> bits(n / 32 + 2, 0xDEADBEEFu);
      cpu::dropout_range(x.data(), y.data(), bits.data(), begin, end, rate, scale, 0x1234567890ABull, 0xFEDCBA98765ull);
      std::size_t wrong = 0, kept = 0;
      for (std::size_t i = begin; i < end; ++i) {
        const bool keep = dropout_uniform(philox_word(0x1234567890ABull, 0xFEDCBA98765ull, i / 2), i) >= rate;
        kept += keep;
        wrong += y[i] != (keep ? x[i] * scale : 0.0f);
        wrong += ((bits[i / 32] >> (i % 32)) & 1u) != static_cast<std::uint32_t>(keep);
      }
      CHECK(wrong == 0);
      if (end < n) CHECK(y[end] == -7.0f);  // nothing written past the end
      if (rate == 0.0f) CHECK(kept == end - begin);
      if (rate == 0.99999f) CHECK(kept == 0);
    }
  }
  // Backward from the bits at any start and end (the backend splits by elements).
  std::vector<std::uint32_t> bits(n / 32 + 1);
  for (auto& b : bits) b = rng.next_u32();
  std::vector<float> dy(n);
  rng.fill_uniform(dy, -1.0f, 1.0f);
  for (const auto& [begin, end] :
       std::vector<std::pair<std::size_t, std::size_t>>{{0, n}, {3, 19}, {5, n - 3}, {16, 48}}) {
    CAPTURE(begin);
    CAPTURE(end);
    std::vector<float> dx(n, -7.0f);
    cpu::dropout_backward_range(dy.data(), dx.data(), bits.data(), begin, end, 1.25f);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float want = i < begin || i >= end ? -7.0f : ((bits[i / 32] >> (i % 32)) & 1u ? dy[i] * 1.25f : 0.0f);
      wrong += dx[i] != want;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("copy_sum_squares_range copies and sums like sum_squares_range") {
  Rng rng(8);
  for (std::size_t n : {0, 1, 15, 16, 17, 1000, 40013}) {
    CAPTURE(n);
    std::vector<float> src(n), dst(n + 1, -7.0f);
    rng.fill_uniform(src, -3.0f, 3.0f);
    const double expected = cpu::sum_squares_range(src.data(), n);
    CHECK(cpu::copy_sum_squares_range(src.data(), dst.data(), n) == expected);
    CHECK(std::equal(src.begin(), src.end(), dst.begin()));
    CHECK(dst[n] == -7.0f);  // nothing written past the end
    double exact = 0;
    for (float x : src) exact += static_cast<double>(x) * x;
    CHECK(expected == doctest::Approx(exact).epsilon(1e-12));
  }
  // A NaN or an infinity makes the sum non-finite (how a master rejects an update).
  std::vector<float> bad(100, 1.0f), out(100);
  bad[57] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(std::isfinite(cpu::copy_sum_squares_range(bad.data(), out.data(), bad.size())));
  bad[57] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(std::isfinite(cpu::copy_sum_squares_range(bad.data(), out.data(), bad.size())));
}

TEST_CASE("host backends have no device group reducer, broadcast no id and report no device memory") {
  for (const char* name : {"reference", "cpu"}) {
    CAPTURE(name);
    auto be = make_backend(name);
    int calls = 0;
    CHECK(be->make_group_reducer(0, 2, [&](std::span<std::byte>) { ++calls; }) == nullptr);
    CHECK(calls == 0);
    Tensor t = be->allocate(Shape{1 << 16});
    CHECK(be->device_memory_peak() == 0);
  }
}

TEST_CASE("unknown backends and bad descriptors are named in the error") {
  CHECK_THROWS_WITH_AS(make_backend("tpu"), doctest::Contains("unknown backend 'tpu'"), Error);
  const Conv3dDesc d{4, 8, {3, 3, 3}};
  CHECK_THROWS_WITH_AS(d.output_shape({2, 5, 8, 8, 8}), doctest::Contains("input channels expected 4, found 5"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(d.output_shape({2, 4, 2, 8, 8}), doctest::Contains("smaller than kernel"), ShapeError);
}
