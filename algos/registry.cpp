// The registry of update rules: name -> factory. Adding a rule = one .cpp + one line here.
#include "mpigan/algos/rules.hpp"

#include <functional>
#include <utility>

namespace mpigan::algos {
namespace {
using Factory = std::unique_ptr<Algorithm> (*)(ConfigNode&);
const std::pair<const char*, Factory> kRules[] = {
    {"sync", make_sync},
    {"downpour", make_downpour},
    {"easgd", make_easgd},
    {"gem", make_gem},
    {"dc_asgd", make_dc_asgd},
};
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
