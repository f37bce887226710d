// Random search (optimizer.hpp), the baseline every other algorithm must beat, and the given
// points a search starts with.
#include "mpigan/hpo/optimizer.hpp"

namespace mpigan::hpo {

Point GivenPointsFirst::suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) {
  const std::size_t n = done.size() + pending.size();
  if (n < m_first.size()) return m_first[n];
  return m_rest->suggest(done, pending, rng);
}

Point RandomSearch::suggest(std::span<const Observation>, std::span<const Point>, Rng& rng) {
  return m_space.sample(rng);
}

}  // namespace mpigan::hpo
