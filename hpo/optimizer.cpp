// Random search (optimizer.hpp): the baseline every other algorithm must beat.
#include "mpigan/hpo/optimizer.hpp"

namespace mpigan::hpo {

Point RandomSearch::suggest(std::span<const Observation>, std::span<const Point>, Rng& rng) {
  return m_space.sample(rng);
}

}  // namespace mpigan::hpo
