// Layer base (layer.hpp): binding parameter views, input checks against the plan, output allocation.
#include "mpigan/nn/layer.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::nn {

const char* to_string(Init init) {
  switch (init) {
    case Init::zeros:
      return "zeros";
    case Init::ones:
      return "ones";
    case Init::he_uniform:
      return "he_uniform";
    case Init::glorot_uniform:
      return "glorot_uniform";
    case Init::glorot_normal:
      return "glorot_normal";
  }
  return "?";
}

void Layer::bind(Backend& backend, std::vector<Tensor> weights, std::vector<Tensor> grads, std::vector<Tensor> state) {
  MPIGAN_CHECK(
      weights.size() == params().size() && grads.size() == params().size() && state.size() == this->state().size(),
      "layer '{}': bind got {} weights / {} grads / {} state views, expected {} / {} / {}", m_name, weights.size(),
      grads.size(), state.size(), params().size(), params().size(), this->state().size());
  m_backend = &backend;
  m_weights = std::move(weights);
  m_grads = std::move(grads);
  m_state = std::move(state);
}

Backend& Layer::backend() const {
  MPIGAN_CHECK(m_backend != nullptr, "layer '{}' ({}) used before bind()", m_name, kind());
  return *m_backend;
}

void Layer::check_input(const Tensor& src, const TensorDesc& planned) const {
  MPIGAN_CHECK_SHAPE(src.shape() == planned.shape, "layer '{}' ({}): input shape expected {}, found {}", m_name, kind(),
                     planned.shape, src.shape());
  MPIGAN_CHECK_SHAPE(same_layout(src.layout(), planned.layout), "layer '{}' ({}): input layout expected {}, found {}",
                     m_name, kind(), planned.to_string(), src.desc().to_string());
}

void Layer::ensure(Tensor& out, const TensorDesc& desc) {
  if (out.defined() && out.shape() == desc.shape && same_layout(out.layout(), desc.layout)) return;
  out = backend().allocate(desc);
}

}  // namespace mpigan::nn
