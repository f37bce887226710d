// Running the project's plotting scripts (commands.hpp: run_python_script).
#include "commands.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace mpigan::apps {

bool run_python_script(const std::string& name, const std::vector<std::string>& args) {
  // An installed mpigan (the container image) names the folder of its scripts; a build uses its sources'.
  const char* dir = std::getenv("MPIGAN_SCRIPTS");
  const std::string script =
      (dir != nullptr && *dir != '\0' ? std::string(dir) : std::string(MPIGAN_SOURCE_DIR) + "/scripts") + "/" + name;
  if (!std::filesystem::exists(script)) {
    std::printf(
        "plots: %s not found (set MPIGAN_SCRIPTS to the folder of mpigan's plotting scripts, or keep the "
        "source tree this mpigan was built from)\n",
        script.c_str());
    return false;
  }
  std::string cmd = "/usr/bin/python3 '" + script + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::printf(
        "plots: '%s' failed: its message is above (it needs python3-matplotlib, which scripts/setup.sh installs)\n",
        cmd.c_str());
    return false;
  }
  return true;
}

}  // namespace mpigan::apps
