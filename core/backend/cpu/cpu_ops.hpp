// Factories of the oneDNN op implementations (one .cpp per op).
#pragma once

#include "mpigan/core/backend.hpp"

namespace mpigan::cpu {

struct DnnlContext;

std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& d, DnnlContext& ctx);
std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& d, DnnlContext& ctx);
std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& d, DnnlContext& ctx);
std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& d, DnnlContext& ctx);
std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& d, DnnlContext& ctx);
std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& d, DnnlContext& ctx);

}  // namespace mpigan::cpu
