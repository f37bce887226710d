// Running the project's plotting scripts (commands.hpp: run_python_script).
#include "commands.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace mpigan::apps {

bool run_python_script(const std::string& name, const std::vector<std::string>& args) {
  const std::string script = std::string(MPIGAN_SOURCE_DIR) + "/scripts/" + name;
  if (!std::filesystem::exists(script)) {
    std::printf("plots: %s not found (the source tree this mpigan was built from is gone)\n", script.c_str());
    return false;
  }
  std::string cmd = "/usr/bin/python3 '" + script + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::printf("plots: '%s' failed (python3-matplotlib installed? scripts/setup.sh installs it)\n", cmd.c_str());
    return false;
  }
  return true;
}

}  // namespace mpigan::apps
