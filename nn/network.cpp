// Network (network.hpp): the node DAG, its flat parameter sets, in-place planning, forward,
// backward and the layer summary.
#include "mpigan/nn/network.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/nn/init.hpp"

#include <algorithm>
#include <chrono>

namespace mpigan::nn {
namespace {

/// Runs one layer's pass @p f; with @p times, the backend's queued work finished before the clock
/// starts and waited for before it stops, the seconds added to the layer's row.
template <class F>
void run_layer(LayerTimes* times, Backend& be, const std::string& network, const Layer& l, bool backward, F&& f) {
  if (times == nullptr) {
    f();
    return;
  }
  be.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  be.synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LayerTimes::Row& r = times->row(network, l);
  (backward ? r.backward_s : r.forward_s) += s;
  ++(backward ? r.backward_calls : r.forward_calls);
}

}  // namespace

LayerTimes::Row& LayerTimes::row(const std::string& network, const Layer& l) {
  const auto [it, added] = index.try_emplace(&l, rows.size());
  if (added) rows.push_back({.network = network, .layer = l.name(), .kind = l.kind(), .options = l.describe()});
  return rows[it->second];
}

void Network::add_node(const std::string& name, const std::string& source, std::vector<std::unique_ptr<Layer>> layers,
                       bool is_output) {
  MPIGAN_CHECK(!built(), "network '{}': add_node('{}') after build()", m_name, name);
  MPIGAN_CHECK(name != "input" && find_node(name) < 0, "network '{}': node name '{}' is taken", m_name, name);
  MPIGAN_CHECK(!layers.empty(), "network '{}': node '{}' has no layers", m_name, name);
  Node n;
  n.name = name;
  n.source = source == "input" ? -1 : find_node(source);
  MPIGAN_CHECK(source == "input" || n.source >= 0, "network '{}': node '{}' reads unknown node '{}'", m_name, name,
               source);
  n.layers = std::move(layers);
  n.is_output = is_output;
  if (n.source >= 0) ++m_nodes[static_cast<std::size_t>(n.source)].consumers;
  m_nodes.push_back(std::move(n));
}

int Network::find_node(const std::string& name) const {
  for (std::size_t i = 0; i < m_nodes.size(); ++i)
    if (m_nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

void Network::build(Backend& backend, const Shape& item_shape) {
  MPIGAN_CHECK(!built(), "network '{}': build() called twice", m_name);
  MPIGAN_CHECK(!m_nodes.empty(), "network '{}': no nodes", m_name);
  m_item_shape = item_shape;
  // Shape check over the whole graph for batch 1, naming the layer that does not fit.
  const Shape in = Shape::batch_of(1, item_shape);
  std::vector<Shape> node_out(m_nodes.size());
  for (std::size_t i = 0; i < m_nodes.size(); ++i) {
    Shape s = m_nodes[i].source < 0 ? in : node_out[static_cast<std::size_t>(m_nodes[i].source)];
    for (auto& l : m_nodes[i].layers) s = l->output_shape(s);
    node_out[i] = s;
  }
  // Lay out parameters and state layer by layer.
  for (auto& node : m_nodes)
    for (auto& l : node.layers) {
      const std::size_t p0 = m_weights.segments().size(), s0 = m_state.segments().size();
      for (const auto& p : l->params()) {
        m_weights.add(l->name() + "/" + p.name, p.shape);
        m_grads.add(l->name() + "/" + p.name, p.shape);
      }
      for (const auto& s : l->state()) m_state.add(l->name() + "/" + s.name, s.shape);
      m_param_ranges.emplace_back(p0, m_weights.segments().size());
      m_state_ranges.emplace_back(s0, m_state.segments().size());
    }
  m_weights.allocate(backend);
  m_grads.allocate(backend);
  m_state.allocate(backend);
  m_backend = &backend;
  std::size_t k = 0;
  for (auto& node : m_nodes)
    for (auto& l : node.layers) {
      std::vector<Tensor> w, g, s;
      for (auto i = m_param_ranges[k].first; i < m_param_ranges[k].second; ++i) {
        w.push_back(m_weights.view(i));
        g.push_back(m_grads.view(i));
      }
      for (auto i = m_state_ranges[k].first; i < m_state_ranges[k].second; ++i) s.push_back(m_state.view(i));
      l->bind(backend, std::move(w), std::move(g), std::move(s));
      ++k;
    }
}

void Network::initialize(Rng& rng) {
  MPIGAN_CHECK(built(), "network '{}': initialize() before build()", m_name);
  std::size_t k = 0;
  for (auto& node : m_nodes)
    for (auto& l : node.layers) {
      const auto specs = l->params();
      for (std::size_t j = 0; j < specs.size(); ++j) {
        Tensor w = m_weights.view(m_param_ranges[k].first + j);
        initialize_tensor(backend(), w, specs[j], rng);
      }
      const auto states = l->state();
      for (std::size_t j = 0; j < states.size(); ++j) {
        Tensor s = m_state.view(m_state_ranges[k].first + j);
        initialize_tensor(backend(), s, states[j], rng);
      }
      ++k;
    }
}

Backend& Network::backend() const {
  MPIGAN_CHECK(m_backend != nullptr, "network '{}' used before build()", m_name);
  return *m_backend;
}

void Network::zero_grads() {
  Tensor g = m_grads.flat();
  backend().fill(g, 0.0f);
}

double Network::state_decay() const {
  double decay = 1.0;
  const Layer* first = nullptr;
  for (const auto& n : m_nodes)
    for (const auto& l : n.layers) {
      if (l->state().empty()) continue;
      if (!first) {
        first = l.get();
        decay = l->state_decay();
      }
      MPIGAN_CHECK(l->state_decay() == decay,
                   "network '{}': the state of layer '{}' decayed by {} and that of layer '{}' by {}; a distributed "
                   "run merges running statistics with one decay per network (give every BatchNormalization the "
                   "same momentum)",
                   m_name, first->name(), decay, l->name(), l->state_decay());
    }
  return decay;
}

void Network::reset_state_decay() {
  for (auto& n : m_nodes)
    for (auto& l : n.layers) l->reset_state_decay();
}

void Network::recalibrate_state(int passes, const std::function<Tensor(int)>& input, std::uint64_t seed) {
  MPIGAN_CHECK(passes > 0, "network '{}': recalibrating its statistics over {} passes; expected at least 1", m_name,
               passes);
  if (m_state.size() == 0) return;
  Backend& be = backend();
  Tensor flat = m_state.flat();
  const Tensor zeros = Tensor::zeros(flat.shape());
  std::vector<double> sum(m_state.size(), 0.0);
  for (int k = 0; k < passes; ++k) {
    // From zero, one train-phase pass leaves (1 - momentum) x each batch statistic.
    be.from_host(zeros, flat);
    reset_state_decay();
    forward(input(k), ForwardContext{Phase::train, true, seed, static_cast<std::uint64_t>(k)});
    const double kept = 1.0 - state_decay();
    MPIGAN_CHECK(kept > 0, "network '{}': its statistics have momentum 1 (they never move): nothing to recalibrate",
                 m_name);
    const Tensor h = be.to_host(flat);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += h.data()[i] / kept;
  }
  Tensor mean = Tensor::empty(flat.shape());
  for (std::size_t i = 0; i < sum.size(); ++i) mean.data()[i] = static_cast<float>(sum[i] / passes);
  be.from_host(mean, flat);
  reset_state_decay();
}

std::vector<Network::LayerRef> Network::layer_refs() const {
  std::vector<LayerRef> out;
  for (const Node& n : m_nodes)
    for (const auto& l : n.layers)
      out.push_back(
          {n.name, n.source < 0 ? std::string("input") : m_nodes[static_cast<std::size_t>(n.source)].name, l.get()});
  return out;
}

std::vector<std::string> Network::output_names() const {
  std::vector<std::string> names;
  for (const auto& n : m_nodes)
    if (n.is_output) names.push_back(n.name);
  return names;
}

void Network::plan_inplace(Node& node) {
  for (std::size_t j = 0; j < node.layers.size(); ++j) {
    Layer& l = *node.layers[j];
    if (j == 0 || !l.supports_inplace()) {
      l.set_inplace(false);
      continue;
    }
    const Layer& pred = *node.layers[j - 1];
    const auto use = pred.backward_reads_output();
    const bool ok = !pred.output_aliases_input() &&
                    (use == Layer::OutputUse::none || (use == Layer::OutputUse::sign && l.preserves_sign()));
    l.set_inplace(ok);
  }
}

void GradientWorkspaces::reserve(Backend& backend, std::size_t bytes) {
  MPIGAN_CHECK(m_backend == nullptr || m_backend == &backend,
               "gradient workspaces shared by networks on two backends; share them only on one");
  m_backend = &backend;
  if (bytes <= m_bytes) return;
  for (auto& b : m_buffers) {
    b.reset();  // free before allocating the larger one
    b = backend.allocate_storage(bytes);
  }
  m_bytes = bytes;
}

void Network::share_gradient_workspaces(const Network& other) {
  MPIGAN_CHECK(m_backend == other.m_backend, "network '{}' sharing the gradient workspaces of '{}' on another backend",
               m_name, other.m_name);
  m_workspaces = other.m_workspaces;
  if (m_planned) m_workspaces->reserve(backend(), m_workspace_elems * sizeof(float));
}

void Network::use_own_gradient_workspaces() {
  m_workspaces = std::make_shared<GradientWorkspaces>();
  if (m_planned) m_workspaces->reserve(backend(), m_workspace_elems * sizeof(float));
}

void Network::setup_for(const TensorDesc& input) {
  Backend& be = backend();
  std::size_t max_elems = input.physical_elems();
  m_output_bytes = 0;
  for (auto& node : m_nodes) {
    plan_inplace(node);
    TensorDesc d = node.source < 0 ? input : m_nodes[static_cast<std::size_t>(node.source)].out_desc;
    node.in_descs.clear();
    for (auto& l : node.layers) {
      max_elems = std::max(max_elems, d.physical_elems());
      node.in_descs.push_back(d);
      const TensorDesc out = l->setup(d);
      if (!l->inplace() && !l->output_aliases_input()) m_output_bytes += out.physical_elems() * sizeof(float);
      d = out;
    }
    max_elems = std::max(max_elems, d.physical_elems());
    node.last_desc = d;
    // Outputs leave the network canonical: the one reorder at this edge.
    node.out_desc = node.is_output ? TensorDesc{d.shape, nullptr} : d;
    if (!d.canonical() && node.is_output) node.canonical_out = be.allocate(node.out_desc);
    node.diff = be.allocate(node.out_desc);
  }
  m_workspace_elems = max_elems;
  m_workspaces->reserve(be, max_elems * sizeof(float));
  m_input_diff = be.allocate(TensorDesc{input.shape, nullptr});
  m_input_desc = input;
  m_planned = true;
}

const std::vector<Tensor>& Network::forward(const Tensor& input, const ForwardContext& ctx) {
  MPIGAN_CHECK(built(), "network '{}': forward before build()", m_name);
  MPIGAN_CHECK_SHAPE(input.shape().rank() == m_item_shape.rank() + 1 &&
                         std::equal(m_item_shape.begin(), m_item_shape.end(), input.shape().begin() + 1),
                     "network '{}': input shape expected (N, {}), found {}", m_name, m_item_shape, input.shape());
  MPIGAN_CHECK(input.canonical(), "network '{}': input must be canonical, got {}", m_name, input.desc().to_string());
  if (!m_planned || input.shape() != m_input_desc.shape) setup_for(input.desc());
  m_outputs.clear();
  for (auto& node : m_nodes) {
    const Tensor* t = node.source < 0 ? &input : &m_nodes[static_cast<std::size_t>(node.source)].out;
    for (auto& l : node.layers) run_layer(m_times, backend(), m_name, *l, false, [&] { t = &l->forward(*t, ctx); });
    if (node.out_desc.canonical() && !t->canonical()) {
      backend().reorder(*t, node.canonical_out);
      t = &node.canonical_out;
    }
    node.out = *t;
    if (node.is_output) m_outputs.push_back(node.out);
  }
  return m_outputs;
}

const Tensor& Network::backward(const std::vector<Tensor>& diff_outputs, const BackwardContext& ctx) {
  MPIGAN_CHECK(m_planned, "network '{}': backward before forward", m_name);
  Backend& be = backend();
  const auto names = output_names();
  MPIGAN_CHECK(diff_outputs.size() == names.size(), "network '{}': backward got {} output gradients, expected {}",
               m_name, diff_outputs.size(), names.size());
  std::size_t oi = 0;
  for (auto& node : m_nodes) {
    node.diff_set = false;
    if (!node.is_output) continue;
    const Tensor& d = diff_outputs[oi++];
    if (!d.defined()) continue;
    MPIGAN_CHECK_SHAPE(d.shape() == node.out_desc.shape,
                       "network '{}': gradient of output '{}' expected shape {}, found {}", m_name, node.name,
                       node.out_desc.shape, d.shape());
    be.copy(d, node.diff);
    node.diff_set = true;
  }
  bool input_diff_set = false;
  for (auto it = m_nodes.rbegin(); it != m_nodes.rend(); ++it) {
    Node& node = *it;
    if (!node.diff_set) continue;
    const bool source_wants = node.source >= 0 || ctx.need_diff_src;
    Tensor cur = node.diff;
    int ws = 0;
    if (!same_layout(node.last_desc.layout, node.out_desc.layout)) {
      Tensor in_layout = Tensor::in_storage(node.last_desc, m_workspaces->buffer(ws));
      be.reorder(cur, in_layout);
      cur = in_layout;
      ws ^= 1;
    }
    bool produced = true;
    for (std::size_t j = node.layers.size(); j-- > 0;) {
      BackwardContext lctx = ctx;
      lctx.need_diff_src = j > 0 || source_wants;
      Tensor next;
      if (lctx.need_diff_src) next = Tensor::in_storage(node.in_descs[j], m_workspaces->buffer(ws));
      run_layer(m_times, be, m_name, *node.layers[j], true, [&] { node.layers[j]->backward(cur, next, lctx); });
      cur = next;
      ws ^= 1;
      produced = lctx.need_diff_src;
    }
    if (!source_wants || !produced) continue;
    Tensor& acc = node.source < 0 ? m_input_diff : m_nodes[static_cast<std::size_t>(node.source)].diff;
    bool& set = node.source < 0 ? input_diff_set : m_nodes[static_cast<std::size_t>(node.source)].diff_set;
    if (!set) {
      be.copy(cur, acc);
      set = true;
    } else {
      be.axpby(1.0f, cur, 1.0f, acc);
    }
  }
  if (ctx.need_diff_src && !input_diff_set) be.fill(m_input_diff, 0.0f);
  return m_input_diff;
}

std::string Network::summary() const {
  std::string s = fmt::format("{:<10} {:<16} {:<20} {:<20} {:>10}  {}\n", "node", "layer", "type", "output shape",
                              "params", "options");
  std::vector<Shape> node_out(m_nodes.size());
  const Shape in = Shape::batch_of(1, m_item_shape);
  std::size_t trainable = 0, state = 0;
  for (std::size_t i = 0; i < m_nodes.size(); ++i) {
    const Node& node = m_nodes[i];
    Shape sh = node.source < 0 ? in : node_out[static_cast<std::size_t>(node.source)];
    for (const auto& l : node.layers) {
      sh = l->output_shape(sh);
      std::int64_t n = 0;
      for (const auto& p : l->params()) n += p.shape.numel();
      for (const auto& p : l->state()) state += static_cast<std::size_t>(p.shape.numel());
      trainable += static_cast<std::size_t>(n);
      std::string out = sh.to_string();
      out = "(N" + out.substr(out.find(','));  // show the batch dim as N
      s += fmt::format("{:<10} {:<16} {:<20} {:<20} {:>10}  {}\n", node.name, l->name(), l->kind(), out, n,
                       l->describe());
    }
    node_out[i] = sh;
  }
  s += fmt::format("trainable parameters: {}   non-trainable (state): {}\n", trainable, state);
  return s;
}

}  // namespace mpigan::nn
