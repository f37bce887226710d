// Factories of the CUDA op implementations (one .cpp per op, kernels in the matching .cu) and
// the argument checks they share.
#pragma once

#include "mpigan/backend/cuda/cuda_context.hpp"
#include "mpigan/core/backend.hpp"

namespace mpigan::cuda {

std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& d, Context& ctx);
std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& d, Context& ctx);
std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& d, Context& ctx);
std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& d, Context& ctx);
std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& d, Context& ctx);
std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& d, Context& ctx);

/// @p t must be a canonical tensor on the GPU (role names it in the error: "conv3d: diff_dst ...").
void require_device(const Tensor& t, const char* op, const char* role);
/// ... and have shape @p want.
void require_device(const Tensor& t, const Shape& want, const char* op, const char* role);
/// An op's setup() input must be canonical (this backend has no other layouts).
void require_canonical_desc(const TensorDesc& src, const char* op);

}  // namespace mpigan::cuda
