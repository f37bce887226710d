// oneDNN plumbing shared by the CPU backend's ops: context, memory descriptors, layouts, staging.
#include "mpigan/backend/cpu/dnnl_common.hpp"

#include <algorithm>
#include <cstdlib>

namespace mpigan::cpu {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::primitive_attr DnnlContext::attr() const {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void DnnlContext::run(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args) {
  const_dnnl_primitive_desc_t pd = nullptr;
  dnnl::error::wrap_c_api(dnnl_primitive_get_primitive_desc(p.get(), &pd), "could not query a primitive descriptor");
  const dnnl_memory_desc_t* smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (smd != nullptr) {
    const dnnl::memory::desc md(*smd);
    const std::size_t bytes = md.get_size();
    if (bytes > 0) {
      if (bytes > m_scratch_bytes) {
        void* q = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        MPIGAN_CHECK(q != nullptr, "oneDNN scratchpad allocation of {} bytes failed", bytes);
        m_scratch.reset(q, [](void* x) { std::free(x); });
        m_scratch_bytes = bytes;
      }
      args.insert({DNNL_ARG_SCRATCHPAD, dnnl::memory(md, engine, m_scratch.get())});
    }
  }
  p.execute(stream, args);
}

void DnnlContext::run_reorder(const dnnl::reorder& r, const dnnl::memory& src, const dnnl::memory& dst) {
  run(r, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

dnnl::memory::dims to_dims(const Shape& s) {
  return dnnl::memory::dims(s.begin(), s.end());
}
dnnl::memory::dims to_dims(const Dims3& d) {
  return {d.d, d.h, d.w};
}

dnnl::memory::desc plain_md(const Shape& s) {
  static const tag kPlain[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  MPIGAN_CHECK(s.rank() >= 1 && s.rank() <= 5, "oneDNN backend: unsupported rank {} ({})", s.rank(), s);
  return {to_dims(s), dt::f32, kPlain[s.rank()]};
}

dnnl::memory::desc any_md(const Shape& s, dt t) {
  return {to_dims(s), t, tag::any};
}

dnnl::memory::desc md_of(const TensorDesc& d) {
  if (d.canonical()) return plain_md(d.shape);
  const auto* l = dynamic_cast<const DnnlLayout*>(d.layout.get());
  MPIGAN_CHECK(l != nullptr, "cpu backend: tensor layout '{}' belongs to another backend", d.layout->name());
  return l->md();
}

TensorDesc desc_of(const Shape& shape, const dnnl::memory::desc& md) {
  if (md == plain_md(shape)) return {shape, nullptr};
  return {shape, std::make_shared<DnnlLayout>(md)};
}

std::string md_name(const dnnl::memory::desc& md) {
  const auto& blk = md.data.format_desc.blocking;
  const int nd = md.data.ndims;
  if (md.data.format_kind != dnnl_blocked) return "non-blocked";
  // Outer order: dims sorted by decreasing stride; letters a.. for dims, uppercase when blocked.
  std::vector<int> order(nd);
  for (int i = 0; i < nd; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string s;
  for (int i : order) {
    bool blocked = false;
    for (int k = 0; k < blk.inner_nblks; ++k) blocked |= blk.inner_idxs[k] == i;
    s += static_cast<char>((blocked ? 'A' : 'a') + i);
  }
  for (int k = 0; k < blk.inner_nblks; ++k)
    s += std::to_string(blk.inner_blks[k]) + static_cast<char>('a' + blk.inner_idxs[k]);
  if (md.data_type() == dt::bf16) s += ":bf16";
  return s;
}

std::string DnnlLayout::name() const {
  return "onednn:" + md_name(m_md);
}

bool DnnlLayout::same_as(const Layout& other) const {
  const auto* o = dynamic_cast<const DnnlLayout*>(&other);
  return o && o->m_md == m_md;
}

dnnl::memory make_memory(const dnnl::memory::desc& md, const DnnlContext& ctx, const float* data) {
  return dnnl::memory(md, ctx.engine, const_cast<float*>(data));
}

dnnl::memory make_memory(const TensorDesc& d, const DnnlContext& ctx, const float* data) {
  return make_memory(md_of(d), ctx, data);
}

Staging::Staging(const dnnl::memory::desc& user, const dnnl::memory::desc& want, const DnnlContext& ctx)
    : m_needed(user != want), m_user(user), m_want(want) {
  if (!m_needed) return;
  dnnl_call("staging reorder " + md_name(user) + " -> " + md_name(want), [&] {
    m_buffer = dnnl::memory(want, ctx.engine);
    m_to_want = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, user, ctx.engine, want, ctx.attr()));
    m_to_user = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, want, ctx.engine, user, ctx.attr()));
  });
}

dnnl::memory Staging::in(const float* user_data, DnnlContext& ctx) {
  if (!m_needed) return make_memory(m_user, ctx, user_data);
  auto user = make_memory(m_user, ctx, user_data);
  ctx.run_reorder(m_to_want, user, m_buffer);
  return m_buffer;
}

dnnl::memory Staging::out(float* user_data, DnnlContext& ctx) {
  return m_needed ? m_buffer : make_memory(m_user, ctx, user_data);
}

void Staging::out_done(float* user_data, DnnlContext& ctx) {
  if (!m_needed) return;
  auto user = make_memory(m_user, ctx, user_data);
  ctx.run_reorder(m_to_user, m_buffer, user);
}

AccumulatingReorder::AccumulatingReorder(const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                                         const DnnlContext& ctx)
    : m_dst(dst) {
  dnnl_call("accumulating reorder " + md_name(src) + " -> " + md_name(dst), [&] {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr = ctx.attr();
    attr.set_post_ops(ops);
    m_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, src, ctx.engine, dst, attr));
  });
}

void AccumulatingReorder::run(const dnnl::memory& src, float* dst_data, DnnlContext& ctx) {
  auto dst = make_memory(m_dst, ctx, dst_data);
  ctx.run_reorder(m_reorder, src, dst);
}

}  // namespace mpigan::cpu
