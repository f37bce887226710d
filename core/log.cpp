// Logging setup: the process-wide spdlog logger, its level and its rank label (log.hpp).
#include "mpigan/core/log.hpp"

#include "mpigan/core/error.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mpigan {

spdlog::level::level_enum parse_log_level(const std::string& level) {
  using L = spdlog::level::level_enum;
  static const std::pair<const char*, L> kLevels[] = {
      {"trace", L::trace},  {"debug", L::debug}, {"info", L::info},         {"warn", L::warn},
      {"warning", L::warn}, {"error", L::err},   {"critical", L::critical}, {"off", L::off}};
  for (const auto& [name, l] : kLevels)
    if (level == name) return l;
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
