// Network: a small DAG of layer chains ("nodes") with named outputs, owning one contiguous
// ParameterSet for its weights, one for their gradients and one for non-trainable state.
//
//   node "trunk":  input -> Conv3D -> ... -> Flatten
//   node "fake":   trunk -> Dense -> Sigmoid         (output)
//   node "ecal":   input -> SumCells                 (output)
//
// Nodes run in the order added; a node reads the output of "input" or of an earlier node.
// Memory plan (per input shape, made in setup): each layer owns its output, except element-wise
// layers that run in place over their predecessor's output when that is safe (Layer::OutputUse);
// gradients flow through two ping-pong workspaces sized to the largest tensor, plus one
// accumulator per node output that several nodes read. Networks whose backward passes never
// overlap (a GAN's generator and discriminator) can share the workspaces: sized to the larger
// network, they save the smaller one's pair. Parameter gradients accumulate (+=);
// zero_grads() is the caller's job.
#pragma once

#include "mpigan/core/parameter_set.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/nn/layer.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpigan::nn {

/// Wall time of every layer's forward and backward, summed over the passes a Network ran while
/// this was attached (Network::set_layer_times). The network waits for the backend before and
/// after each layer, so asynchronous backends (cuda) are timed per layer, at the price of those
/// waits: for finding where a step's time goes (`mpigan bench step --profile`), not for timing it.
struct LayerTimes {
  struct Row {
    std::string network, layer, kind, options;
    double forward_s = 0.0, backward_s = 0.0;
    std::int64_t forward_calls = 0, backward_calls = 0;
  };
  std::vector<Row> rows;  // in the order the layers first ran forward
  std::map<const Layer*, std::size_t> index;
  Row& row(const std::string& network, const Layer& l);
};

/// The two buffers a network's backward alternates between, each as large as the largest tensor
/// of the networks using it. Shared by networks on one backend whose backward passes never run at
/// the same time; a network takes the buffers anew at each backward, so growing them for one
/// network does not leave another holding freed memory.
class GradientWorkspaces {
 public:
  /// Each buffer at least @p bytes on @p backend (reallocated when larger; never shrinks).
  void reserve(Backend& backend, std::size_t bytes);
  const std::shared_ptr<Storage>& buffer(int i) const { return m_buffers[i]; }
  /// Bytes of both buffers together.
  std::size_t bytes() const { return 2 * m_bytes; }

 private:
  Backend* m_backend = nullptr;
  std::size_t m_bytes = 0;
  std::shared_ptr<Storage> m_buffers[2];
};

class Network {
 public:
  explicit Network(std::string name) : m_name(std::move(name)) {}
  Network(Network&&) noexcept = default;
  Network& operator=(Network&&) noexcept = default;

  const std::string& name() const { return m_name; }

  /// Add a chain of layers reading @p source ("input" or an earlier node). Output nodes are the
  /// network's outputs, in the order added.
  void add_node(const std::string& name, const std::string& source, std::vector<std::unique_ptr<Layer>> layers,
                bool is_output = false);

  /// Allocate the parameter buffers on @p backend for inputs of item shape @p item_shape (the
  /// input shape without its batch dim), bind every layer, and check all shapes.
  void build(Backend& backend, const Shape& item_shape);
  /// Keras initialisers for every parameter, drawn from @p rng in a fixed order.
  void initialize(Rng& rng);
  bool built() const { return m_backend != nullptr; }

  /// Forward pass; returns the outputs (canonical tensors, owned by the network) in output order.
  const std::vector<Tensor>& forward(const Tensor& input, const ForwardContext& ctx);
  /// Backward pass from the gradients of the outputs (in output order; an undefined tensor means
  /// that output gets no gradient). Returns dL/d(input) when ctx.need_diff_src (canonical).
  const Tensor& backward(const std::vector<Tensor>& diff_outputs, const BackwardContext& ctx);

  ParameterSet& weights() { return m_weights; }
  const ParameterSet& weights() const { return m_weights; }
  ParameterSet& grads() { return m_grads; }
  ParameterSet& state() { return m_state; }
  const ParameterSet& state() const { return m_state; }
  void zero_grads();
  /// The decay of the state since reset_state_decay() (Layer::state_decay): one number for the
  /// whole network, since every forward pass updates every layer's statistics once. Throws
  /// Error if the layers with state disagree (moving averages of different momenta); 1
  /// for a network without state.
  double state_decay() const;
  void reset_state_decay();

  /// Re-estimate the running statistics (BatchNorm) for the weights as they are: each statistic
  /// becomes the mean of its batch values over @p passes train-phase forward passes of the inputs
  /// input(0), input(1), ... (the "bn_update" of stochastic weight averaging). For weights whose
  /// statistics lag them, e.g. an asynchronous master's, which follow weights up to N updates old.
  void recalibrate_state(int passes, const std::function<Tensor(int)>& input, std::uint64_t seed);

  std::vector<std::string> output_names() const;
  /// A layer as the network runs it: its node, the node it reads ("input" or an earlier node's
  /// name) and the layer. For tools that read the structure (the ONNX export).
  struct LayerRef {
    std::string node, source;
    const Layer* layer = nullptr;
  };
  /// Every layer in execution order.
  std::vector<LayerRef> layer_refs() const;
  Backend& backend() const;
  const Shape& item_shape() const { return m_item_shape; }

  /// A table of every layer: node, name, kind, output shape (batch 1), parameters, options.
  std::string summary() const;
  /// Physical bytes of the layer outputs planned for the last input shape.
  std::size_t output_bytes() const { return m_output_bytes; }
  /// The gradient workspaces backward alternates between: this network's own, or those it shares
  /// (share_gradient_workspaces; compare the pointers before adding two networks' bytes).
  const GradientWorkspaces& gradient_workspaces() const { return *m_workspaces; }
  /// From now on use @p other's gradient workspaces (both networks on one backend, their backward
  /// passes never at the same time): the pair is sized to the larger network.
  void share_gradient_workspaces(const Network& other);
  /// Workspaces of its own again (as built).
  void use_own_gradient_workspaces();
  /// Time every layer into @p times from now on (nullptr: stop). @p times must outlive the calls.
  void set_layer_times(LayerTimes* times) { m_times = times; }

 private:
  struct Node {
    std::string name;
    int source = -1;  // -1 = the network input
    std::vector<std::unique_ptr<Layer>> layers;
    bool is_output = false;
    int consumers = 0;
    std::vector<TensorDesc> in_descs;  // input desc of each layer, as planned
    TensorDesc last_desc;              // the last layer's output desc (maybe a backend layout)
    TensorDesc out_desc;               // the node's output: canonical for output nodes
    Tensor canonical_out;              // reorder target when last_desc is not canonical
    Tensor out;                        // output of the last forward
    Tensor diff;                       // gradient accumulator for the output
    bool diff_set = false;
  };

  void setup_for(const TensorDesc& input);
  void plan_inplace(Node& node);
  int find_node(const std::string& name) const;

  std::string m_name;
  std::vector<Node> m_nodes;
  Backend* m_backend = nullptr;
  Shape m_item_shape;
  ParameterSet m_weights, m_grads, m_state;
  std::vector<std::pair<std::size_t, std::size_t>> m_param_ranges, m_state_ranges;  // per layer (flattened order)

  bool m_planned = false;
  TensorDesc m_input_desc;
  std::vector<Tensor> m_outputs;
  std::shared_ptr<GradientWorkspaces> m_workspaces = std::make_shared<GradientWorkspaces>();
  std::size_t m_workspace_elems = 0;  ///< the largest tensor of the planned shapes, which the workspaces hold
  Tensor m_input_diff;
  std::size_t m_output_bytes = 0;
  LayerTimes* m_times = nullptr;
};

}  // namespace mpigan::nn
