// Output paths: the checks made before anything is written, and files replaced atomically, with
// errors that name the path, the step and the system's reason, and leave the target as it was.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace mpigan;
namespace fs = std::filesystem;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("write_file_atomically writes, replaces, and leaves no temporary file") {
  const std::string dir = test::temp_dir("paths-write");
  const std::string path = dir + "/a.txt";
  write_file_atomically(path, "first\n", "test file");
  CHECK(read(path) == "first\n");
  const std::string binary("a\0b\0c", 5);  // bytes, not a C string
  write_file_atomically(path, binary, "test file");
  CHECK(read(path) == binary);
  write_file_atomically(path, "", "test file");
  CHECK(fs::exists(path));
  CHECK(fs::file_size(path) == 0);
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("write_file_atomically: a missing directory and a directory in the way are named, nothing is left") {
  const std::string dir = test::temp_dir("paths-fail");
  const std::string missing = dir + "/no-such-dir/a.txt";
  std::string what = test::error_message<Error>([&] { write_file_atomically(missing, "12345", "test file"); });
  INFO(what);
  CHECK(what.find("test file '" + missing + "' could not be written: creating '" + missing +
                  ".tmp' failed after 0 of 5 bytes") != std::string::npos);
  CHECK(what.find("(errno " + std::to_string(ENOENT) + ")") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/no-such-dir"));

  // A non-empty directory where the file should go: the rename fails, the directory stays.
  const std::string occupied = dir + "/occupied";
  fs::create_directories(occupied + "/inside");
  what = test::error_message<Error>([&] { write_file_atomically(occupied, "12345", "test file", ". Advice follows"); });
  INFO(what);
  CHECK(what.find("renaming '" + occupied + ".tmp' failed after 5 of 5 bytes") != std::string::npos);
  CHECK(what.find("'" + occupied + "' is unchanged") != std::string::npos);
  CHECK(what.find("bytes are free there. Advice follows") != std::string::npos);
  CHECK_FALSE(fs::exists(occupied + ".tmp"));
  CHECK(fs::is_directory(occupied + "/inside"));
}

TEST_CASE("check_output_file and make_output_directory name the path and what is wrong") {
  const std::string dir = test::temp_dir("paths-check");
  CHECK_NOTHROW(check_output_file(dir + "/new.h5", "generate"));
  std::string what = test::error_message<Error>([&] { check_output_file(dir + "/missing/new.h5", "generate"); });
  CHECK(what.find("generate: cannot write '" + dir + "/missing/new.h5': the directory '" + dir +
                  "/missing' does not exist") != std::string::npos);
  what = test::error_message<Error>([&] { check_output_file(dir, "generate"); });
  CHECK(what.find("generate: '" + dir + "' is a directory: give a file name") != std::string::npos);

  make_output_directory(dir + "/a/b/c", "report: cannot create the directory");
  CHECK(fs::is_directory(dir + "/a/b/c"));
  CHECK_NOTHROW(make_output_directory(dir + "/a/b/c", "report: cannot create the directory"));
  std::ofstream(dir + "/plain") << "x";
  what =
      test::error_message<Error>([&] { make_output_directory(dir + "/plain", "report: cannot create the directory"); });
  CHECK(what.find("report: cannot create the directory '" + dir + "/plain'") != std::string::npos);
}
