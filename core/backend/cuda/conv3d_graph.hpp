// One direction of a 3D convolution through cuDNN's graph (backend) API: the engines PyTorch's
// cuDNN path reaches, where the legacy API offers only algorithms 0, 1 and 3 for 3D weight
// gradients (docs/cuda.md, "Run on a GPU").
//
// The problem is the one the legacy path hands cuDNN (conv3d_plan.hpp): NCDHW tensors, OIDHW
// weights, cuDNN's symmetric padding (asymmetric padding is added as explicit zeros by the caller,
// as for the legacy API), stride, dilation 1, float32 data and compute (with bf16: the operands
// read in bfloat16, float32 compute, the operand written in float32 where an engine offers it).
// Building it:
//   operation (forward / backward data / backward filter) -> operation graph -> engine heuristics
//   (mode A, then the fallback list) -> each engine config filtered by the settings
//   (engine_refusal: TF32, determinism, workspace) and finalized into an execution plan;
// with MPIGAN_CUDA_CONV_ALGO=find the first kMaxTimed usable plans run on scratch buffers and the
// fastest is kept (its time in measured_ms()), otherwise the heuristics' first plan that runs on
// scratch buffers. Plans are cached per problem in the context, so layers of the same shape share
// the measurement; a cuDNN error while building leaves the problem to the legacy API.
//
// Execution: x, w and y are the three operands in the forward convolution's roles whatever the
// direction (backward data writes x from y; backward filter writes w from x and y). Every
// direction runs with beta = 0, as PyTorch and cudnn-frontend use graph engines: the conv op
// adds the weight gradient to its accumulator itself. The operands' addresses must be at least kAlignment-byte aligned,
// as every allocation of the backend and every segment of a ParameterSet is (accepts() says; the conv op takes the
// legacy call for operands that are not).
#pragma once

#include "mpigan/backend/cuda/cuda_context.hpp"
#include "mpigan/core/shape.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mpigan::cuda {

enum class ConvDirection { forward, backward_data, backward_weights };
const char* direction_name(ConvDirection d);

struct GraphConvProblem {
  ConvDirection direction = ConvDirection::forward;
  Shape x, w, y;  ///< (N, C, D, H, W), (O, C, KD, KH, KW), (N, O, OD, OH, OW)
  Dims3 pad{0, 0, 0};
  Dims3 stride{1, 1, 1};
  /// bf16 operands: the two the direction reads are bfloat16; the one it writes is float32 where
  /// an engine offers that, else bfloat16 (GraphConv::output_bf16). Compute type float32 either way.
  bool bf16 = false;
  /// The operands in memory channels-last (NDHWC; weights O, KD, KH, KW, I), dimensions as always.
  bool channels_last = false;
  /// The cache key: direction, shapes, padding, stride, types, layout.
  std::string key() const;
};

class GraphConv {
 public:
  static constexpr std::size_t kAlignment = 16;
  static constexpr int kMaxTimed = 8;

  /// The plan for @p p under @p ctx's settings, from the context's cache or built; nullptr when no
  /// engine of this cuDNN can run it (the refusals logged at debug level, naming @p what).
  static std::shared_ptr<const GraphConv> get(Context& ctx, const GraphConvProblem& p, const std::string& what);

  GraphConv(const GraphConv&) = delete;
  GraphConv& operator=(const GraphConv&) = delete;

  std::size_t workspace() const { return m_workspace; }
  /// Milliseconds per call as measured when chosen; negative when chosen by heuristics alone.
  float measured_ms() const { return m_ms; }
  /// The engine: its global index and numerical notes, for logs.
  const std::string& engine() const { return m_engine; }
  /// A bf16 problem whose written operand is bfloat16 (no engine wrote float32): the caller widens it.
  bool output_bf16() const { return m_output_bf16; }
  /// The problem's operands are channels-last (GraphConvProblem::channels_last).
  bool channels_last() const { return m_channels_last; }

  /// Runs the plan on the context's stream, the operands in the forward convolution's roles:
  /// forward writes y = conv(x, w); backward data writes x = conv_bwd_data(y, w); backward weights
  /// writes w = conv_bwd_filter(x, y). The operands it only reads are not written. @p ws holds
  /// workspace() bytes.
  void execute(Context& ctx, void* x, void* w, void* y, void* ws) const;
  /// Whether the operands are aligned as the plan assumes.
  static bool accepts(const void* x, const void* w, const void* y);

 private:
  GraphConv() = default;
  static std::shared_ptr<const GraphConv> build(Context& ctx, const GraphConvProblem& p, const std::string& what,
                                                bool output_bf16);

  ConvDirection m_direction = ConvDirection::forward;
  std::vector<std::shared_ptr<void>> m_keep;  ///< the descriptors it was built from
  /// The execution plan, destroyed before what it was built from (members die in reverse order).
  UniqueHandle<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor> m_plan;
  std::size_t m_workspace = 0;
  float m_ms = -1.0f;
  bool m_output_bf16 = false;
  bool m_channels_last = false;
  std::string m_engine;
};

}  // namespace mpigan::cuda
