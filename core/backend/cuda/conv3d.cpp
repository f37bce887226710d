// cuDNN 3D convolution: forward, backward data, backward weights (+ bias).
//
// Plan (setup, once per input shape; up to kMaxPlans shapes are kept, so a layer that alternates
// between two batch sizes does not re-plan): the padding decomposition (conv3d_plan.hpp), the
// cuDNN tensor/filter/convolution descriptors (5D, NCDHW/OIDHW packed, cross-correlation,
// dilation 1), the algorithm of each direction (cudnnFind* benchmarks, or cudnnGet*_v7
// heuristics; filtered by the workspace limit and, on request, determinism), and the workspace
// reservation. forward/backward only pad, execute and crop.
//
// Conventions: our pad_l/pad_r per side -> cuDNN's symmetric padding + explicit zeros (see
// conv3d_plan.hpp); math type CUDNN_FMA_MATH (strict fp32) or, with MPIGAN_CUDA_TF32=1,
// CUDNN_TENSOR_OP_MATH and the math type the chosen algorithm reports. backward_data overwrites
// diff_src (beta = 0); backward_weights accumulates into diff_weights/diff_bias (beta = 1).
// Setup plans all three directions: setup is the one place that may benchmark and allocate.
// With MPIGAN_CUDA_CONV_API=graph|measured each direction may run through cuDNN's graph API instead
// (conv3d_graph.hpp) on the same padded problem; the bias stays with the legacy calls.
// Precision::bf16 (Settings::bf16): every direction a graph engine runs in bf16 takes the graph API
// (whatever the measurement), its two inputs rounded to bfloat16 copies in the workspace (after
// the padded src: x16 | w16 | y16, then the engine's workspace), channels-last (NDHWC, transposed
// by to_bf16_swap01) unless MPIGAN_CUDA_BF16_LAYOUT=channels_first; its output written in
// float32, or in bfloat16 where no engine writes float32, into the staging copy where it is bf16
// or channels-last and from there widened and transposed back (from_swap01, from_bf16); a
// direction without such an engine runs in fp32 (a warning says which). The bias and its gradient
// stay fp32.
#include "mpigan/backend/cuda/conv3d_graph.hpp"
#include "mpigan/backend/cuda/conv3d_plan.hpp"
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/error.hpp"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace mpigan::cuda {
namespace {

constexpr std::size_t kMaxPlans = 4;
constexpr std::size_t align256(std::size_t b) {
  return (b + 255) / 256 * 256;
}

ConvDescPtr make_conv_desc(const Dims3& pad, const Dims3& stride, cudnnMathType_t math) {
  int pad_a[3], stride_a[3];
  const int dilation_a[3] = {1, 1, 1};  // our "no dilation" is cuDNN's dilation 1
  for (int i = 0; i < 3; ++i) {
    pad_a[i] = to_int(pad[i], "conv padding");
    stride_a[i] = to_int(stride[i], "conv stride");
  }
  cudnnConvolutionDescriptor_t raw = nullptr;
  MPIGAN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&raw));
  ConvDescPtr desc(raw);
  MPIGAN_CUDNN_CHECK(
      cudnnSetConvolutionNdDescriptor(raw, 3, pad_a, stride_a, dilation_a, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  MPIGAN_CUDNN_CHECK(cudnnSetConvolutionMathType(raw, math));
  return desc;
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH:
      return "fma";
    default:
      return "?";
  }
}

/// The first (fastest by measurement or heuristic) usable result: succeeded, within the workspace
/// limit, deterministic if required, and in strict fp32 not a tensor-op variant (the descriptor
/// keeps CUDNN_FMA_MATH; a result listed for tensor-op math would not be what runs, or would not
/// run). Throws listing every candidate when none qualifies.
template <class Perf>
const Perf* first_usable(const std::vector<Perf>& results, int returned, const Settings& s, const std::string& what) {
  for (int i = 0; i < returned; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > s.workspace_limit) continue;
    if (s.deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    const bool tensor_op = r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (!s.tf32 && tensor_op) continue;
    if (spdlog::should_log(spdlog::level::debug)) {
      std::string all;
      for (int j = 0; j < returned; ++j) {
        const Perf& c = results[static_cast<std::size_t>(j)];
        if (c.status == CUDNN_STATUS_SUCCESS)
          all += fmt::format(" {}:{:.3f}ms/{}MiB/{}", static_cast<int>(c.algo), c.time, c.memory >> 20,
                             math_name(c.mathType));
      }
      spdlog::debug("cuda conv3d {}: algo {} ({:.3f} ms measured, {} MiB, math {}); candidates{}", what,
                    static_cast<int>(r.algo), r.time, r.memory >> 20, math_name(r.mathType), all);
    }
    return &r;
  }
  return nullptr;
}

template <class Perf>
const Perf& pick(const std::vector<Perf>& results, int returned, const Settings& s, const std::string& what) {
  if (const Perf* r = first_usable(results, returned, s, what)) return *r;
  std::string list;
  for (int i = 0; i < returned; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    list += fmt::format(
        "\n  algo {}: {}, workspace {} bytes, {}, math {}", static_cast<int>(r.algo), cudnnGetErrorString(r.status),
        r.memory, r.determinism == CUDNN_DETERMINISTIC ? "deterministic" : "non-deterministic", math_name(r.mathType));
  }
  MPIGAN_FATAL(
      "cuda conv3d {}: no usable cuDNN algorithm (workspace limit {} MiB{}{}; MPIGAN_CUDA_WORKSPACE_MB, "
      "MPIGAN_CUDA_DETERMINISTIC and MPIGAN_CUDA_TF32 change the filter); candidates:{}",
      what, s.workspace_limit >> 20, s.deterministic ? ", deterministic only" : "", s.tf32 ? "" : ", fp32 math only",
      list.empty() ? " none" : list);
}

class CudaConv3d final : public Conv3dOp {
 public:
  CudaConv3d(const Conv3dDesc& d, Context& ctx) : m_desc(d), m_ctx(ctx) {
    bool ok = d.ic >= 1 && d.oc >= 1;
    for (int i = 0; i < 3; ++i) ok = ok && d.kernel[i] >= 1 && d.stride[i] >= 1 && d.pad_l[i] >= 0 && d.pad_r[i] >= 0;
    MPIGAN_CHECK(ok, "cuda conv3d {}: channels, kernel and stride must be >= 1 and padding >= 0", d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "conv3d");
    m_ctx.activate();
    m_plan = nullptr;
    for (auto& p : m_plans)
      if (p->pad.src == src.shape) m_plan = p.get();
    if (!m_plan) {
      if (m_plans.size() == kMaxPlans) m_plans.erase(m_plans.begin());
      m_plans.push_back(make_plan(src.shape));
      m_plan = m_plans.back().get();
    }
    m_ctx.reserve_workspace(m_plan->pad_bytes + m_plan->max_ws());
    return {m_plan->dst, nullptr};
  }

  void forward(const Tensor& src, const Tensor& weights, const Tensor& bias, Tensor& dst) override {
    const Plan& p = planned();
    require_device(src, p.pad.src, "conv3d", "src");
    require_device(weights, m_desc.weights_shape(), "conv3d", "weights");
    require_device(dst, p.dst, "conv3d", "dst");
    if (m_desc.bias) require_device(bias, {m_desc.oc}, "conv3d", "bias");
    m_ctx.activate();
    auto* ws = static_cast<char*>(m_ctx.workspace(p.pad_bytes + p.fwd_ws));
    const float* x = padded_src(p, src, ws);
    const float one = 1.0f, zero = 0.0f;
    const Staged b = staged(p, ws);
    const bool staged_out = p.g_fwd && staged_result(*p.g_fwd);
    void* out = staged_out ? static_cast<void*>(b.y) : dst.data();
    if (p.bf16 && p.g_fwd && GraphConv::accepts(b.x, b.w, out)) {
      to_operand(*p.g_fwd, x, b.x, p.pad.padded_src);
      to_operand(*p.g_fwd, weights.data(), b.w, m_desc.weights_shape());
      p.g_fwd->execute(m_ctx, b.x, b.w, out, b.graph_ws);
      if (staged_out) from_operand(*p.g_fwd, b.y, dst.data(), p.dst, false);
    } else if (p.g_fwd && !p.bf16 && GraphConv::accepts(x, weights.data(), dst.data()))
      p.g_fwd->execute(m_ctx, const_cast<float*>(x), const_cast<float*>(weights.data()), dst.data(), ws + p.pad_bytes);
    else
      MPIGAN_CUDNN_CHECK(cudnnConvolutionForward(m_ctx.cudnn(), &one, p.x.get(), x, p.w.get(), weights.data(),
                                                 p.conv_fwd.get(), p.fwd_algo, ws + p.pad_bytes, p.fwd_ws, &zero,
                                                 p.y.get(), dst.data()));
    if (m_desc.bias)
      MPIGAN_CUDNN_CHECK(cudnnAddTensor(m_ctx.cudnn(), &one, p.bias.get(), bias.data(), &one, p.y.get(), dst.data()));
  }

  void backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) override {
    const Plan& p = planned();
    require_device(diff_dst, p.dst, "conv3d", "diff_dst");
    require_device(weights, m_desc.weights_shape(), "conv3d", "weights");
    require_device(diff_src, p.pad.src, "conv3d", "diff_src");
    m_ctx.activate();
    auto* ws = static_cast<char*>(m_ctx.workspace(p.pad_bytes + p.bwd_data_ws));
    // With explicit padding cuDNN writes the gradient of the padded input into the workspace and
    // the crop keeps the part that belongs to src.
    float* dx = p.pad.explicit_padding ? reinterpret_cast<float*>(ws) : diff_src.data();
    const float one = 1.0f, zero = 0.0f;
    const Staged b = staged(p, ws);
    const bool staged_out = p.g_bwd_data && staged_result(*p.g_bwd_data);
    void* out = staged_out ? static_cast<void*>(b.x) : dx;
    if (p.bf16 && p.g_bwd_data && GraphConv::accepts(out, b.w, b.y)) {
      to_operand(*p.g_bwd_data, diff_dst.data(), b.y, p.dst);
      to_operand(*p.g_bwd_data, weights.data(), b.w, m_desc.weights_shape());
      p.g_bwd_data->execute(m_ctx, out, b.w, b.y, b.graph_ws);
      if (staged_out) from_operand(*p.g_bwd_data, b.x, dx, p.pad.padded_src, false);
    } else if (p.g_bwd_data && !p.bf16 && GraphConv::accepts(dx, weights.data(), diff_dst.data()))
      p.g_bwd_data->execute(m_ctx, dx, const_cast<float*>(weights.data()), const_cast<float*>(diff_dst.data()),
                            ws + p.pad_bytes);
    else
      MPIGAN_CUDNN_CHECK(cudnnConvolutionBackwardData(m_ctx.cudnn(), &one, p.w.get(), weights.data(), p.y.get(),
                                                      diff_dst.data(), p.conv_bwd_data.get(), p.bwd_data_algo,
                                                      ws + p.pad_bytes, p.bwd_data_ws, &zero, p.x.get(), dx));
    if (p.pad.explicit_padding) kernels::crop(m_ctx.stream(), p.pad.pad_geometry(), dx, diff_src.data());
  }

  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights, Tensor& diff_bias) override {
    const Plan& p = planned();
    require_device(src, p.pad.src, "conv3d", "src");
    require_device(diff_dst, p.dst, "conv3d", "diff_dst");
    require_device(diff_weights, m_desc.weights_shape(), "conv3d", "diff_weights");
    const bool with_bias = m_desc.bias && diff_bias.defined();
    if (with_bias) require_device(diff_bias, {m_desc.oc}, "conv3d", "diff_bias");
    m_ctx.activate();
    auto* ws = static_cast<char*>(m_ctx.workspace(p.pad_bytes + p.bwd_filter_ws));
    // Padded again rather than kept from forward: src may have changed in between (in-place
    // layers), and one pad is cheap next to the convolution.
    const float* x = padded_src(p, src, ws);
    const float one = 1.0f, zero = 0.0f;
    char* g_dw = ws + p.pad_bytes + p.g_bwd_filter_ws;  // the graph's dW, added to diff_weights below
    const Staged b = staged(p, ws);
    // the weight gradient goes to the staging buffer (added from there with from_operand) where it
    // is bf16 or channels-last, else to g_dw (added with cudnnAddTensor)
    const bool staged_dw = p.g_bwd_filter && staged_result(*p.g_bwd_filter);
    if (p.bf16 && p.g_bwd_filter && GraphConv::accepts(b.x, staged_dw ? static_cast<void*>(b.w) : g_dw, b.y)) {
      to_operand(*p.g_bwd_filter, x, b.x, p.pad.padded_src);
      to_operand(*p.g_bwd_filter, diff_dst.data(), b.y, p.dst);
      if (staged_dw) {
        p.g_bwd_filter->execute(m_ctx, b.x, b.w, b.y, b.graph_ws);
        from_operand(*p.g_bwd_filter, b.w, diff_weights.data(), m_desc.weights_shape(), true);
      } else {
        p.g_bwd_filter->execute(m_ctx, b.x, g_dw, b.y, b.graph_ws);
        MPIGAN_CUDNN_CHECK(
            cudnnAddTensor(m_ctx.cudnn(), &one, p.dw.get(), g_dw, &one, p.dw.get(), diff_weights.data()));
      }
    } else if (p.g_bwd_filter && !p.bf16 && GraphConv::accepts(x, g_dw, diff_dst.data())) {
      p.g_bwd_filter->execute(m_ctx, const_cast<float*>(x), g_dw, const_cast<float*>(diff_dst.data()),
                              ws + p.pad_bytes);
      MPIGAN_CUDNN_CHECK(cudnnAddTensor(m_ctx.cudnn(), &one, p.dw.get(), g_dw, &one, p.dw.get(), diff_weights.data()));
    } else if (p.wt) {
      // conv3d_plan.hpp, WgradAsForward: swap the operands' leading axes, convolve forward, add
      // the result with its leading axes swapped back.
      const WgradAsForward& t = *p.wt;
      char* at = ws + p.pad_bytes;
      auto* in = reinterpret_cast<float*>(at);
      auto* filter = reinterpret_cast<float*>(at + p.wt_in_bytes);
      auto* out = reinterpret_cast<float*>(at + p.wt_in_bytes + p.wt_filter_bytes);
      char* conv_ws = at + p.wt_in_bytes + p.wt_filter_bytes + p.wt_out_bytes;
      kernels::swap01(m_ctx.stream(), t.src_to_in(), x, in, false);
      kernels::swap01(m_ctx.stream(), t.dy_to_filter(), diff_dst.data(), filter, false);
      MPIGAN_CUDNN_CHECK(cudnnConvolutionForward(m_ctx.cudnn(), &one, p.wt_in.get(), in, p.wt_filter.get(), filter,
                                                 p.wt_conv.get(), p.wt_algo, conv_ws, p.wt_conv_ws, &zero,
                                                 p.wt_out.get(), out));
      kernels::swap01(m_ctx.stream(), t.out_to_dw(), out, diff_weights.data(), true);
    } else {
      MPIGAN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(m_ctx.cudnn(), &one, p.x.get(), x, p.y.get(), diff_dst.data(),
                                                        p.conv_bwd_filter.get(), p.bwd_filter_algo, ws + p.pad_bytes,
                                                        p.bwd_filter_ws, &one, p.w.get(), diff_weights.data()));
    }
    if (with_bias)
      MPIGAN_CUDNN_CHECK(cudnnConvolutionBackwardBias(m_ctx.cudnn(), &one, p.y.get(), diff_dst.data(), &one,
                                                      p.bias.get(), diff_bias.data()));
  }

 private:
  struct Plan {
    ConvPadPlan pad;
    Shape dst;
    std::size_t pad_bytes = 0;  ///< workspace bytes for the padded src / its gradient (0 if none)
    TensorDescPtr x, y, bias;   ///< x describes the padded src (== src without explicit padding)
    FilterDescPtr w;
    ConvDescPtr conv_fwd, conv_bwd_data, conv_bwd_filter;
    cudnnConvolutionFwdAlgo_t fwd_algo{};
    cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
    std::size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
    std::size_t max_ws() const { return std::max({fwd_ws, bwd_data_ws, bwd_filter_ws}); }
    // The weight gradient as a forward convolution (conv3d_plan.hpp), set when chosen: its operands,
    // result and cuDNN workspace follow the padded src in the workspace (bwd_filter_ws is their sum).
    std::optional<WgradAsForward> wt;
    TensorDescPtr wt_in, wt_out;
    FilterDescPtr wt_filter;
    ConvDescPtr wt_conv;
    cudnnConvolutionFwdAlgo_t wt_algo{};
    std::size_t wt_in_bytes = 0, wt_filter_bytes = 0, wt_out_bytes = 0, wt_conv_ws = 0;
    float wt_ms = -1.0f;
    // The graph API's plan of a direction, set where chosen (then it runs instead of the legacy call).
    std::shared_ptr<const GraphConv> g_fwd, g_bwd_data, g_bwd_filter;
    // The graph's weight gradient goes to the workspace after its own (g_bwd_filter_ws bytes) and
    // is added to the accumulator with dw, the weights as a tensor.
    std::size_t g_bwd_filter_ws = 0;
    TensorDescPtr dw;
    // bf16: the bfloat16 copies of the operands, after the padded src in the workspace (their
    // bytes, each 256-aligned; all zero in fp32), then a graph engine's own workspace. Channels-last
    // copies (Settings::bf16_channels_last) hold the written operand too, in float32 where an
    // engine writes that: 4 bytes per element then. A direction with no channels-last bf16 engine
    // takes channels-first copies (GraphConv::channels_last() says which layout each plan has).
    bool bf16 = false, channels_last = false;
    std::size_t x16_bytes = 0, w16_bytes = 0, y16_bytes = 0;
    std::size_t b16_bytes() const { return x16_bytes + w16_bytes + y16_bytes; }
  };

  /// Where a direction's bf16 operands and its graph engine's workspace lie in the workspace @p ws.
  struct Staged {
    std::uint16_t *x, *w, *y;
    char* graph_ws;
  };
  static Staged staged(const Plan& p, char* ws) {
    char* at = ws + p.pad_bytes;
    return {reinterpret_cast<std::uint16_t*>(at), reinterpret_cast<std::uint16_t*>(at + p.x16_bytes),
            reinterpret_cast<std::uint16_t*>(at + p.x16_bytes + p.w16_bytes), at + p.b16_bytes()};
  }

  /// The swap of a 5D shape (N, C, D, H, W) to its channels-last copy (N, DHW, C), and back.
  static Swap01Geometry to_channels_last(const Shape& s) { return {s[1], s[2] * s[3] * s[4], 1, s[0]}; }
  static Swap01Geometry from_channels_last(const Shape& s) { return {s[2] * s[3] * s[4], s[1], 1, s[0]}; }

  /// Whether @p g's written operand goes to a staging copy (bf16, or channels-last) rather than in place.
  static bool staged_result(const GraphConv& g) { return g.channels_last() || g.output_bf16(); }

  /// @p src (float32, NCDHW, of @p shape) rounded to the bf16 copy @p dst in @p g's layout.
  void to_operand(const GraphConv& g, const float* src, std::uint16_t* dst, const Shape& shape) const {
    if (g.channels_last())
      kernels::to_bf16_swap01(m_ctx.stream(), to_channels_last(shape), src, dst);
    else
      kernels::to_bf16(m_ctx.stream(), src, dst, static_cast<std::size_t>(shape.numel()));
  }

  /// @p g's written operand @p src (in its type and layout, of @p shape) into @p dst (float32,
  /// NCDHW), added to it with @p accumulate.
  void from_operand(const GraphConv& g, const void* src, float* dst, const Shape& shape, bool accumulate) const {
    if (g.channels_last()) {
      kernels::from_swap01(m_ctx.stream(), from_channels_last(shape), src, g.output_bf16(), dst, accumulate);
      return;
    }
    // channels-first: only a bf16 result is staged (a float32 one is written in place)
    MPIGAN_CHECK(g.output_bf16(), "cuda conv3d {}: a float32 channels-first result is never staged",
                 m_desc.to_string());
    kernels::from_bf16(m_ctx.stream(), static_cast<const std::uint16_t*>(src), dst,
                       static_cast<std::size_t>(shape.numel()), accumulate);
  }

  const Plan& planned() const {
    MPIGAN_CHECK(m_plan != nullptr, "cuda conv3d {}: forward/backward called before setup()", m_desc.to_string());
    return *m_plan;
  }

  const float* padded_src(const Plan& p, const Tensor& src, char* ws) {
    if (!p.pad.explicit_padding) return src.data();
    auto* padded = reinterpret_cast<float*>(ws);
    kernels::pad(m_ctx.stream(), p.pad.pad_geometry(), src.data(), padded);
    return padded;
  }

  std::unique_ptr<Plan> make_plan(const Shape& src) {
    auto p = std::make_unique<Plan>();
    p->pad = plan_conv_padding(m_desc, src);
    p->dst = m_desc.output_shape(src);
    if (p->pad.explicit_padding)
      p->pad_bytes = align256(static_cast<std::size_t>(p->pad.padded_src.numel()) * sizeof(float));
    if (m_ctx.settings().bf16) {
      p->bf16 = true;
      p->channels_last = m_ctx.settings().bf16_channels_last;
      const std::size_t element = p->channels_last ? sizeof(float) : sizeof(std::uint16_t);
      p->x16_bytes = align256(static_cast<std::size_t>(p->pad.padded_src.numel()) * element);
      p->w16_bytes = align256(static_cast<std::size_t>(m_desc.weights_shape().numel()) * element);
      p->y16_bytes = align256(static_cast<std::size_t>(p->dst.numel()) * element);
    }
    p->x = make_tensor_desc(p->pad.padded_src);
    p->y = make_tensor_desc(p->dst);
    p->bias = make_tensor_desc({1, m_desc.oc, 1, 1, 1});
    p->w = make_filter_desc(m_desc.weights_shape());
    const cudnnMathType_t math = m_ctx.settings().tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    p->conv_fwd = make_conv_desc(p->pad.sym, m_desc.stride, math);
    p->conv_bwd_data = make_conv_desc(p->pad.sym, m_desc.stride, math);
    p->conv_bwd_filter = make_conv_desc(p->pad.sym, m_desc.stride, math);

    // cuDNN must agree with our output extent (it does for symmetric padding; a mismatch would be
    // a bug in the decomposition).
    const std::string what = m_desc.to_string() + " src " + src.to_string();
    check_output(p->conv_fwd, p->x, p->w, p->dst, what);
    choose_forward(*p, what);
    choose_backward_data(*p, what);
    choose_backward_filter(*p, what);
    return p;
  }

  /// That cuDNN's output shape for (@p x, @p w, @p conv) is @p expected.
  static void check_output(const ConvDescPtr& conv, const TensorDescPtr& x, const FilterDescPtr& w,
                           const Shape& expected, const std::string& what) {
    int out[5];
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv.get(), x.get(), w.get(), 5, out));
    for (int i = 0; i < 5; ++i)
      MPIGAN_CHECK(out[i] == expected[i], "cuda conv3d {}: cuDNN output dim {} is {}, expected {}", what, i, out[i],
                   expected[i]);
  }

  /// cuDNN's forward algorithms for (@p x, @p w, @p conv, @p y), measured (find) or ranked by its
  /// heuristics, best first.
  std::vector<cudnnConvolutionFwdAlgoPerf_t> forward_candidates(const ConvDescPtr& conv, const TensorDescPtr& x,
                                                                const FilterDescPtr& w, const TensorDescPtr& y) {
    int max_count = 0, returned = 0;
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(m_ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
    if (m_ctx.settings().conv_algo == Settings::ConvAlgo::find)
      MPIGAN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(m_ctx.cudnn(), x.get(), w.get(), conv.get(), y.get(),
                                                              max_count, &returned, perf.data()));
    else
      MPIGAN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(m_ctx.cudnn(), x.get(), w.get(), conv.get(), y.get(),
                                                                max_count, &returned, perf.data()));
    perf.resize(static_cast<std::size_t>(returned));
    return perf;
  }

  void choose_forward(Plan& p, const std::string& what) {
    const Settings& s = m_ctx.settings();
    const auto perf = forward_candidates(p.conv_fwd, p.x, p.w, p.y);
    const auto& r = pick(perf, static_cast<int>(perf.size()), s, what + " forward");
    p.fwd_algo = r.algo;
    if (s.tf32) MPIGAN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_fwd.get(), r.mathType));
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(m_ctx.cudnn(), p.x.get(), p.w.get(), p.conv_fwd.get(),
                                                               p.y.get(), p.fwd_algo, &p.fwd_ws));
    p.g_fwd = consider_graph(p, ConvDirection::forward, r.time, what, p.fwd_ws);
  }

  void choose_backward_data(Plan& p, const std::string& what) {
    const Settings& s = m_ctx.settings();
    int max_count = 0, returned = 0;
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(m_ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
    if (s.conv_algo == Settings::ConvAlgo::find)
      MPIGAN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
          m_ctx.cudnn(), p.w.get(), p.y.get(), p.conv_bwd_data.get(), p.x.get(), max_count, &returned, perf.data()));
    else
      MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          m_ctx.cudnn(), p.w.get(), p.y.get(), p.conv_bwd_data.get(), p.x.get(), max_count, &returned, perf.data()));
    const auto& r = pick(perf, returned, s, what + " backward data");
    p.bwd_data_algo = r.algo;
    if (s.tf32) MPIGAN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_bwd_data.get(), r.mathType));
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        m_ctx.cudnn(), p.w.get(), p.y.get(), p.conv_bwd_data.get(), p.x.get(), p.bwd_data_algo, &p.bwd_data_ws));
    p.g_bwd_data = consider_graph(p, ConvDirection::backward_data, r.time, what, p.bwd_data_ws);
  }

  void choose_backward_filter(Plan& p, const std::string& what) {
    const Settings& s = m_ctx.settings();
    int max_count = 0, returned = 0;
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(m_ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
    if (s.conv_algo == Settings::ConvAlgo::find)
      MPIGAN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
          m_ctx.cudnn(), p.x.get(), p.y.get(), p.conv_bwd_filter.get(), p.w.get(), max_count, &returned, perf.data()));
    else
      MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          m_ctx.cudnn(), p.x.get(), p.y.get(), p.conv_bwd_filter.get(), p.w.get(), max_count, &returned, perf.data()));
    const auto& r = pick(perf, returned, s, what + " backward weights");
    p.bwd_filter_algo = r.algo;
    if (s.tf32) MPIGAN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_bwd_filter.get(), r.mathType));
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        m_ctx.cudnn(), p.x.get(), p.y.get(), p.conv_bwd_filter.get(), p.w.get(), p.bwd_filter_algo, &p.bwd_filter_ws));
    const std::size_t legacy_ws = p.bwd_filter_ws;
    consider_wgrad_as_forward(p, what, r.time);
    p.g_bwd_filter = consider_graph(p, ConvDirection::backward_weights, p.wt ? p.wt_ms : r.time, what, p.bwd_filter_ws);
    if (p.g_bwd_filter) {
      // the legacy algorithm stays the fallback for operands the graph plan does not accept
      p.wt.reset();
      p.g_bwd_filter_ws = align256(p.b16_bytes() + p.g_bwd_filter->workspace());
      // the fp32 dW buffer after the engine's workspace, where the result is not staged (backward_weights)
      const bool staged_dw = staged_result(*p.g_bwd_filter);
      const std::size_t dw_bytes =
          staged_dw ? 0 : align256(static_cast<std::size_t>(m_desc.weights_shape().numel()) * sizeof(float));
      p.bwd_filter_ws = std::max(p.g_bwd_filter_ws + dw_bytes, legacy_ws);
      p.dw = make_tensor_desc(m_desc.weights_shape());
    }
  }

  /// The graph API's plan for @p direction of @p p where the settings choose it over the legacy
  /// call, which takes @p legacy_ms as measured (negative: not measured); @p ws, the legacy call's
  /// workspace, becomes the larger of the two (the legacy call stays the fallback for operands the
  /// plan does not accept). With ConvApi::measured it must be faster by measurement.
  std::shared_ptr<const GraphConv> consider_graph(const Plan& p, ConvDirection direction, float legacy_ms,
                                                  const std::string& what, std::size_t& ws) {
    const Settings& s = m_ctx.settings();
    if (s.conv_api == Settings::ConvApi::legacy) return nullptr;
    if (!p.bf16 && s.conv_api == Settings::ConvApi::measured && s.conv_algo != Settings::ConvAlgo::find) return nullptr;
    GraphConvProblem problem;
    problem.direction = direction;
    problem.x = p.pad.padded_src;
    problem.w = m_desc.weights_shape();
    problem.y = p.dst;
    problem.pad = p.pad.sym;
    problem.stride = m_desc.stride;
    problem.bf16 = p.bf16;
    problem.channels_last = p.channels_last;
    auto g = GraphConv::get(m_ctx, problem, what);
    if (!g && problem.channels_last) {
      // no bf16 engine for the channels-last copies: the channels-first ones (the staging, sized
      // for float32 copies, holds them too)
      problem.channels_last = false;
      g = GraphConv::get(m_ctx, problem, what);
      if (g)
        spdlog::info("cuda conv3d {} {}: no bf16 engine for channels-last operands; channels-first copies", what,
                     direction_name(direction));
    }
    if (!g && p.bf16) {
      spdlog::warn("cuda conv3d {} {}: no engine of cuDNN's graph API runs it in bf16; it runs in fp32", what,
                   direction_name(direction));
      return nullptr;
    }
    if (!g) return nullptr;
    if (p.bf16) {
      // bf16 was asked for: the graph plan whatever the fp32 legacy call measured
      ws = std::max(ws, p.b16_bytes() + g->workspace());
      return g;
    }
    if (s.conv_api == Settings::ConvApi::measured && !(g->measured_ms() >= 0 && g->measured_ms() < legacy_ms))
      return nullptr;
    spdlog::debug("cuda conv3d {} {}: graph API {} ({:.3f} ms against legacy {:.3f} ms)", what,
                  direction_name(direction), g->engine(), g->measured_ms(), legacy_ms);
    ws = std::max(ws, g->workspace());
    return g;
  }

  /// Switches @p p's weight gradient to the forward convolution of the transposed problem where
  /// MPIGAN_CUDA_WGRAD forces it, or where cudnnFind measures it at most 0.8 of @p legacy_ms (the
  /// margin pays the three axis swaps). Heuristic algorithm choice has no measurements to compare:
  /// there the legacy algorithm stays unless forced.
  void consider_wgrad_as_forward(Plan& p, const std::string& what, float legacy_ms) {
    const Settings& s = m_ctx.settings();
    if (s.wgrad == Settings::Wgrad::legacy) return;
    if (s.wgrad == Settings::Wgrad::measured && s.conv_algo != Settings::ConvAlgo::find) return;
    p.wt = plan_wgrad_as_forward(m_desc, p.pad);
    if (!p.wt) return;  // strided
    const WgradAsForward& t = *p.wt;
    p.wt_in = make_tensor_desc(t.in);
    p.wt_out = make_tensor_desc(t.out);
    p.wt_filter = make_filter_desc(t.filter);
    const cudnnMathType_t math = s.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    p.wt_conv = make_conv_desc(p.pad.sym, Dims3{1, 1, 1}, math);
    const std::string as_forward = what + " backward weights as forward";
    check_output(p.wt_conv, p.wt_in, p.wt_filter, t.out, as_forward);
    const auto perf = forward_candidates(p.wt_conv, p.wt_in, p.wt_filter, p.wt_out);
    const int returned = static_cast<int>(perf.size());
    const auto* r = s.wgrad == Settings::Wgrad::forward ? &pick(perf, returned, s, as_forward)
                                                        : first_usable(perf, returned, s, as_forward);
    const bool faster = r != nullptr && r->time >= 0.0f && r->time <= 0.8f * legacy_ms;
    if (s.wgrad == Settings::Wgrad::measured && !faster) {
      p.wt.reset();
      return;
    }
    p.wt_algo = r->algo;
    p.wt_ms = r->time;
    if (s.tf32) MPIGAN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.wt_conv.get(), r->mathType));
    MPIGAN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        m_ctx.cudnn(), p.wt_in.get(), p.wt_filter.get(), p.wt_conv.get(), p.wt_out.get(), p.wt_algo, &p.wt_conv_ws));
    p.wt_in_bytes = align256(static_cast<std::size_t>(t.in.numel()) * sizeof(float));
    p.wt_filter_bytes = align256(static_cast<std::size_t>(t.filter.numel()) * sizeof(float));
    p.wt_out_bytes = align256(static_cast<std::size_t>(t.out.numel()) * sizeof(float));
    p.bwd_filter_ws = p.wt_in_bytes + p.wt_filter_bytes + p.wt_out_bytes + p.wt_conv_ws;
    spdlog::debug("cuda conv3d {}: weight gradient as a forward convolution, algo {} ({:.3f} ms against {:.3f} ms)",
                  what, static_cast<int>(p.wt_algo), r->time, legacy_ms);
  }

  Conv3dDesc m_desc;
  Context& m_ctx;
  std::vector<std::unique_ptr<Plan>> m_plans;
  Plan* m_plan = nullptr;
};

}  // namespace

std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& d, Context& ctx) {
  return std::make_unique<CudaConv3d>(d, ctx);
}

}  // namespace mpigan::cuda
