// Placeholder while the engine is written; replaced by the real subcommand.
#include "commands.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::apps {
void add_bench_command(CLI::App& app) {
  app.add_subcommand("bench", "(not yet built)")->callback([] { MPIGAN_FATAL("'bench' is not built yet"); });
}
}  // namespace mpigan::apps
