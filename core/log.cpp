#include "mpigan/core/log.hpp"

#include "mpigan/core/error.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mpigan {

spdlog::level::level_enum parse_log_level(const std::string& level) {
  for (int l = spdlog::level::trace; l <= spdlog::level::off; ++l) {
    const auto lvl = static_cast<spdlog::level::level_enum>(l);
    if (level == spdlog::level::to_string_view(lvl)) return lvl;
  }
  if (level == "warning") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  MPIGAN_FATAL("unknown log level '{}': expected one of trace, debug, info, warn, error, critical, off", level);
}

void init_logging(const std::string& level) {
  spdlog::drop("mpigan");
  auto logger = spdlog::stderr_color_mt("mpigan");
  const std::string& label = process_label();
  logger->set_pattern(label.empty() ? "[%H:%M:%S.%e] [%^%l%$] %v" : "[%H:%M:%S.%e] [" + label + "] [%^%l%$] %v");
  logger->set_level(parse_log_level(level));
  spdlog::set_default_logger(logger);
}

}  // namespace mpigan
