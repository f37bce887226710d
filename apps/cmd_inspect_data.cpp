// `mpigan inspect FILE.h5`: validate a calorimeter data file completely (every event is read) and
// print its events, datasets, energy and angle ranges and the detected units. Bad input throws a
// DataError naming the file, dataset and event, which main() reports with a non-zero exit.
#include "commands.hpp"

#include "mpigan/data/inspect.hpp"

#include <fmt/format.h>

namespace mpigan::apps {

int inspect_data_file(const std::string& path) {
  const data::FileSummary summary = data::inspect_file(path);
  fmt::print("{}", data::format_summary(summary));
  return 0;
}

}  // namespace mpigan::apps
