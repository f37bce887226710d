// Settings read from environment variables.
#include "mpigan/core/env.hpp"

#include <cstdlib>
#include <string_view>

namespace mpigan {

const char* env_value(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = env_value(name);
  if (v == nullptr) return fallback;
  const std::string_view s(v);
  if (s == "1" || s == "on" || s == "ON" || s == "true") return true;
  if (s == "0" || s == "off" || s == "OFF" || s == "false") return false;
  MPIGAN_THROW(ConfigError, "environment variable {}='{}' is not a flag: use 1/0, on/off or true/false", name, s);
}

namespace detail {
void throw_bad_env_choice(const char* var, const char* value, const std::string& allowed) {
  MPIGAN_THROW(ConfigError, "environment variable {}='{}': allowed are {}", var, value, allowed);
}
}  // namespace detail

}  // namespace mpigan
