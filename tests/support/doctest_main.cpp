// The doctest main shared by the serial suites. The directories the cases made with
// test::temp_dir are removed when every case passed, and kept (and named) when one failed or
// MPIGAN_KEEP_TEST_DIRS is set, as the MPI suite keeps its job directory.
#define DOCTEST_CONFIG_IMPLEMENT
#include "test_utils.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit()) return rc;
  const bool keep = rc != 0 || std::getenv("MPIGAN_KEEP_TEST_DIRS") != nullptr;
  for (const std::string& dir : mpigan::test::made_temp_dirs()) {
    if (keep) {
      std::printf("kept %s\n", dir.c_str());
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  return rc;
}
