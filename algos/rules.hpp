// Factories of the built-in update rules (one .cpp each); registry.cpp maps names to them.
// Each reads its parameters from the experiment's `algorithm` section and records problems there.
#pragma once

#include "mpigan/algos/rule.hpp"

namespace mpigan::algos {

std::unique_ptr<Algorithm> make_sync(ConfigNode& c);      // sync.cpp
std::unique_ptr<Algorithm> make_downpour(ConfigNode& c);  // downpour.cpp
std::unique_ptr<Algorithm> make_easgd(ConfigNode& c);     // easgd.cpp
std::unique_ptr<Algorithm> make_gem(ConfigNode& c);       // gem.cpp
std::unique_ptr<Algorithm> make_dc_asgd(ConfigNode& c);   // dc_asgd.cpp

}  // namespace mpigan::algos
