// Rules the masters use that are not chosen by name: the top master's rule above sub-masters.
// (Named rules are found through the registry: make_algorithm in rule.hpp.)
#pragma once

#include "mpigan/algos/rule.hpp"

namespace mpigan::algos {

/// The top master's rule above sub-masters (tree.cpp): their weight changes added times @p scale,
/// or averaged in rounds when the sub-masters' rule is synchronous. Not registered under a name.
std::unique_ptr<MasterRule> make_tree_master(ParameterSet& weights, bool synchronous, float scale);

}  // namespace mpigan::algos
