// Error formatting and the process label.
#include "mpigan/core/error.hpp"

#include <cstring>

namespace mpigan {
namespace {
std::string& label_storage() {
  static std::string label;
  return label;
}

std::string compose(const std::string& location, const std::string& message) {
  const std::string& label = process_label();
  return label.empty() ? location + ": " + message : "[" + label + "] " + location + ": " + message;
}

std::string join_problems(const std::vector<std::string>& problems) {
  std::string out = fmt::format("{} problem{} in the configuration:", problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems) out += "\n  - " + p;
  return out;
}
}  // namespace

void set_process_label(std::string label) {
  label_storage() = std::move(label);
}
const std::string& process_label() {
  return label_storage();
}

Error::Error(std::string location, std::string message)
    : std::runtime_error(compose(location, message)), m_location(std::move(location)), m_message(std::move(message)) {}

ConfigError::ConfigError(std::string location, std::vector<std::string> problems)
    : Error(std::move(location), join_problems(problems)), m_problems(std::move(problems)) {}

namespace detail {
std::string source_location(const char* file, int line) {
  // Headers are reached through build/include-roots/<layer>/mpigan/<layer>/x.hpp and sources
  // through <repo>/<layer>/x.cpp; keep the part from the layer directory on.
  std::string path = file;
  if (auto pos = path.rfind("/mpigan/"); pos != std::string::npos) {
    path = path.substr(pos + std::strlen("/mpigan/"));
  } else if (auto root = std::string_view(MPIGAN_SOURCE_DIR); path.starts_with(root)) {
    path = path.substr(root.size() + 1);
  }
  return path + ":" + std::to_string(line);
}
}  // namespace detail
}  // namespace mpigan
