// Shared pieces of the oneDNN CPU backend: the engine/stream context, the Layout subclass that
// carries a oneDNN memory descriptor between layers, convention conversion (in one place), and
// staging buffers for reorders at op edges.
//
// Conventions: the API's NCDHW/OIDHW are oneDNN's plain tags ncdhw/oidhw (abcde); oneDNN counts
// dilation from 0 ("no dilation" = 0) and we never dilate; padding_l/padding_r are our pad_l/pad_r.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <string>
#include <unordered_map>

namespace mpigan::cpu {

/// Engine, stream and scratchpad of one CpuBackend. oneDNN's OpenMP runtime executes
/// synchronously, one primitive at a time, so every primitive can share one scratchpad buffer:
/// primitives are created with the user scratchpad mode and run() hands them this buffer, grown
/// to the largest request. (oneDNN's library mode would allocate, and the kernel zero, fresh pages
/// for large scratchpads on every execution.)
struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  /// The data type convolutions read their inputs in: f32, or bf16 (Precision::bf16; they still
  /// accumulate and write f32).
  dnnl::memory::data_type conv_input = dnnl::memory::data_type::f32;
  /// In bf16, whether the backward data of a stride-1 convolution runs as a forward convolution
  /// (conv3d.cpp): where oneDNN's bf16 forward kernels outrun its backward ones (AMX).
  bool bf16_bwd_data_as_forward = false;

  /// Attributes every primitive is created with.
  dnnl::primitive_attr attr() const;
  /// Execute @p p with @p args plus the shared scratchpad.
  void run(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args);
  /// Execute a reorder from @p src to @p dst.
  void run_reorder(const dnnl::reorder& r, const dnnl::memory& src, const dnnl::memory& dst);

 private:
  std::shared_ptr<void> m_scratch;
  std::size_t m_scratch_bytes = 0;
};

/// A oneDNN memory descriptor as an mpigan Layout.
class DnnlLayout final : public Layout {
 public:
  explicit DnnlLayout(dnnl::memory::desc md) : m_md(std::move(md)) {}
  std::size_t physical_elems() const override { return m_md.get_size() / sizeof(float); }
  std::string name() const override;
  bool same_as(const Layout& other) const override;
  const dnnl::memory::desc& md() const { return m_md; }

 private:
  dnnl::memory::desc m_md;
};

dnnl::memory::dims to_dims(const Shape& s);
dnnl::memory::dims to_dims(const Dims3& d);
/// The plain (canonical) descriptor of a shape: a, ab, abc, abcd, abcde.
dnnl::memory::desc plain_md(const Shape& s);
dnnl::memory::desc any_md(const Shape& s, dnnl::memory::data_type t = dnnl::memory::data_type::f32);
/// The descriptor a TensorDesc stands for.
dnnl::memory::desc md_of(const TensorDesc& d);
/// A TensorDesc for @p md: canonical (layout nullptr) when md is the plain descriptor of @p shape.
TensorDesc desc_of(const Shape& shape, const dnnl::memory::desc& md);
/// Short description of a memory descriptor's format ("ncdhw", "blocked:16c").
std::string md_name(const dnnl::memory::desc& md);

dnnl::memory make_memory(const dnnl::memory::desc& md, const DnnlContext& ctx, const float* data);
dnnl::memory make_memory(const TensorDesc& d, const DnnlContext& ctx, const float* data);

/// A buffer in the descriptor a primitive wants, used when the user's tensor has another one.
/// When the two descriptors match, no buffer exists and the user's memory is used directly.
class Staging {
 public:
  Staging() = default;
  Staging(const dnnl::memory::desc& user, const dnnl::memory::desc& want, const DnnlContext& ctx);
  bool needed() const { return m_needed; }
  const dnnl::memory::desc& want() const { return m_want; }
  /// Memory to hand the primitive for input @p user_data: reorders into the buffer if needed.
  dnnl::memory in(const float* user_data, DnnlContext& ctx);
  /// Memory for the primitive to write; call out_done() after executing to copy back if needed.
  dnnl::memory out(float* user_data, DnnlContext& ctx);
  void out_done(float* user_data, DnnlContext& ctx);
  /// The staged buffer (valid when needed()).
  const dnnl::memory& buffer() const { return m_buffer; }

 private:
  bool m_needed = false;
  dnnl::memory::desc m_user, m_want;
  dnnl::memory m_buffer;
  dnnl::reorder m_to_want, m_to_user;
};

/// A reorder that adds into its destination: dst += reorder(src). For accumulating gradients
/// computed in a blocked layout into the canonical gradient buffer.
class AccumulatingReorder {
 public:
  AccumulatingReorder() = default;
  AccumulatingReorder(const dnnl::memory::desc& src, const dnnl::memory::desc& dst, const DnnlContext& ctx);
  void run(const dnnl::memory& src, float* dst_data, DnnlContext& ctx);

 private:
  dnnl::memory::desc m_dst;
  dnnl::reorder m_reorder;
};

/// Runs @p f, turning a dnnl::error into an mpigan Error that names @p what.
template <class F>
auto dnnl_call(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    MPIGAN_FATAL("oneDNN: {}: {} (status {})", what, e.what(), static_cast<int>(e.status));
  }
}

/// A primitive created on first use: the backward (or inference) primitive of an op that may only
/// ever run forward. reset() forgets it (setup() with a new input); get() creates it once, from
/// the primitive descriptor @p make_pd returns, with oneDNN errors naming "@p what @p desc".
template <class Primitive>
class LazyPrimitive {
 public:
  void reset() { m_made = false; }

  template <class Desc, class MakePd>
  const Primitive& get(const char* what, const Desc& desc, MakePd&& make_pd) {
    if (!m_made) {
      dnnl_call(std::string(what) + " " + desc.to_string(), [&] { m_primitive = Primitive(make_pd()); });
      m_made = true;
    }
    return m_primitive;
  }

 private:
  bool m_made = false;
  Primitive m_primitive;
};

}  // namespace mpigan::cpu
