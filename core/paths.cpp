#include "mpigan/core/paths.hpp"

#include "mpigan/core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

void write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what,
                           std::string_view advice) {
  const std::string tmp = path + ".tmp";
  std::size_t written = 0;
  const auto fail = [&](const char* step, int err) {
    std::error_code ec;
    fs::remove(tmp, ec);
    const auto space = fs::space(fs::absolute(tmp).parent_path(), ec);
    MPIGAN_FATAL(
        "{} '{}' could not be written: {} '{}' failed after {} of {} bytes: {} (errno {}); the temporary file is "
        "removed, '{}' is unchanged and {} bytes are free there{}",
        what, path, step, tmp, written, bytes.size(), std::strerror(err), err, path,
        ec ? std::string("?") : std::to_string(space.available), advice);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("creating", errno);
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n == 0 ? ENOSPC : errno;
      ::close(fd);
      fail("writing", err);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("syncing", err);
  }
  if (::close(fd) != 0) fail("closing", errno);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("renaming", ec.value());
}

}  // namespace mpigan
