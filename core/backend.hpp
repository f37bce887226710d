// The device backend interface: memory, layout conversion, the ops of the 3DGAN networks, and
// the element-wise / optimizer math over flat buffers.
//
// Contract for every op (style: oneDNN's primitive descriptors, cuDNN's plans):
//  - An op object is made once per layer from a descriptor in the API's conventions (NCDHW,
//    OIDHW, padding per side, stride, "no dilation"). Each backend converts conventions in one
//    place, at its boundary.
//  - setup(src desc) plans for one input shape and layout and returns the output's desc; all
//    shape-dependent work (primitive creation, algorithm choice, workspaces) happens there.
//    Calling it again with another shape re-plans. forward/backward only execute.
//  - Layout: an op may produce outputs in a backend layout (oneDNN blocked formats). Gradient
//    tensors always have the layout of their forward counterpart: diff_dst that of dst, diff_src
//    that of src. Parameters (weights, bias, scale, shift) are always canonical.
//  - backward_data overwrites diff_src. backward_weights ACCUMULATES (+=) into parameter
//    gradients; zeroing them is the trainer's job (one call on the flat gradient buffer).
//  - Ops keep what forward hands to backward (workspaces, reordered weights) inside the op.
#pragma once

#include "mpigan/core/shape.hpp"
#include "mpigan/core/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan {

// ----------------------------------------------------------------------------------------------
// Descriptors

/// 3D convolution. pad_l/pad_r are the zeros added before/after each spatial dim (TF "same" with
/// an even kernel pads (k-1)/2 before and k/2 after). Output = (in + pad_l + pad_r - k)/stride + 1.
struct Conv3dDesc {
  std::int64_t ic = 0, oc = 0;
  Dims3 kernel{1, 1, 1};
  Dims3 stride{1, 1, 1};
  Dims3 pad_l{0, 0, 0};
  Dims3 pad_r{0, 0, 0};
  bool bias = true;

  Shape weights_shape() const { return {oc, ic, kernel.d, kernel.h, kernel.w}; }
  /// Output shape for @p src (NCDHW); throws ShapeError naming what does not fit.
  Shape output_shape(const Shape& src) const;
  std::string to_string() const;
};

enum class EltwiseKind { relu, leaky_relu, sigmoid };
struct EltwiseDesc {
  EltwiseKind kind = EltwiseKind::relu;
  float alpha = 0.0f;  ///< negative slope of leaky_relu (>= 0)
  std::string to_string() const;
};

/// Batch normalisation over N and the spatial dims, per channel (dim 1).
struct BatchNormDesc {
  std::int64_t channels = 0;
  float epsilon = 1e-3f;
  std::string to_string() const;
};

/// Average pooling, no padding, floor: out = (in - k)/stride + 1 (Keras AveragePooling3D 'valid').
struct AvgPoolDesc {
  Dims3 kernel{2, 2, 2};
  Dims3 stride{2, 2, 2};
  Shape output_shape(const Shape& src) const;
  std::string to_string() const;
};

/// Nearest-neighbour upsampling by integer factors (Keras UpSampling3D: each voxel repeated).
struct UpsampleDesc {
  Dims3 factor{2, 2, 2};
  Shape output_shape(const Shape& src) const;
  std::string to_string() const;
};

/// Fully connected: dst(N,OC) = src(N,IC) * weights(OC,IC)^T + bias(OC).
struct InnerProductDesc {
  std::int64_t ic = 0, oc = 0;
  bool bias = true;
  std::string to_string() const;
};

// ----------------------------------------------------------------------------------------------
// Ops

class Conv3dOp {
 public:
  virtual ~Conv3dOp() = default;
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  /// dst = conv(src, weights) + bias. @p bias undefined when the desc has no bias.
  virtual void forward(const Tensor& src, const Tensor& weights, const Tensor& bias, Tensor& dst) = 0;
  /// diff_src = transposed conv of diff_dst (overwrites). Uses the weights of the last forward.
  virtual void backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) = 0;
  /// diff_weights += dL/dW, diff_bias += dL/db (if defined).
  virtual void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights, Tensor& diff_bias) = 0;
};

class InnerProductOp {
 public:
  virtual ~InnerProductOp() = default;
  /// @p src must be canonical (N, IC).
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  virtual void forward(const Tensor& src, const Tensor& weights, const Tensor& bias, Tensor& dst) = 0;
  virtual void backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) = 0;
  virtual void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights, Tensor& diff_bias) = 0;
};

class EltwiseOp {
 public:
  virtual ~EltwiseOp() = default;
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  virtual void forward(const Tensor& src, Tensor& dst) = 0;
  /// diff_src = f'(x) * diff_dst (overwrites), computed from the forward OUTPUT @p dst (relu,
  /// leaky_relu with alpha >= 0 and sigmoid all allow it), so forward can run in place over its
  /// input. diff_src may alias diff_dst.
  virtual void backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) = 0;
};

class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  /// Normalise with the batch's statistics; writes them (mean, biased variance; shape (C)).
  virtual void forward_training(const Tensor& src, const Tensor& gamma, const Tensor& beta, Tensor& dst,
                                Tensor& batch_mean, Tensor& batch_var) = 0;
  /// Normalise with given statistics (running mean / variance).
  virtual void forward_inference(const Tensor& src, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                 const Tensor& var, Tensor& dst) = 0;
  /// Backward of forward_training. diff_src overwritten; diff_gamma/diff_beta accumulated when
  /// defined (pass undefined tensors to skip the parameter gradients, e.g. a frozen network).
  virtual void backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& batch_mean,
                        const Tensor& batch_var, Tensor& diff_src, Tensor& diff_gamma, Tensor& diff_beta) = 0;
};

class AvgPoolOp {
 public:
  virtual ~AvgPoolOp() = default;
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  virtual void forward(const Tensor& src, Tensor& dst) = 0;
  virtual void backward(const Tensor& diff_dst, Tensor& diff_src) = 0;
};

class UpsampleOp {
 public:
  virtual ~UpsampleOp() = default;
  virtual TensorDesc setup(const TensorDesc& src) = 0;
  virtual void forward(const Tensor& src, Tensor& dst) = 0;
  /// diff_src = sum of diff_dst over each repeated block (overwrites).
  virtual void backward(const Tensor& diff_dst, Tensor& diff_src) = 0;
};

// ----------------------------------------------------------------------------------------------
// Optimizer hyper-parameters for the fused update kernels (formulas as Keras defines them; see
// nn/optimizer.hpp).

// Each may name a mirror: a second destination of the new weights (same size and device as w,
// not overlapping it), written in the same pass where the backend can (the CPU backend does): a
// master hands a worker the weights it just updated without reading them again.

struct SgdStep {
  float lr = 0.01f, momentum = 0.0f;
  bool nesterov = false;
  Tensor* mirror = nullptr;
};
struct RmspropStep {
  float lr = 1e-3f, rho = 0.9f, epsilon = 1e-7f;
  Tensor* mirror = nullptr;
};
struct AdamStep {
  float lr_t = 1e-3f;  ///< bias-corrected step size lr*sqrt(1-b2^t)/(1-b1^t)
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-7f;
  Tensor* mirror = nullptr;
};

// ----------------------------------------------------------------------------------------------
// Averaging over the ranks of a group (batch parallelism) without leaving the device.

/// Averages device buffers over the ranks of a group, on the device (NCCL on the cuda backend).
class GroupReducer {
 public:
  virtual ~GroupReducer() = default;
  /// x <- mean of x over the group's ranks, in place. Collective: every rank calls it in the same order.
  virtual void average(Tensor& x) = 0;
};
/// Sends an opaque id from group rank 0 to the others (the caller's communicator does it).
using IdBroadcast = std::function<void(std::span<std::byte> id)>;

/// The arithmetic of a backend's convolutions. fp32: everything in float32. bf16: the convolutions
/// read their inputs (activations, weights, incoming gradients) rounded to bfloat16 and accumulate
/// and write in float32, as PyTorch's autocast does; weights, optimizer state, every other op and
/// the loss terms stay float32.
enum class Precision { fp32, bf16 };

/// "fp32" or "bf16".
const char* precision_name(Precision p);
/// The precision named @p name ("fp32" or "bf16"); throws Error naming the choices otherwise.
Precision parse_precision(const std::string& name);

// ----------------------------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  /// One line on what runs underneath (library versions, ISA, device name).
  virtual std::string describe() const { return name(); }
  /// The arithmetic the convolutions run in (what was asked for where the hardware has it).
  virtual Precision precision() const { return Precision::fp32; }

  // --- memory and layouts
  virtual std::shared_ptr<Storage> allocate_storage(std::size_t bytes) = 0;
  /// Uninitialised tensor of @p desc on this backend's device.
  Tensor allocate(const TensorDesc& desc);
  Tensor allocate(const Shape& shape) { return allocate(TensorDesc{shape, nullptr}); }
  Tensor zeros(const Shape& shape);
  /// Convert between layouts of the same shape (either may be canonical).
  virtual void reorder(const Tensor& src, Tensor& dst) = 0;
  /// A canonical tensor with the content of @p src (src itself, shallow, if already canonical).
  Tensor to_canonical(const Tensor& src);
  /// A canonical host copy.
  virtual Tensor to_host(const Tensor& src);
  /// Copy a canonical host tensor into @p dst (same shape, any layout of this backend).
  virtual void from_host(const Tensor& host, Tensor& dst);
  /// Wait for queued device work.
  virtual void synchronize() {}
  /// Most bytes of device memory this backend has had in use at once (0 for host backends), since
  /// it was made or since the last reset_device_memory_peak().
  virtual std::size_t device_memory_peak() const { return 0; }
  /// Start the peak again from the bytes in use now (e.g. after a warm-up whose algorithm searches
  /// held scratch operands a steady state never holds).
  virtual void reset_device_memory_peak() {}

  // --- ops (throw Error naming the descriptor when unsupported)
  virtual std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& desc) = 0;
  virtual std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& desc) = 0;
  virtual std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& desc) = 0;
  virtual std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& desc) = 0;
  virtual std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& desc) = 0;
  virtual std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& desc) = 0;

  // --- element-wise math over the physical storage of tensors (same physical size required;
  //     layouts must match). Reductions return double.
  virtual void fill(Tensor& x, float value) = 0;
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  /// y = a*x + b*y; with b = 0, y = a*x without reading y (BLAS: it may hold anything, NaN included)
  virtual void axpby(float a, const Tensor& x, float b, Tensor& y) = 0;
  /// out = a * b (element-wise)
  virtual void mul(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual double sum_squares(const Tensor& x) = 0;
  virtual std::size_t count_nonfinite(const Tensor& x) = 0;
  /// Inverted dropout, forward: dst[i] = src[i] * m_i / (1 - rate), m_i = (u_i >= rate), with u_i
  /// = dropout_uniform(i) of Philox stream (seed, stream) (core/rng.hpp). dst may alias src. The
  /// keep bits go to @p mask: bit i % 32 of 32-bit word i / 32, stored in the tensor's bytes (it
  /// needs dropout_mask_floats(n) elements, n = physical size). Identical on every backend for the
  /// same physical layout.
  virtual void dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
                       Tensor& mask) = 0;
  /// Backward from the forward's mask: diff_src = diff_dst * m / (1 - rate); may alias.
  virtual void dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) = 0;
  /// dst(N,1) = sum over all other dims of src (canonical src).
  virtual void sum_per_item(const Tensor& src, Tensor& dst) = 0;
  /// diff_src(N,...) += diff_dst(N,1) broadcast over each item (canonical).
  virtual void add_per_item(const Tensor& diff_dst, Tensor& diff_src) = 0;
  /// dst = src^p (src >= 0), element-wise.
  virtual void pow(const Tensor& src, float p, Tensor& dst) = 0;
  /// diff_src += p * src^(p-1) * diff_dst (0 where src == 0).
  virtual void pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) = 0;

  // --- optimizer updates over flat buffers
  /// v = momentum*v - lr*g; w += v (nesterov: w += momentum*v - lr*g). v unused when momentum == 0.
  virtual void sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) = 0;
  /// ms = rho*ms + (1-rho)*g^2; w -= lr*g/(sqrt(ms)+eps)
  virtual void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) = 0;
  /// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr_t*m/(sqrt(v)+eps)
  virtual void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) = 0;

  // --- group averaging
  /// A device-side group reducer, or nullptr when this backend has none (host averaging over MPI then).
  /// Collective over the group when it returns non-null.
  /// This rank is @p group_rank of @p group_size; @p broadcast_id carries the backend's opaque
  /// rendezvous id from group rank 0 to the others (called once, on every rank, before the reducer
  /// is made). Every rank of a group uses the same backend, so all get null or none do.
  virtual std::unique_ptr<GroupReducer> make_group_reducer(int group_rank, int group_size,
                                                           const IdBroadcast& broadcast_id);
};

/// Floats a dropout mask of @p n elements occupies (one bit per element, 32 per word).
inline std::size_t dropout_mask_floats(std::size_t n) {
  return (n + 31) / 32;
}

struct BackendOptions {
  int threads = 0;     ///< CPU threads for op execution; 0 = the runtime default (OMP_NUM_THREADS)
  int device_id = -1;  ///< GPU ordinal; -1 = chosen by the caller's node-local rank
  /// Requested arithmetic. A backend without native bf16 kernels here runs fp32 and logs why
  /// (Backend::precision() says what runs).
  Precision precision = Precision::fp32;
  /// cpu: run bf16 through oneDNN's emulation on an AVX-512 CPU without native bf16 (slower than
  /// fp32; for checking the numerics). The environment variable MPIGAN_BF16_EMULATION=1 sets it.
  bool bf16_emulation = false;
};

/// CPU threads host backends use for their next ops (the OpenMP team size of this process).
int host_threads();
/// Set the thread count of host backends' ops in this process; @p n <= 0 keeps the current one.
void set_host_threads(int n);

/// Host backends run their ops on @p n threads while this object lives, then on as many as before.
class ScopedHostThreads {
 public:
  explicit ScopedHostThreads(int n) : m_saved(host_threads()) { set_host_threads(n); }
  ~ScopedHostThreads() { set_host_threads(m_saved); }
  ScopedHostThreads(const ScopedHostThreads&) = delete;
  ScopedHostThreads& operator=(const ScopedHostThreads&) = delete;

 private:
  int m_saved;
};

/// Backends compiled into this build ("reference", "cpu", and "cuda" when built with CUDA).
std::vector<std::string> backend_names();
/// Every backend mpigan has, whether this build has it or not ("reference", "cpu", "cuda").
std::vector<std::string> known_backend_names();
/// Create a backend by name; throws Error listing the available ones for an unknown name.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});
/// Devices the backend can use here (GPUs for "cuda"; 0 for host backends).
int device_count(const std::string& name);
/// Whether a backend can run here (e.g. "cuda": built with CUDA and a GPU is present).
bool backend_available(const std::string& name, std::string* why_not = nullptr);

}  // namespace mpigan
