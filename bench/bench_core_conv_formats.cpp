// Which memory format should the CPU backend give oneDNN's 3-D convolutions? For every
// convolution shape of the 3dgan-25 model (batch 16) and each direction (forward, backward-data,
// backward-weights), times the primitive oneDNN picks for each activation format:
//   any/any      oneDNN chooses (usually nCdhw16c blocks, padding 1-8 channels to 16)
//   ncdhw/any    plain input, output chosen
//   ndhwc/ndhwc  channels-last (what the backend uses, docs/design.md)
//   ncdhw/ncdhw  plain NCDHW
//   16c/16c      blocked by 16 channels
// and prints ms per call, GFLOP/s and the implementation ("ref" = oneDNN's reference kernel,
// not timed). This table is the reason for the backend's channels-last choice.
//
//   build/bench/mpigan_bench_core_conv_formats [--reps N]      (OMP_NUM_THREADS sets threads)
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct Shape {
  const char* name;
  memory::dim n, ic, oc, d, h, w;  // input
  memory::dim kd, kh, kw;          // kernel
  memory::dim pl[3], pr[3];        // padding before / after (TF "same" for even kernels)
};

// The 3dgan-25 convolutions (models/gan_model.cpp), batch 16.
const Shape kShapes[] = {
    {"D conv1 1->32", 16, 1, 32, 25, 25, 25, 5, 5, 5, {2, 2, 2}, {2, 2, 2}},
    {"D conv2 32->8", 16, 32, 8, 25, 25, 25, 5, 5, 5, {2, 2, 2}, {2, 2, 2}},
    {"D conv3 8->8 pad2", 16, 8, 8, 25, 25, 25, 5, 5, 5, {2, 2, 2}, {2, 2, 2}},
    {"D conv4 8->8 pad1", 16, 8, 8, 25, 25, 25, 5, 5, 5, {1, 1, 1}, {1, 1, 1}},
    {"G conv1 8->64", 16, 8, 64, 7, 7, 8, 6, 6, 8, {2, 2, 3}, {3, 3, 4}},
    {"G conv2 64->6", 16, 64, 6, 14, 14, 16, 6, 5, 8, {2, 2, 0}, {2, 2, 0}},
    {"G conv3 6->6", 16, 6, 6, 26, 28, 27, 3, 3, 8, {1, 0, 3}, {1, 0, 3}},
    {"G conv4 6->1", 16, 6, 1, 26, 26, 26, 2, 2, 2, {0, 0, 0}, {0, 0, 0}},
};

struct Format {
  const char* name;
  tag src, dst;
};
const Format kFormats[] = {{"any/any", tag::any, tag::any},
                           {"ncdhw/any", tag::ncdhw, tag::any},
                           {"ndhwc/ndhwc", tag::ndhwc, tag::ndhwc},
                           {"ncdhw/ncdhw", tag::ncdhw, tag::ncdhw},
                           {"16c/16c", tag::nCdhw16c, tag::nCdhw16c}};

double time_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up (JIT, first touch)
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

bool is_reference(const std::string& impl) {
  return impl.find("ref") != std::string::npos;
}

/// Memory for a primitive's argument, allocated by the library in the descriptor's layout.
memory make(const memory::desc& md, const dnnl::engine& eng) {
  memory m(md, eng);
  std::memset(m.get_data_handle(), 0, md.get_size());
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 2;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::dims strides{1, 1, 1};
  std::printf("%-20s %-6s %-12s %10s %10s  %s\n", "convolution", "pass", "src/dst", "ms", "GFLOP/s", "oneDNN kernel");
  for (const Shape& c : kShapes) {
    const memory::dim od = c.d + c.pl[0] + c.pr[0] - c.kd + 1, oh = c.h + c.pl[1] + c.pr[1] - c.kh + 1,
                      ow = c.w + c.pl[2] + c.pr[2] - c.kw + 1;
    const double gflop = 2.0 * static_cast<double>(c.n * c.oc * od * oh * ow * c.ic * c.kd * c.kh * c.kw) / 1e9;
    const memory::dims sd{c.n, c.ic, c.d, c.h, c.w}, wd{c.oc, c.ic, c.kd, c.kh, c.kw}, dd{c.n, c.oc, od, oh, ow};
    const memory::dims pl{c.pl[0], c.pl[1], c.pl[2]}, pr{c.pr[0], c.pr[1], c.pr[2]};
    const memory::desc bias({c.oc}, memory::data_type::f32, tag::a), w_any(wd, memory::data_type::f32, tag::any);
    for (const char* pass : {"fwd", "bwd_d", "bwd_w"}) {
      for (const Format& f : kFormats) {
        const memory::desc src(sd, memory::data_type::f32, f.src), dst(dd, memory::data_type::f32, f.dst);
        try {
          dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             src, w_any, bias, dst, strides, pl, pr);
          dnnl::convolution_forward::primitive_desc fpd(fd, eng);
          std::string impl;
          std::function<void()> run;
          std::vector<memory> keep;
          if (std::strcmp(pass, "fwd") == 0) {
            impl = fpd.impl_info_str();
            auto a = make(fpd.src_desc(), eng), w = make(fpd.weights_desc(), eng), b = make(fpd.bias_desc(), eng),
                 o = make(fpd.dst_desc(), eng);
            dnnl::convolution_forward p(fpd);
            run = [=, &s] {
              p.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, o}});
              s.wait();
            };
          } else if (std::strcmp(pass, "bwd_d") == 0) {
            dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src, w_any, dst, strides, pl,
                                                     pr);
            dnnl::convolution_backward_data::primitive_desc bpd(bd, eng, fpd);
            impl = bpd.impl_info_str();
            auto ds = make(bpd.diff_src_desc(), eng), w = make(bpd.weights_desc(), eng),
                 dy = make(bpd.diff_dst_desc(), eng);
            dnnl::convolution_backward_data p(bpd);
            run = [=, &s] {
              p.execute(s, {{DNNL_ARG_DIFF_SRC, ds}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, dy}});
              s.wait();
            };
          } else {
            dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct, src, w_any, bias, dst,
                                                        strides, pl, pr);
            dnnl::convolution_backward_weights::primitive_desc bpd(bd, eng, fpd);
            impl = bpd.impl_info_str();
            auto a = make(bpd.src_desc(), eng), dw = make(bpd.diff_weights_desc(), eng),
                 db = make(bpd.diff_bias_desc(), eng), dy = make(bpd.diff_dst_desc(), eng);
            dnnl::convolution_backward_weights p(bpd);
            run = [=, &s] {
              p.execute(
                  s,
                  {{DNNL_ARG_SRC, a}, {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, db}, {DNNL_ARG_DIFF_DST, dy}});
              s.wait();
            };
          }
          if (is_reference(impl)) {
            std::printf("%-20s %-6s %-12s %10s %10s  %s\n", c.name, pass, f.name, "-", "-", impl.c_str());
            continue;
          }
          const double ms = time_ms(run, reps);
          std::printf("%-20s %-6s %-12s %10.1f %10.1f  %s\n", c.name, pass, f.name, ms, gflop / (ms / 1e3),
                      impl.c_str());
        } catch (const dnnl::error& e) {
          std::printf("%-20s %-6s %-12s %10s %10s  unsupported (%s)\n", c.name, pass, f.name, "-", "-", e.what());
        }
      }
    }
  }
  return 0;
}
