// The registry of update rules: name -> factory. Adding a rule is one file, algos/<name>.cpp,
// defining `std::unique_ptr<Algorithm> make_<name>(ConfigNode&)`, and one line in MPIGAN_RULES
// below (docs/algorithms.md). CMake compiles every algos/*.cpp; the serial tests run every
// registered rule (tests/unit/master).
#include "mpigan/algos/rules.hpp"

#include <utility>

// X(name): the rule's name in experiment files is also its factory's suffix.
#define MPIGAN_RULES(X) \
  X(sync)               \
  X(downpour)           \
  X(easgd)              \
  X(gem)                \
  X(dc_asgd)

namespace mpigan::algos {

#define MPIGAN_DECLARE_RULE(name) std::unique_ptr<Algorithm> make_##name(ConfigNode& c);
MPIGAN_RULES(MPIGAN_DECLARE_RULE)
#undef MPIGAN_DECLARE_RULE

namespace {
using Factory = std::unique_ptr<Algorithm> (*)(ConfigNode&);
#define MPIGAN_REGISTER_RULE(name) {#name, make_##name},
const std::pair<const char*, Factory> kRules[] = {MPIGAN_RULES(MPIGAN_REGISTER_RULE)};
#undef MPIGAN_REGISTER_RULE
}  // namespace

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : kRules) names.emplace_back(n);
  return names;
}

std::unique_ptr<Algorithm> make_algorithm(ConfigNode& section) {
  const std::string name = section.get_choice("name", "downpour", algorithm_names());
  for (const auto& [n, f] : kRules) {
    if (name != n) continue;
    auto a = f(section);
    section.reject_unknown();
    return a;
  }
  return nullptr;
}

}  // namespace mpigan::algos
