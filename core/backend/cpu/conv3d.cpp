// oneDNN 3D convolution: forward, backward data, backward weights.
//
// Layouts: activations and their gradients are channels-last (ndhwc) around every convolution,
// weights in whatever oneDNN prefers ('any', reordered from canonical OIDHW at this edge). Why:
// the 3DGAN's convolutions have few channels (1, 6, 8), and oneDNN 2.6's blocked (nCdhw16c)
// kernels pad 6 or 8 channels to 16 and fall back to slow gemm or reference kernels for several
// backward passes, while its channels-last kernels (brgconv forward, jit backward) stay fast for
// every shape of the model. Measured per shape and direction in docs/performance.md; the one
// exception is a single input channel, whose backward-data runs as gemm on ncdhw (4x faster than
// the channels-last kernel there). MPIGAN_CPU_CONV_LAYOUT=any restores oneDNN's own choice.
// The output keeps the chosen layout (a DnnlLayout) and the next layers work in it; when the
// incoming layout differs, a staging reorder runs at this edge. Backward primitives are created
// on first use (a generator run only for inference never creates them), with the forward hint.
//
// Precision::bf16 (DnnlContext::conv_input): each primitive reads its inputs (src, weights,
// diff_dst) as bf16 and writes f32 (dst, diff_src, diff_weights, diff_bias). The user's tensors
// stay f32; the staging reorders at this edge round them to bf16 (nearest even). In bf16 the
// backward data of a stride-1 convolution runs as the forward convolution of diff_dst with the
// weights transposed (O <-> I) and reversed in space (backward_data_as_forward) on CPUs with AMX,
// where oneDNN 2.6's bf16 forward kernels are 2-3x faster than its backward-data ones (on an
// AVX512-BF16 EPYC without AMX the native backward kernel is as fast or faster; cpu_backend.cpp
// chooses, MPIGAN_CPU_BWD_DATA=native|forward overrides). The exception is
// a convolution of a single input channel (the discriminator's first), which runs in f32 in every
// direction: its bf16 kernels are slower than the f32 ones on every CPU measured (3dgan-25's d_conv1
// at batch 64 on 2 cores with AMX: 598 against 354 ms per step; 0.93x on an AVX512-BF16 EPYC).
#include "mpigan/backend/cpu/cpu_ops.hpp"

#include "mpigan/backend/cpu/dnnl_common.hpp"
#include "mpigan/core/env.hpp"

#include <Eigen/Core>

#include <string>
#include <vector>

namespace mpigan::cpu {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;
using tag = dnnl::memory::format_tag;

/// The activation layout convolutions ask for (see the header comment).
tag activation_tag() {
  static const EnvChoice<tag> kLayouts[] = {
      {"channels_last", "ndhwc around every convolution, the default", tag::ndhwc},
      {"any", "oneDNN's own choice per convolution", tag::any},
      {"blocked", "nCdhw16c, oneDNN's blocked layout", tag::nCdhw16c}};
  static const tag t = env_choice("MPIGAN_CPU_CONV_LAYOUT", kLayouts, tag::ndhwc);
  return t;
}

dnnl::memory::desc act_md(const Shape& s, tag t = activation_tag(),
                          dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  return {to_dims(s), type, t};
}

class CpuConv3d final : public Conv3dOp {
 public:
  CpuConv3d(const Conv3dDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    const Shape dst_shape = m_desc.output_shape(src.shape);
    m_src = src;
    m_plan = {};
    const std::string what = "conv3d " + m_desc.to_string() + " src " + src.to_string();
    dnnl_call(what, [&] {
      const auto in = input_type();
      auto w_any = any_md(m_desc.weights_shape(), in);
      auto b_md = m_desc.bias ? plain_md({m_desc.oc}) : dnnl::memory::desc();
      m_plan.fwd_desc = std::make_unique<dnnl::convolution_forward::desc>(
          prop_kind::forward_training, algorithm::convolution_direct, act_md(src.shape, activation_tag(), in), w_any,
          b_md, act_md(dst_shape), to_dims(m_desc.stride), to_dims(m_desc.pad_l), to_dims(m_desc.pad_r));
      m_plan.fwd_pd = dnnl::convolution_forward::primitive_desc(*m_plan.fwd_desc, m_ctx.attr(), m_ctx.engine);
      m_plan.fwd = dnnl::convolution_forward(m_plan.fwd_pd);
      m_plan.src_fwd = Staging(md_of(src), m_plan.fwd_pd.src_desc(), m_ctx);
      m_plan.w_fwd = Staging(plain_md(m_desc.weights_shape()), m_plan.fwd_pd.weights_desc(), m_ctx);
    });
    m_dst = desc_of(dst_shape, m_plan.fwd_pd.dst_desc());
    return m_dst;
  }

  void forward(const Tensor& src, const Tensor& weights, const Tensor& bias, Tensor& dst) override {
    check_src(src);
    auto src_m = m_plan.src_fwd.in(src.data(), m_ctx);
    auto w_m = m_plan.w_fwd.in(weights.data(), m_ctx);
    auto dst_m = make_memory(m_dst, m_ctx, dst.data());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, w_m}, {DNNL_ARG_DST, dst_m}};
    if (m_desc.bias) args.insert({DNNL_ARG_BIAS, make_memory(plain_md({m_desc.oc}), m_ctx, bias.data())});
    m_ctx.run(m_plan.fwd, args);
  }

  void backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) override {
    ensure_backward_data();
    auto& p = m_plan;
    if (p.bwd_as_fwd) {
      // diff_src = conv_fwd(diff_dst, W') with W'[i, o, k] = W[o, i, K - 1 - k] (see ensure_backward_data)
      flip_transpose(weights.data(), p.w_flipped.data());
      auto w_m = p.w_bwd_data.in(p.w_flipped.data(), m_ctx);
      auto dd_m = p.diff_dst_bwd_data.in(diff_dst.data(), m_ctx);
      auto ds_m = p.diff_src_bwd_data.out(diff_src.data(), m_ctx);
      m_ctx.run(p.bwd_fwd, {{DNNL_ARG_SRC, dd_m}, {DNNL_ARG_WEIGHTS, w_m}, {DNNL_ARG_DST, ds_m}});
      p.diff_src_bwd_data.out_done(diff_src.data(), m_ctx);
      return;
    }
    // Reuse the forward's reordered weights when the formats agree (same weights: see backend.hpp).
    dnnl::memory w_m = (p.bwd_data_pd.weights_desc() == p.fwd_pd.weights_desc() && p.w_fwd.needed())
                           ? p.w_fwd.buffer()
                           : p.w_bwd_data.in(weights.data(), m_ctx);
    auto dd_m = p.diff_dst_bwd_data.in(diff_dst.data(), m_ctx);
    auto ds_m = p.diff_src_bwd_data.out(diff_src.data(), m_ctx);
    m_ctx.run(p.bwd_data, {{DNNL_ARG_DIFF_DST, dd_m}, {DNNL_ARG_WEIGHTS, w_m}, {DNNL_ARG_DIFF_SRC, ds_m}});
    p.diff_src_bwd_data.out_done(diff_src.data(), m_ctx);
  }

  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights, Tensor& diff_bias) override {
    check_src(src);
    ensure_backward_weights();
    auto& p = m_plan;
    auto src_m = p.src_bwd_weights.in(src.data(), m_ctx);
    auto dd_m = p.diff_dst_bwd_weights.in(diff_dst.data(), m_ctx);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src_m}, {DNNL_ARG_DIFF_DST, dd_m}, {DNNL_ARG_DIFF_WEIGHTS, p.dw_buffer}};
    if (m_desc.bias) args.insert({DNNL_ARG_DIFF_BIAS, p.db_buffer});
    m_ctx.run(p.bwd_weights, args);
    p.dw_accumulate.run(p.dw_buffer, diff_weights.data(), m_ctx);
    if (m_desc.bias && diff_bias.defined()) {
      Eigen::Map<Eigen::VectorXf>(diff_bias.data(), m_desc.oc) +=
          Eigen::Map<const Eigen::VectorXf>(static_cast<const float*>(p.db_buffer.get_data_handle()), m_desc.oc);
    }
  }

 private:
  void check_src(const Tensor& src) const {
    MPIGAN_CHECK_SHAPE(src.shape() == m_src.shape && same_layout(src.layout(), m_src.layout),
                       "conv3d {}: src expected {} (as planned by setup), found {}", m_desc.to_string(),
                       m_src.to_string(), src.desc().to_string());
  }

  /// The type the primitives read their inputs in: the context's precision, except for a single
  /// input channel, which stays f32 (see the header comment).
  dnnl::memory::data_type input_type() const {
    return m_desc.ic == 1 ? dnnl::memory::data_type::f32 : m_ctx.conv_input;
  }

  /// @p w (O, I, KD, KH, KW) into @p out (I, O, KD, KH, KW), each kernel reversed in all three axes.
  void flip_transpose(const float* w, float* out) const {
    const std::int64_t kd = m_desc.kernel[0], kh = m_desc.kernel[1], kw = m_desc.kernel[2], k = kd * kh * kw;
    for (std::int64_t o = 0; o < m_desc.oc; ++o)
      for (std::int64_t i = 0; i < m_desc.ic; ++i) {
        const float* from = w + (o * m_desc.ic + i) * k;
        float* to = out + (i * m_desc.oc + o) * k;
        for (std::int64_t q = 0; q < k; ++q) to[k - 1 - q] = from[q];
      }
  }

  /// Whether the backward data runs as a forward convolution of diff_dst with the flipped,
  /// transposed weights: in bf16 where the backend chose it (DnnlContext::bf16_bwd_data_as_forward;
  /// in fp32 the forward form is slower), stride 1, and padding below the kernel (the transposed
  /// problem's padding K - 1 - pad is then >= 0).
  bool backward_data_as_forward() const {
    if (!m_ctx.bf16_bwd_data_as_forward || input_type() != dnnl::memory::data_type::bf16 ||
        activation_tag() == tag::any)
      return false;
    for (int i = 0; i < 3; ++i)
      if (m_desc.stride[i] != 1 || m_desc.pad_l[i] > m_desc.kernel[i] - 1 || m_desc.pad_r[i] > m_desc.kernel[i] - 1)
        return false;
    return true;
  }

  void ensure_backward_data() {
    auto& p = m_plan;
    if (p.has_bwd_data) return;
    if (backward_data_as_forward()) {
      dnnl_call("conv3d backward data as forward " + m_desc.to_string(), [&] {
        const auto in = input_type();
        const Shape wt{m_desc.ic, m_desc.oc, m_desc.kernel[0], m_desc.kernel[1], m_desc.kernel[2]};
        const Dims3& k = m_desc.kernel;
        const Dims3 pl{k.d - 1 - m_desc.pad_l.d, k.h - 1 - m_desc.pad_l.h, k.w - 1 - m_desc.pad_l.w};
        const Dims3 pr{k.d - 1 - m_desc.pad_r.d, k.h - 1 - m_desc.pad_r.h, k.w - 1 - m_desc.pad_r.w};
        dnnl::convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                          act_md(m_dst.shape, activation_tag(), in), any_md(wt, in),
                                          dnnl::memory::desc(), act_md(m_src.shape), to_dims(m_desc.stride),
                                          to_dims(pl), to_dims(pr));
        auto pd = dnnl::convolution_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
        p.bwd_fwd = dnnl::convolution_forward(pd);
        p.w_flipped.assign(static_cast<std::size_t>(wt.numel()), 0.0f);
        p.w_bwd_data = Staging(plain_md(wt), pd.weights_desc(), m_ctx);
        p.diff_dst_bwd_data = Staging(md_of(m_dst), pd.src_desc(), m_ctx);
        p.diff_src_bwd_data = Staging(md_of(m_src), pd.dst_desc(), m_ctx);
      });
      p.bwd_as_fwd = true;
      p.has_bwd_data = true;
      return;
    }
    dnnl_call("conv3d backward data " + m_desc.to_string(), [&] {
      // A single input channel: gemm on ncdhw (see the header comment; f32, as input_type() says).
      const bool gemm = m_desc.ic == 1 && activation_tag() != tag::any;
      const auto in = input_type();
      const tag t = gemm ? tag::ncdhw : activation_tag();
      dnnl::convolution_backward_data::desc d(algorithm::convolution_direct, act_md(m_src.shape, t),
                                              any_md(m_desc.weights_shape(), in), act_md(m_dst.shape, t, in),
                                              to_dims(m_desc.stride), to_dims(m_desc.pad_l), to_dims(m_desc.pad_r));
      p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(d, m_ctx.attr(), m_ctx.engine, p.fwd_pd);
      p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
      p.w_bwd_data = Staging(plain_md(m_desc.weights_shape()), p.bwd_data_pd.weights_desc(), m_ctx);
      p.diff_dst_bwd_data = Staging(md_of(m_dst), p.bwd_data_pd.diff_dst_desc(), m_ctx);
      p.diff_src_bwd_data = Staging(md_of(m_src), p.bwd_data_pd.diff_src_desc(), m_ctx);
    });
    p.has_bwd_data = true;
  }

  void ensure_backward_weights() {
    auto& p = m_plan;
    if (p.has_bwd_weights) return;
    dnnl_call("conv3d backward weights " + m_desc.to_string(), [&] {
      auto b_md = m_desc.bias ? plain_md({m_desc.oc}) : dnnl::memory::desc();
      const auto in = input_type();
      // bf16 weight gradients of 32+ input channels (a multiple of 16): oneDNN's own (blocked)
      // layout, whose kernel is faster there than the channels-last one (3dgan-25's d_conv2, 32 -> 8
      // channels on 25^3: 50 against 68 ms per call at batch 16 on an AVX512-BF16 EPYC); the
      // staging reorders that round to bf16 write that layout instead. fp32 keeps channels-last.
      const bool blocked = in == dnnl::memory::data_type::bf16 && activation_tag() == tag::ndhwc && m_desc.ic >= 32 &&
                           m_desc.ic % 16 == 0;
      const tag t = blocked ? tag::any : activation_tag();
      dnnl::convolution_backward_weights::desc d(algorithm::convolution_direct, act_md(m_src.shape, t, in),
                                                 any_md(m_desc.weights_shape()), b_md, act_md(m_dst.shape, t, in),
                                                 to_dims(m_desc.stride), to_dims(m_desc.pad_l), to_dims(m_desc.pad_r));
      p.bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(d, m_ctx.attr(), m_ctx.engine, p.fwd_pd);
      p.bwd_weights = dnnl::convolution_backward_weights(p.bwd_weights_pd);
      p.src_bwd_weights = Staging(md_of(m_src), p.bwd_weights_pd.src_desc(), m_ctx);
      p.diff_dst_bwd_weights = Staging(md_of(m_dst), p.bwd_weights_pd.diff_dst_desc(), m_ctx);
      p.dw_buffer = dnnl::memory(p.bwd_weights_pd.diff_weights_desc(), m_ctx.engine);
      p.dw_accumulate =
          AccumulatingReorder(p.bwd_weights_pd.diff_weights_desc(), plain_md(m_desc.weights_shape()), m_ctx);
      if (m_desc.bias) p.db_buffer = dnnl::memory(plain_md({m_desc.oc}), m_ctx.engine);
    });
    p.has_bwd_weights = true;
  }

  struct Plan {
    std::unique_ptr<dnnl::convolution_forward::desc> fwd_desc;
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_forward fwd;
    Staging src_fwd, w_fwd;

    bool has_bwd_data = false;
    bool bwd_as_fwd = false;  ///< backward data as a forward convolution (backward_data_as_forward)
    dnnl::convolution_forward bwd_fwd;
    std::vector<float> w_flipped;
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
    dnnl::convolution_backward_data bwd_data;
    Staging w_bwd_data, diff_dst_bwd_data, diff_src_bwd_data;

    bool has_bwd_weights = false;
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
    dnnl::convolution_backward_weights bwd_weights;
    Staging src_bwd_weights, diff_dst_bwd_weights;
    dnnl::memory dw_buffer, db_buffer;
    AccumulatingReorder dw_accumulate;
  };

  Conv3dDesc m_desc;
  DnnlContext& m_ctx;
  TensorDesc m_src, m_dst;
  Plan m_plan;
};

}  // namespace

std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuConv3d>(d, ctx);
}

}  // namespace mpigan::cpu
