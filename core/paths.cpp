#include "mpigan/core/paths.hpp"

#include "mpigan/core/error.hpp"

#include <filesystem>
#include <system_error>

namespace mpigan {

namespace fs = std::filesystem;

void check_output_file(const std::string& path, std::string_view what) {
  const fs::path dir = fs::absolute(path).parent_path();
  MPIGAN_CHECK(fs::is_directory(dir), "{}: cannot write '{}': the directory '{}' does not exist", what, path,
               dir.string());
  MPIGAN_CHECK(!fs::is_directory(path), "{}: '{}' is a directory: give a file name", what, path);
}

void make_output_directory(const std::string& dir, std::string_view what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  MPIGAN_CHECK(!ec && fs::is_directory(dir), "{} '{}': {}", what, dir,
               ec ? ec.message() : std::string("a file of that name exists"));
}

}  // namespace mpigan
