// A trained generator as an ONNX model (onnx_export.hpp), built with ONNX's own protobuf classes
// and checked with its checker (Debian's libonnx-dev).
#include "mpigan/deploy/onnx_export.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/data/preprocess.hpp"
#include "mpigan/nn/activation.hpp"
#include "mpigan/nn/batch_norm.hpp"
#include "mpigan/nn/conv3d.hpp"
#include "mpigan/nn/dense.hpp"
#include "mpigan/train/session.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#if MPIGAN_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#endif

namespace mpigan::deploy {

namespace {

/// What the vectors and the export share: the session holding the trained generator.
train::Session open_generator(const train::TrainedModel& m, const std::string& backend = "cpu") {
  train::ExperimentConfig e = m.experiment;
  e.backend = backend;
  train::Session s = train::Session::create(e, 1);
  train::load_generator(m.checkpoint, s);
  return s;
}

}  // namespace

#if MPIGAN_HAVE_ONNX

namespace {

constexpr int kOpset = 13;

/// Model units -> GeV, over xscale: the factor of the inverse preprocessing after the power.
double gev_factor(const data::Preprocess& p) {
  return data::unit_factor(p.model_units, data::Units::gev) / p.xscale;
}

/// Builds the graph: unique names, initialisers, nodes.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& g) : m_graph(g) {}

  std::string name(const std::string& base) { return base + "_" + std::to_string(m_next++); }

  std::string constant(const std::string& base, const std::vector<std::int64_t>& dims, std::span<const float> values) {
    const std::string n = name(base);
    onnx::TensorProto* t = m_graph.add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    m_parameters += static_cast<std::int64_t>(values.size());
    return n;
  }
  std::string scalar(const std::string& base, float v) { return constant(base, {}, std::span<const float>(&v, 1)); }
  std::string ints(const std::string& base, const std::vector<std::int64_t>& values) {
    const std::string n = name(base);
    onnx::TensorProto* t = m_graph.add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) t->add_int64_data(v);
    return n;
  }

  /// A node of operator @p op reading @p inputs, with one output named after @p label.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& label) {
    onnx::NodeProto* n = m_graph.add_node();
    n->set_op_type(op);
    n->set_name(label);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(name(label));
    return *n;
  }
  /// The same without attributes: its output's name.
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const std::string& label) {
    return node(op, inputs, label).output(0);
  }
  /// Renames @p n's output to @p out (a graph output).
  static void output_as(onnx::NodeProto& n, const std::string& out) { n.set_output(0, out); }

  static void attr(onnx::NodeProto& n, const std::string& key, float v) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& key, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& key, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& key, const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  void value(onnx::ValueInfoProto* v, const std::string& n, const std::vector<std::int64_t>& item_dims) {
    v->set_name(n);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = tt->mutable_shape();
    shape->add_dim()->set_dim_param("N");
    for (auto d : item_dims) shape->add_dim()->set_dim_value(d);
  }

  std::int64_t parameters() const { return m_parameters; }

 private:
  onnx::GraphProto& m_graph;
  int m_next = 0;
  std::int64_t m_parameters = 0;
};

std::vector<float> host_values(const nn::Network& net, const std::string& segment) {
  const auto idx = net.weights().find(segment);
  const auto sidx = idx ? std::nullopt : net.state().find(segment);
  MPIGAN_CHECK(idx || sidx, "export: the generator has no parameter '{}'", segment);
  const Tensor t = net.backend().to_host(idx ? net.weights().view(*idx) : net.state().view(*sidx));
  return {t.data(), t.data() + t.numel()};
}

std::vector<std::int64_t> dims_of(const Shape& s) {
  return {s.begin(), s.end()};
}

/// The generator's layers, in order, as ONNX operators from tensor @p x (shape @p in, batch 1).
std::string add_layers(GraphBuilder& b, const nn::Network& g, std::string x, Shape in) {
  std::string chain = "input";
  for (const auto& ref : g.layer_refs()) {
    const nn::Layer& l = *ref.layer;
    MPIGAN_CHECK(ref.source == chain || ref.node == chain,
                 "export: the generator is not one chain of layers (node '{}' reads '{}'); only chains export",
                 ref.node, ref.source);
    chain = ref.node;
    const Shape out = l.output_shape(in);
    const std::string kind = l.kind(), prefix = l.name() + "/";
    const auto params = l.params();
    auto param = [&](std::size_t k) {
      return b.constant(l.name() + "_" + params[k].name, dims_of(params[k].shape),
                        host_values(g, prefix + params[k].name));
    };
    if (kind == "Dense") {
      // dst = src W^T + b, W (OC, IC)
      std::vector<std::string> inputs{x, param(0)};
      if (params.size() > 1) inputs.push_back(param(1));
      auto& n = b.node("Gemm", inputs, l.name());
      GraphBuilder::attr(n, "transB", std::int64_t{1});
      if (const auto* dense = dynamic_cast<const nn::Dense*>(&l); dense && dense->gain() != 1.0f) {
        // the layer computes with gain x its stored kernel and bias: Gemm's alpha and beta
        GraphBuilder::attr(n, "alpha", dense->gain());
        GraphBuilder::attr(n, "beta", dense->gain());
      }
      x = n.output(0);
    } else if (kind == "Reshape" || kind == "Flatten") {
      std::vector<std::int64_t> target{-1};
      target.insert(target.end(), out.begin() + 1, out.end());
      x = b.op("Reshape", {x, b.ints(l.name() + "_shape", target)}, l.name());
    } else if (kind == "Conv3D") {
      const auto& d = dynamic_cast<const nn::Conv3d&>(l).desc();
      std::vector<std::string> inputs{x, param(0)};
      if (d.bias) inputs.push_back(param(1));
      auto& n = b.node("Conv", inputs, l.name());
      GraphBuilder::attr(n, "kernel_shape", std::vector<std::int64_t>{d.kernel.d, d.kernel.h, d.kernel.w});
      GraphBuilder::attr(n, "strides", std::vector<std::int64_t>{d.stride.d, d.stride.h, d.stride.w});
      GraphBuilder::attr(n, "pads",
                         std::vector<std::int64_t>{d.pad_l.d, d.pad_l.h, d.pad_l.w, d.pad_r.d, d.pad_r.h, d.pad_r.w});
      x = n.output(0);
    } else if (kind == "BatchNormalization") {
      // Inference: the running statistics (the state), as mpigan's infer phase uses them.
      const auto& d = dynamic_cast<const nn::BatchNorm3d&>(l).desc();
      const std::vector<std::int64_t> c{d.channels};
      auto& n =
          b.node("BatchNormalization",
                 {x, param(0), param(1), b.constant(l.name() + "_mean", c, host_values(g, prefix + "moving_mean")),
                  b.constant(l.name() + "_var", c, host_values(g, prefix + "moving_variance"))},
                 l.name());
      GraphBuilder::attr(n, "epsilon", d.epsilon);
      x = n.output(0);
    } else if (kind == "UpSampling3D") {
      // Every voxel repeated: nearest, asymmetric coordinates, floor - exact for integer factors.
      std::vector<float> scales{1.0f, 1.0f};
      for (int i = 2; i < 5; ++i) scales.push_back(static_cast<float>(out[i] / in[i]));
      auto& n = b.node("Resize", {x, "", b.constant(l.name() + "_scales", {5}, scales)}, l.name());
      GraphBuilder::attr(n, "mode", std::string("nearest"));
      GraphBuilder::attr(n, "coordinate_transformation_mode", std::string("asymmetric"));
      GraphBuilder::attr(n, "nearest_mode", std::string("floor"));
      x = n.output(0);
    } else if (kind == "Dropout") {
      // the identity in inference
    } else if (const auto* a = dynamic_cast<const nn::Activation*>(&l)) {
      switch (a->desc().kind) {
        case EltwiseKind::relu:
          x = b.op("Relu", {x}, l.name());
          break;
        case EltwiseKind::leaky_relu: {
          auto& n = b.node("LeakyRelu", {x}, l.name());
          GraphBuilder::attr(n, "alpha", a->desc().alpha);
          x = n.output(0);
          break;
        }
        case EltwiseKind::sigmoid:
          x = b.op("Sigmoid", {x}, l.name());
          break;
        default:
          MPIGAN_FATAL("export: layer '{}' ({}) has no ONNX form", l.name(), a->desc().to_string());
      }
    } else {
      MPIGAN_FATAL(
          "export: layer '{}' ({}) has no ONNX form; the generators' layers are Dense, Reshape, Conv3D, "
          "BatchNormalization, UpSampling3D, activations and Dropout",
          l.name(), kind);
    }
    in = out;
  }
  return x;
}

/// The generator's input from the physical conditions, as GanStep::generator_input builds it.
std::string add_conditions(GraphBuilder& b, const models::GanModel& model, const data::Preprocess& pre) {
  const std::string energy = b.op("Mul", {"energy", b.scalar("energy_scale", pre.energy_scale)}, "energy_scaled");
  if (model.angle_model) {
    auto& n = b.node("Concat", {energy, "theta", "latent"}, "condition_and_latent");  // (E/100, theta, z)
    GraphBuilder::attr(n, "axis", std::int64_t{1});
    return n.output(0);
  }
  std::string scale;  // sqrt(n) / |z|: the latent on the sphere of radius sqrt(n)
  if (model.noise_on_sphere) {
    const std::string sq = b.op("Mul", {"latent", "latent"}, "latent_squared");
    auto& sum = b.node("ReduceSum", {sq, b.ints("latent_axis", {1})}, "latent_norm2");
    GraphBuilder::attr(sum, "keepdims", std::int64_t{1});
    const std::string floor = b.op("Max", {sum.output(0), b.scalar("norm2_floor", 1e-30f)}, "latent_norm2_floored");
    const std::string ratio =
        b.op("Div", {b.scalar("latent_size", static_cast<float>(model.noise)), floor}, "sphere_ratio");
    scale = b.op("Sqrt", {ratio}, "sphere_scale");
  }
  if (model.energy_concat) {  // [E/100, z]
    const std::string z = scale.empty() ? std::string("latent") : b.op("Mul", {"latent", scale}, "latent_on_sphere");
    auto& n = b.node("Concat", {energy, z}, "generator_input");
    GraphBuilder::attr(n, "axis", std::int64_t{1});
    return n.output(0);
  }
  const std::string k = scale.empty() ? energy : b.op("Mul", {energy, scale}, "input_scale");
  return b.op("Mul", {"latent", k}, "generator_input");  // (E/100) z
}

/// The inverse preprocessing: negatives to 0, ^(1/power), model units / xscale -> GeV.
std::string add_physical(GraphBuilder& b, std::string x, const data::Preprocess& pre) {
  x = b.op("Relu", {x}, "clamp_negative");
  if (pre.power != 1.0f) x = b.op("Pow", {x, b.scalar("inverse_power", 1.0f / pre.power)}, "inverse_power");
  return b.op("Mul", {x, b.scalar("to_gev", static_cast<float>(gev_factor(pre)))}, "to_gev");
}

void add_metadata(onnx::ModelProto& model, const std::string& key, const std::string& value) {
  auto* p = model.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

std::string shape_text(const std::vector<std::int64_t>& item) {
  std::string s = "(N";
  for (auto d : item) s += ", " + std::to_string(d);
  return s + ")";
}

}  // namespace

OnnxExportSummary export_onnx(const train::TrainedModel& m, const std::string& path, const OnnxExportOptions& o) {
  check_output_file(path, "export");  // before the generator is opened and the model built
  train::Session s = open_generator(m);
  const models::GanModel& model = *s.model;
  const data::Preprocess& pre = m.experiment.data.preprocess;
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("mpigan");
  proto.set_producer_version(MPIGAN_VERSION_STRING);
  proto.set_doc_string(fmt::format("generator of experiment '{}' (model {}) from {}", m.experiment.name,
                                   m.experiment.model.name, m.checkpoint));
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(m.experiment.model.name + "_generator");
  GraphBuilder b(graph);

  OnnxExportSummary r;
  r.opset = kOpset;
  const std::vector<std::int64_t> noise{model.noise}, one{1};
  b.value(graph.add_input(), "latent", noise);
  r.inputs.push_back(
      fmt::format("latent {} z ~ N(0, 1){}", shape_text(noise),
                  model.noise_on_sphere ? ", put on the sphere of radius sqrt(noise) by the model" : ""));
  b.value(graph.add_input(), "energy", one);
  r.inputs.push_back(fmt::format("energy {} primary energy, GeV", shape_text(one)));
  if (model.angle_model) {
    b.value(graph.add_input(), "theta", one);
    r.inputs.push_back(fmt::format("theta {} polar angle, radians", shape_text(one)));
  }
  std::string x = add_conditions(b, model, pre);
  x = add_layers(b, model.generator, x, Shape{1, model.latent});
  const std::vector<std::int64_t> cells{model.image[1], model.image[2], model.image[3]};
  std::vector<std::int64_t> out_dims = o.physical ? cells : dims_of(model.image);
  const std::string out_name = o.physical ? "energies" : "image";
  if (o.physical) {
    x = add_physical(b, x, pre);
    std::vector<std::int64_t> target{-1};
    target.insert(target.end(), cells.begin(), cells.end());
    x = b.op("Reshape", {x, b.ints("cells_shape", target)}, "cells");
  }
  b.value(graph.add_output(), out_name, out_dims);
  // The last node writes the graph output.
  GraphBuilder::output_as(*graph.mutable_node(graph.node_size() - 1), out_name);
  r.outputs.push_back(
      o.physical ? fmt::format("energies {} cell energies, GeV", shape_text(out_dims))
                 : fmt::format("image {} the generator's raw output (preprocessed units)", shape_text(out_dims)));
  add_metadata(proto, "mpigan.model", m.experiment.model.name);
  add_metadata(proto, "mpigan.experiment", m.experiment.name);
  add_metadata(proto, "mpigan.latent",
               model.noise_on_sphere ? "normal, on the sphere of radius sqrt(noise)" : "normal");
  add_metadata(proto, "mpigan.output_units", o.physical ? "GeV" : "preprocessed");
  if (model.symmetrise)
    add_metadata(proto, "mpigan.symmetrise",
                 "reflect each shower in x, in y and exchange x and y (first), each at random with probability 1/2");
  add_metadata(proto, "mpigan.preprocess", pre.describe());

  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    MPIGAN_FATAL("export: ONNX's checker rejects the model of '{}': {}", m.checkpoint, e.what());
  }
  std::string bytes;
  MPIGAN_CHECK(proto.SerializeToString(&bytes), "export: the ONNX model for '{}' could not be serialized", path);
  write_file_atomically(path, bytes, "export: the ONNX model");
  r.nodes = graph.node_size();
  r.parameters = b.parameters();
  r.bytes = bytes.size();
  return r;
}

bool onnx_available() {
  return true;
}
#else

OnnxExportSummary export_onnx(const train::TrainedModel&, const std::string&, const OnnxExportOptions&) {
  MPIGAN_FATAL(
      "export: this mpigan was built without ONNX: install Debian's libonnx-dev (or another ONNX "
      "library with its CMake package) and configure the build again");
}

bool onnx_available() {
  return false;
}

#endif

void write_vectors(const train::TrainedModel& m, const std::string& path, std::int64_t events, std::uint64_t seed,
                   const OnnxExportOptions& o) {
  MPIGAN_CHECK(events > 0, "export: --vector-events must be positive, got {}", events);
  train::Session s = open_generator(m, o.backend);
  const models::GanModel& model = *s.model;
  const data::Preprocess& pre = m.experiment.data.preprocess;
  const auto& sim = m.experiment.simulate;
  const double lo = sim.enabled ? sim.energy_lo : 10.0, hi = sim.enabled ? sim.energy_hi : 500.0;
  Rng rng(seed, hash_string("export-vectors"));
  Tensor energy = Tensor::empty({events, 1}), scaled = Tensor::empty({events, 1}), theta;
  Tensor noise = Tensor::empty({events, model.noise});
  for (std::int64_t i = 0; i < events; ++i) {
    energy.data()[i] = static_cast<float>(lo * std::pow(hi / lo, rng.uniform_double()));
    scaled.data()[i] = energy.data()[i] * pre.energy_scale;
  }
  if (model.angle_model) {
    theta = Tensor::empty({events, 1});
    const double deg = std::acos(-1.0) / 180.0;
    for (float& t : theta.values()) t = static_cast<float>(rng.uniform(60.0f, 120.0f) * deg);
  }
  for (float& z : noise.values()) z = rng.normal();
  const Tensor raw = s.step->generate_from(scaled, theta, noise);
  Tensor out = o.physical ? data::postprocess_images(raw, pre, data::Units::gev) : raw;
  if (o.physical) out = out.reshaped({events, model.image[1], model.image[2], model.image[3]});

  using nlohmann::json;
  auto tensor = [](const Tensor& t) {
    json j;
    j["shape"] = std::vector<std::int64_t>(t.shape().begin(), t.shape().end());
    j["data"] = std::vector<float>(t.data(), t.data() + t.numel());
    return j;
  };
  json j;
  j["model"] = m.experiment.model.name;
  j["checkpoint"] = m.checkpoint;
  j["inputs"]["latent"] = tensor(noise);
  j["inputs"]["energy"] = tensor(energy);
  if (model.angle_model) j["inputs"]["theta"] = tensor(theta);
  j["outputs"][o.physical ? "energies" : "image"] = tensor(out);
  std::ofstream f(path);
  MPIGAN_CHECK(f, "export: cannot write '{}'", path);
  f << j.dump() << '\n';
}

}  // namespace mpigan::deploy
