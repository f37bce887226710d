// Reference kernels: plain loops, the specification every other backend is tested against
// (style: llm.c train_gpt2.c, benchdnn ref_conv.cpp). Templates over the scalar type so the
// finite-difference gradient tests can run them in double; the reference backend uses float with
// double accumulators. Layouts are canonical; each buffer's shape is noted beside it.
// Dimension names: N, IC, OC, ID/IH/IW, OD/OH/OW, KD/KH/KW, SD/SH/SW, PD/PH/PW (padding before).
//
// Accumulation contract: *_backward_data and the BN diff_src overwrite; *_backward_weights and the
// BN diff_gamma/diff_beta add to what is there.
#pragma once

#include "mpigan/core/backend.hpp"

#include <cstddef>

namespace mpigan::ref {

// src (N,IC,ID,IH,IW), weights (OC,IC,KD,KH,KW), bias (OC) or nullptr, dst (N,OC,OD,OH,OW)
template <class T>
void conv3d_forward(const Conv3dDesc& desc, const Shape& src_shape, const T* src, const T* weights, const T* bias,
                    T* dst);
// diff_dst (N,OC,OD,OH,OW), weights (OC,IC,KD,KH,KW), diff_src (N,IC,ID,IH,IW)
template <class T>
void conv3d_backward_data(const Conv3dDesc& desc, const Shape& src_shape, const T* diff_dst, const T* weights,
                          T* diff_src);
// src (N,IC,ID,IH,IW), diff_dst (N,OC,OD,OH,OW), diff_weights (OC,IC,KD,KH,KW) +=, diff_bias (OC) += or nullptr
template <class T>
void conv3d_backward_weights(const Conv3dDesc& desc, const Shape& src_shape, const T* src, const T* diff_dst,
                             T* diff_weights, T* diff_bias);

// src (N,IC), weights (OC,IC), bias (OC) or nullptr, dst (N,OC)
template <class T>
void inner_product_forward(std::int64_t n, const InnerProductDesc& desc, const T* src, const T* weights, const T* bias,
                           T* dst);
// diff_dst (N,OC), weights (OC,IC), diff_src (N,IC)
template <class T>
void inner_product_backward_data(std::int64_t n, const InnerProductDesc& desc, const T* diff_dst, const T* weights,
                                 T* diff_src);
// src (N,IC), diff_dst (N,OC), diff_weights (OC,IC) +=, diff_bias (OC) += or nullptr
template <class T>
void inner_product_backward_weights(std::int64_t n, const InnerProductDesc& desc, const T* src, const T* diff_dst,
                                    T* diff_weights, T* diff_bias);

// Element-wise over count values. The backward takes the forward OUTPUT dst (see backend.hpp);
// derivatives at the kinks as TensorFlow defines them: relu'(0) = 0, leaky_relu'(x) = 1 for x > 0
// else alpha (with alpha >= 0, y > 0 exactly when x > 0); sigmoid' = y (1 - y).
template <class T>
void eltwise_forward(const EltwiseDesc& desc, std::size_t count, const T* src, T* dst);
template <class T>
void eltwise_backward(const EltwiseDesc& desc, std::size_t count, const T* dst, const T* diff_dst, T* diff_src);

// Batch norm over (N, spatial) per channel. src/dst (N,C,D,H,W) (any rank >= 2, channel dim 1),
// gamma/beta/mean/var (C). Variance is the biased batch variance.
template <class T>
void batch_norm_forward_training(const Shape& shape, float epsilon, const T* src, const T* gamma, const T* beta, T* dst,
                                 T* mean, T* var);
template <class T>
void batch_norm_forward_inference(const Shape& shape, float epsilon, const T* src, const T* gamma, const T* beta,
                                  const T* mean, const T* var, T* dst);
// dgamma = sum(dy*xhat), dbeta = sum(dy), dx = gamma/sqrt(var+eps) * (dy - dbeta/M - xhat*dgamma/M), M = N*D*H*W.
// diff_gamma/diff_beta (C) += or nullptr.
template <class T>
void batch_norm_backward(const Shape& shape, float epsilon, const T* src, const T* diff_dst, const T* gamma,
                         const T* mean, const T* var, T* diff_src, T* diff_gamma, T* diff_beta);

// src (N,C,ID,IH,IW), dst (N,C,OD,OH,OW)
template <class T>
void avg_pool_forward(const AvgPoolDesc& desc, const Shape& src_shape, const T* src, T* dst);
template <class T>
void avg_pool_backward(const AvgPoolDesc& desc, const Shape& src_shape, const T* diff_dst, T* diff_src);

// src (N,C,D,H,W), dst (N,C,D*fd,H*fh,W*fw)
template <class T>
void upsample_forward(const UpsampleDesc& desc, const Shape& src_shape, const T* src, T* dst);
template <class T>
void upsample_backward(const UpsampleDesc& desc, const Shape& src_shape, const T* diff_dst, T* diff_src);

}  // namespace mpigan::ref
