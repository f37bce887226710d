// Layer: the unit of a network. A layer describes its parameters (trainable) and state
// (non-trainable, e.g. BatchNorm running statistics); the Network allocates both in flat
// ParameterSets and binds views of them to the layer. Execution goes through the backend's ops.
//
// Lifecycle: construct -> bind(views) -> setup(src desc) [again whenever the input changes]
//            -> forward / backward, many times.
// Contracts:
//  - forward returns the output tensor, owned by the layer (or, for an in-place layer, the
//    input's own storage) and valid until the next forward of this layer.
//  - backward writes dL/d(input) into diff_src (provided by the network, with the input's desc,
//    never aliasing diff_dst), and ACCUMULATES parameter gradients into the
//    bound gradient views when ctx.param_grads. diff_src is not touched when !ctx.need_diff_src.
//  - Every input is checked: a wrong shape throws ShapeError naming the layer, expected and found.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/tensor.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpigan::nn {

enum class Phase { train, infer };

struct ForwardContext {
  Phase phase = Phase::train;
  /// BatchNorm: in the train phase, update the running statistics (false for a frozen network,
  /// which still normalises with batch statistics: Keras trainable=False semantics).
  bool update_stats = true;
  /// Dropout masks come from Philox stream (seed, mix(layer, pass)); pass counts forward calls.
  std::uint64_t seed = 0;
  std::uint64_t pass = 0;
};

struct BackwardContext {
  bool param_grads = true;    ///< accumulate parameter gradients
  bool need_diff_src = true;  ///< compute dL/d(input)
};

/// Keras initialisers (fan_in/fan_out as Keras computes them: conv fan = channels * kernel volume).
enum class Init { zeros, ones, he_uniform, glorot_uniform, glorot_normal };
const char* to_string(Init init);

struct ParamSpec {
  std::string name;  ///< "kernel", "bias", "gamma", ...
  Shape shape;
  Init init = Init::zeros;
  std::int64_t fan_in = 0, fan_out = 0;
  /// The drawn values are multiplied by this: a layer that multiplies its weights by a gain at run
  /// time stores them divided by it, so that the weights it computes with start as @c init draws.
  float init_scale = 1.0f;
};

class Layer {
 public:
  explicit Layer(std::string name) : m_name(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return m_name; }
  /// Class name as in Keras ("Conv3D", "Dense", ...).
  virtual std::string kind() const = 0;
  /// Hyper-parameters in one line, for `mpigan inspect`.
  virtual std::string describe() const { return {}; }
  /// Output shape for input shape @p src (with batch dim). Throws ShapeError naming the layer.
  virtual Shape output_shape(const Shape& src) const = 0;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual std::vector<ParamSpec> state() const { return {}; }
  /// How much of this layer's state, as it was at the last reset_state_decay(), is left in it now:
  /// the state is a moving average s <- a s + (1 - a) x, and this is the product of the a's applied
  /// since (1 for a layer whose state does not decay). The master merges the running statistics
  /// of many workers with it (master/update_service.hpp).
  virtual double state_decay() const { return 1.0; }
  virtual void reset_state_decay() {}

  /// Attach the backend and views of the network's buffers, in the order of params()/state().
  void bind(Backend& backend, std::vector<Tensor> weights, std::vector<Tensor> grads, std::vector<Tensor> state);
  Backend& backend() const;

  /// What backward reads of this layer's own forward output. A successor may run in place over
  /// that output only if it keeps what is read (see Network: in-place planning).
  enum class OutputUse { none, sign, value };
  virtual OutputUse backward_reads_output() const { return OutputUse::none; }
  /// Whether forward may overwrite its input (the network decides whether it is safe).
  virtual bool supports_inplace() const { return false; }
  /// Whether this layer, run in place, keeps the sign of every element or zeroes it together
  /// with its gradient (dropout): then it may run in place over a layer that reads only signs.
  virtual bool preserves_sign() const { return false; }
  void set_inplace(bool on) { m_inplace = on && supports_inplace(); }
  bool inplace() const { return m_inplace; }
  /// Whether the output shares the input's storage without copying (a reshape view).
  virtual bool output_aliases_input() const { return false; }

  /// Plan for input @p src; returns the output's desc. Called by the network when it changes.
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  virtual const Tensor& forward(const Tensor& src, const ForwardContext& ctx) = 0;
  virtual void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) = 0;

 protected:
  /// Throws ShapeError if @p src is not what setup planned for.
  void check_input(const Tensor& src, const TensorDesc& planned) const;
  /// (Re)allocate @p out for @p desc unless it already fits.
  void ensure(Tensor& out, const TensorDesc& desc);

  std::vector<Tensor> m_weights, m_grads, m_state;

 private:
  std::string m_name;
  Backend* m_backend = nullptr;
  bool m_inplace = false;
};

}  // namespace mpigan::nn
