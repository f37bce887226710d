// Logging: spdlog with the process label (rank) in every line. One logger for the process; the
// level comes from the experiment's logging section or MPIGAN_LOG_LEVEL.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace mpigan {

/// Configure the default logger: pattern with the process label, level ("trace".."off").
/// Throws Error for an unknown level name.
void init_logging(const std::string& level = "info");
/// Parse a level name; throws Error naming the allowed ones.
spdlog::level::level_enum parse_log_level(const std::string& level);

}  // namespace mpigan
