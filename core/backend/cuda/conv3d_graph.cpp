// cuDNN graph-API convolutions (conv3d_graph.hpp). Every descriptor is a cudnnBackendDescriptor_t
// owned by a BackendDesc; attributes are set with set() and finalized before use, as the API
// requires. The operands' unique ids are fixed: 1 = x, 2 = w, 3 = y, in every direction.
#include "mpigan/backend/cuda/conv3d_graph.hpp"

#include "mpigan/backend/cuda/conv3d_plan.hpp"
#include "mpigan/core/error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpigan::cuda {
namespace {

constexpr std::int64_t kUidX = 1, kUidW = 2, kUidY = 3;

using BackendDestroy = HandleDeleter<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor>;

/// An owned backend descriptor.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t raw = nullptr;
    MPIGAN_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &raw));
    m_desc.reset(raw);
  }
  cudnnBackendDescriptor_t get() const { return m_desc.get(); }
  cudnnBackendDescriptor_t release() { return m_desc.release(); }

  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const T* values) {
    MPIGAN_CUDNN_CHECK(cudnnBackendSetAttribute(get(), name, type, count, values));
  }
  void set_desc(cudnnBackendAttributeName_t name, const BackendDesc& d) {
    cudnnBackendDescriptor_t raw = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  void finalize() { MPIGAN_CUDNN_CHECK(cudnnBackendFinalize(get())); }
  /// Finalize where failing is an answer (an engine config that cannot run the problem).
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(get()); }

 private:
  UniqueHandle<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor> m_desc;
};

BackendDesc tensor(const Shape& s, std::int64_t uid, bool bf16, bool channels_last) {
  BackendDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  std::array<std::int64_t, 5> dims{};
  for (int i = 0; i < 5; ++i) dims[static_cast<std::size_t>(i)] = s[i];
  const auto strides = packed_strides(s, channels_last);
  const std::int64_t align = GraphConv::kAlignment;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 5, dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 5, strides.data());
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  t.finalize();
  return t;
}

BackendDesc convolution(const Dims3& pad, const Dims3& stride) {
  BackendDesc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t spatial = 3;
  const std::array<std::int64_t, 3> dilation{1, 1, 1}, p{pad.d, pad.h, pad.w}, s{stride.d, stride.h, stride.w};
  c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  c.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  c.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3, dilation.data());
  c.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 3, s.data());
  c.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 3, p.data());
  c.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 3, p.data());
  c.finalize();
  return c;
}

/// The descriptor type and attribute names of one direction's operation, its operands in the
/// forward convolution's roles (x, w, y).
struct OperationAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationAttributes operation_attributes(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvDirection::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::backward_weights:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

/// The operation of @p p's direction: alpha 1, beta 0 in every direction (graph engines are used
/// with beta 0 by PyTorch and cudnn-frontend alike; the conv op adds the weight gradient itself).
BackendDesc operation(const GraphConvProblem& p, const BackendDesc& x, const BackendDesc& w, const BackendDesc& y,
                      const BackendDesc& conv) {
  const OperationAttributes a = operation_attributes(p.direction);
  const float alpha = 1.0f, beta = 0.0f;
  BackendDesc op(a.type);
  op.set_desc(a.x, x);
  op.set_desc(a.w, w);
  op.set_desc(a.y, y);
  op.set_desc(a.conv, conv);
  op.set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  op.set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  op.finalize();
  return op;
}

/// The engine configs the heuristics of @p mode propose for @p graph, best first (none when the
/// mode has nothing for it).
std::vector<BackendDesc> heuristic_configs(const BackendDesc& graph, cudnnBackendHeurMode_t mode) {
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) return {};
  std::int64_t count = 0;
  MPIGAN_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              0, &count, nullptr));
  std::vector<BackendDesc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  std::int64_t returned = 0;
  if (count > 0)
    MPIGAN_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()));
  configs.erase(configs.begin() + static_cast<std::ptrdiff_t>(std::clamp<std::int64_t>(returned, 0, count)),
                configs.end());
  return configs;
}

/// The notes and global index of the engine behind @p config.
struct EngineInfo {
  EngineNotes notes;
  std::int64_t index = -1;
  std::string names;  ///< the notes, for logs
};

EngineInfo engine_info(const BackendDesc& config) {
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  std::int64_t n = 0;
  MPIGAN_CUDNN_CHECK(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw));
  EngineInfo info;
  MPIGAN_CUDNN_CHECK(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::int64_t count = 0;
  MPIGAN_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                              static_cast<std::int64_t>(notes.size()), &count, notes.data()));
  for (std::int64_t i = 0; i < std::min<std::int64_t>(count, static_cast<std::int64_t>(notes.size())); ++i) {
    switch (notes[static_cast<std::size_t>(i)]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        info.notes.tensor_core = true, info.names += " tensor_core";
        break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        info.notes.down_convert = true, info.names += " down_convert";
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        info.notes.reduced_reduction = true, info.names += " reduced_precision_reduction";
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        info.notes.nondeterministic = true, info.names += " nondeterministic";
        break;
      case CUDNN_NUMERICAL_NOTE_FFT:
        info.names += " fft";
        break;
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
        info.names += " winograd";
        break;
      default:
        break;
    }
  }
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behaviour{};
  count = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               static_cast<std::int64_t>(behaviour.size()), &count,
                               behaviour.data()) == CUDNN_STATUS_SUCCESS)
    for (std::int64_t i = 0; i < std::min<std::int64_t>(count, static_cast<std::int64_t>(behaviour.size())); ++i)
      if (behaviour[static_cast<std::size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
        info.notes.runtime_compiled = true, info.names += " runtime_compiled";
  return info;
}

/// A finalized execution plan and what was learned about it.
struct Candidate {
  cudnnBackendDescriptor_t plan = nullptr;  // owned by `owner`
  std::shared_ptr<BackendDesc> owner;
  std::size_t config = 0;  ///< its engine config among the heuristics' results
  std::size_t workspace = 0;
  std::string engine;
  float ms = -1.0f;
};

cudnnStatus_t execute_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, void* x, void* w, void* y, void* ws) {
  BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const std::array<std::int64_t, 3> uids{kUidX, kUidW, kUidY};
  std::array<void*, 3> ptrs{x, w, y};
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  pack.finalize();
  return cudnnBackendExecute(handle, plan, pack.get());
}

/// Zeroed device scratch of @p bytes from the backend's allocator (none for 0 bytes), for trying
/// candidates.
std::shared_ptr<Storage> zeroed_scratch(Context& ctx, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  auto s = device_storage(ctx.allocator(), bytes);
  MPIGAN_CUDA_CHECK(cudaMemsetAsync(s->data(), 0, bytes, ctx.stream()));
  return s;
}

using EventPtr = UniqueHandle<cudaEvent_t, cudaEventDestroy>;
EventPtr make_event() {
  cudaEvent_t e = nullptr;
  MPIGAN_CUDA_CHECK(cudaEventCreate(&e));
  return EventPtr(e);
}

/// Runs @p c on zeroed scratch operands: once when @p runs is 0 (a trial: can it execute at all?),
/// else once to warm up and @p runs times timed. Milliseconds per timed call (0 for a trial), or a
/// negative value when it fails to run.
float run_candidate(Context& ctx, const Candidate& c, const GraphConvProblem& p, int runs) {
  // float32-sized scratch whatever the types: large enough for bf16 operands too
  const auto x = zeroed_scratch(ctx, static_cast<std::size_t>(p.x.numel()) * sizeof(float));
  const auto w = zeroed_scratch(ctx, static_cast<std::size_t>(p.w.numel()) * sizeof(float));
  const auto y = zeroed_scratch(ctx, static_cast<std::size_t>(p.y.numel()) * sizeof(float));
  const auto ws = zeroed_scratch(ctx, c.workspace);
  const auto run = [&] {
    return execute_plan(ctx.cudnn(), c.plan, x->data(), w->data(), y->data(), ws ? ws->data() : nullptr) ==
           CUDNN_STATUS_SUCCESS;
  };
  if (!run()) return -1.0f;
  if (runs == 0) {
    ctx.sync();
    return 0.0f;
  }
  const EventPtr start = make_event(), stop = make_event();
  MPIGAN_CUDA_CHECK(cudaEventRecord(start.get(), ctx.stream()));
  bool ok = true;
  for (int i = 0; i < runs && ok; ++i) ok = run();
  MPIGAN_CUDA_CHECK(cudaEventRecord(stop.get(), ctx.stream()));
  MPIGAN_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0.0f;
  MPIGAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ok ? ms / static_cast<float>(runs) : -1.0f;
}

}  // namespace

const char* direction_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward:
      return "forward";
    case ConvDirection::backward_data:
      return "backward data";
    case ConvDirection::backward_weights:
      return "backward weights";
  }
  return "?";
}

std::string GraphConvProblem::key() const {
  return fmt::format("{} x{} w{} y{} pad {},{},{} stride {},{},{}{}{}", direction_name(direction), x.to_string(),
                     w.to_string(), y.to_string(), pad.d, pad.h, pad.w, stride.d, stride.h, stride.w,
                     bf16 ? " bf16" : "", channels_last ? " channels-last" : "");
}

std::shared_ptr<const GraphConv> GraphConv::get(Context& ctx, const GraphConvProblem& p, const std::string& what) {
  auto& cache = ctx.graph_conv_plans();
  const std::string key = p.key();
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // A cuDNN status the graph path did not expect costs the graph path, not the run. With bf16 the
  // float32-written form may be refused at any descriptor (mixed types), and the bfloat16-written
  // form is tried after it all the same.
  const auto attempt = [&](bool output_bf16) -> std::shared_ptr<const GraphConv> {
    try {
      return build(ctx, p, what, output_bf16);
    } catch (const Error& e) {
      if (p.bf16 && !output_bf16) {
        spdlog::debug("cuda conv3d {} {}: the graph API refuses bf16 operands with a float32 result ({})", what,
                      direction_name(p.direction), e.what());
      } else {
        spdlog::warn("cuda conv3d {} {}: the graph API failed ({}); the legacy API runs it", what,
                     direction_name(p.direction), e.what());
      }
      return nullptr;
    }
  };
  // bf16: the written operand in float32 if an engine offers that (no rounding of the result, as on
  // the cpu backend), else in bfloat16
  std::shared_ptr<const GraphConv> plan = attempt(false);
  if (!plan && p.bf16) plan = attempt(true);
  cache.emplace(key, plan);
  return plan;
}

std::shared_ptr<const GraphConv> GraphConv::build(Context& ctx, const GraphConvProblem& p, const std::string& what,
                                                  bool output_bf16) {
  const Settings& s = ctx.settings();
  ctx.activate();
  // The direction writes one operand and reads the other two (those in bf16 when the problem is).
  const auto bf16 = [&](ConvDirection writer) { return p.bf16 && (p.direction != writer || output_bf16); };
  BackendDesc x = tensor(p.x, kUidX, bf16(ConvDirection::backward_data), p.channels_last),
              w = tensor(p.w, kUidW, bf16(ConvDirection::backward_weights), p.channels_last),
              y = tensor(p.y, kUidY, bf16(ConvDirection::forward), p.channels_last);
  BackendDesc conv = convolution(p.pad, p.stride);
  BackendDesc op = operation(p, x, w, y, conv);
  BackendDesc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t ops = op.get();
  cudnnHandle_t handle = ctx.cudnn();
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ops);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (const cudnnStatus_t st = graph.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
    spdlog::debug("cuda conv3d {} {}: cuDNN's graph API refuses the operation graph ({})", what,
                  direction_name(p.direction), cudnnGetErrorString(st));
    return nullptr;
  }

  std::vector<BackendDesc> configs = heuristic_configs(graph, CUDNN_HEUR_MODE_A);
  for (auto& c : heuristic_configs(graph, CUDNN_HEUR_MODE_FALLBACK)) configs.push_back(std::move(c));

  // Each config's notes and workspace are read before its plan is finalized (finalizing may
  // compile a kernel); with find the first kMaxTimed usable plans are timed and the fastest wins,
  // with heuristics the first that runs at all on scratch operands.
  const bool timed = s.conv_algo == Settings::ConvAlgo::find;
  constexpr int kTimedRuns = 3;
  std::vector<Candidate> usable;
  Candidate* best = nullptr;
  std::string refused, timings;
  for (std::size_t k = 0; k < configs.size() && usable.size() < static_cast<std::size_t>(kMaxTimed); ++k) {
    const BackendDesc& config = configs[k];
    const EngineInfo info = engine_info(config);
    std::int64_t ws = 0, n = 0;
    if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws) !=
        CUDNN_STATUS_SUCCESS)
      ws = 0;  // read again from the plan below
    // bf16 operands: tensor cores are what they are for (TF32 does not arise)
    if (auto why = engine_refusal(info.notes, static_cast<std::size_t>(ws), s.tf32 || p.bf16, s.deterministic,
                                  s.workspace_limit, s.graph_runtime_compiled)) {
      refused += fmt::format(" {}:{}", info.index, *why);
      continue;
    }
    auto plan = std::make_shared<BackendDesc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (plan->try_finalize() != CUDNN_STATUS_SUCCESS) {
      refused += fmt::format(" {}:does not finalize", info.index);
      continue;
    }
    MPIGAN_CUDNN_CHECK(
        cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws));
    if (auto why =
            engine_refusal(EngineNotes{}, static_cast<std::size_t>(ws), s.tf32, s.deterministic, s.workspace_limit)) {
      refused += fmt::format(" {}:{}", info.index, *why);
      continue;
    }
    Candidate c;
    c.plan = plan->get();
    c.owner = std::move(plan);
    c.config = k;
    c.workspace = static_cast<std::size_t>(ws);
    c.engine = fmt::format("engine {}{}", info.index, info.names.empty() ? "" : " (" + info.names.substr(1) + ")");
    c.ms = run_candidate(ctx, c, p, timed ? kTimedRuns : 0);
    timings += fmt::format(" {}:{}", c.engine, c.ms < 0 ? std::string("fails to run") : fmt::format("{:.3f}ms", c.ms));
    if (c.ms < 0) continue;
    usable.push_back(std::move(c));
    if (!timed) break;
  }
  for (auto& c : usable)
    if (!best || c.ms < best->ms) best = &c;
  if (best && !timed) best->ms = -1.0f;  // ran, not measured
  const char* types = !p.bf16 ? "" : output_bf16 ? " (bf16 operands)" : " (bf16 operands read, fp32 written)";
  if (!best) {
    spdlog::debug("cuda conv3d {} {}{}: no engine of the graph API can run it ({} configs; refused:{}{})", what,
                  direction_name(p.direction), types, configs.size(), refused.empty() ? " none" : refused, timings);
    return nullptr;
  }
  spdlog::debug("cuda conv3d {} {}{}: graph API {}, workspace {} MiB{}; ran:{}", what, direction_name(p.direction),
                types, best->engine, best->workspace >> 20, best->ms >= 0 ? fmt::format(", {:.3f} ms", best->ms) : "",
                timings);
  std::shared_ptr<GraphConv> g(new GraphConv());
  g->m_direction = p.direction;
  g->m_workspace = best->workspace;
  g->m_ms = best->ms;
  g->m_output_bf16 = p.bf16 && output_bf16;
  g->m_channels_last = p.channels_last;
  g->m_engine = best->engine;
  g->m_plan.reset(best->owner->release());
  // What the plan was made from lives as long as the plan (the API does not promise that a
  // finalized plan holds its own copies).
  for (BackendDesc* d : {&x, &w, &y, &conv, &op, &graph, &configs[best->config]})
    g->m_keep.emplace_back(d->release(), BackendDestroy{});
  return g;
}

bool GraphConv::accepts(const void* x, const void* w, const void* y) {
  return address_alignment(x) >= kAlignment && address_alignment(w) >= kAlignment && address_alignment(y) >= kAlignment;
}

void GraphConv::execute(Context& ctx, void* x, void* w, void* y, void* ws) const {
  MPIGAN_CHECK(accepts(x, w, y), "cuda conv3d {} (graph API): an operand is not {}-byte aligned, as the plan assumes",
               direction_name(m_direction), kAlignment);
  MPIGAN_CUDNN_CHECK(execute_plan(ctx.cudnn(), m_plan.get(), x, w, y, ws));
}

}  // namespace mpigan::cuda
