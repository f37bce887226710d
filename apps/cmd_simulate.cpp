// Placeholder while the simulator is written; replaced by the real subcommand.
#include "commands.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::apps {
void add_simulate_command(CLI::App& app) {
  app.add_subcommand("simulate", "(not yet built)")->callback([] { MPIGAN_FATAL("'simulate' is not built yet"); });
}
}  // namespace mpigan::apps
