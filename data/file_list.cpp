// Glob and @list-file expansion (see file_list.hpp).
#include "mpigan/data/file_list.hpp"

#include "mpigan/core/error.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace mpigan::data {
namespace {

bool has_wildcard(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

void expand_one(const std::string& entry, const std::string& origin, std::vector<std::string>& out) {
  if (!has_wildcard(entry)) {
    out.push_back(entry);
    return;
  }
  glob_t g{};
  const int rc = ::glob(entry.c_str(), 0, nullptr, &g);
  std::vector<std::string> matches;
  if (rc == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (matches.empty()) MPIGAN_THROW(DataError, "file pattern '{}'{} matches no files", entry, origin);
  std::sort(matches.begin(), matches.end());
  out.insert(out.end(), matches.begin(), matches.end());
}

}  // namespace

std::vector<std::string> expand_file_list(const std::vector<std::string>& entries) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& entry : entries) {
    if (entry.empty()) continue;
    if (entry[0] != '@') {
      expand_one(entry, "", out);
      continue;
    }
    const std::string list = entry.substr(1);
    // A list is a small text file: a device or a FIFO (@/dev/zero) would be read forever.
    constexpr std::uintmax_t kMaxListBytes = 16u << 20;
    std::error_code ec;
    if (!fs::is_regular_file(list, ec))
      MPIGAN_THROW(DataError, "file list '{}' {}: expected a regular text file with one file or pattern per line", list,
                   fs::exists(list, ec) ? "is not a regular file" : "does not exist");
    if (const auto bytes = fs::file_size(list, ec); !ec && bytes > kMaxListBytes)
      MPIGAN_THROW(DataError, "file list '{}' holds {} bytes, more than the {} MiB a list of data files may have", list,
                   bytes, kMaxListBytes >> 20);
    std::ifstream in(list);
    if (!in) MPIGAN_THROW(DataError, "file list '{}' cannot be read", list);
    const fs::path base = fs::path(list).parent_path();
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      const auto b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      const auto e = line.find_last_not_of(" \t\r");
      std::string item = line.substr(b, e - b + 1);
      if (fs::path(item).is_relative() && !base.empty()) item = (base / item).string();
      expand_one(item, fmt::format(" (file list '{}' line {})", list, lineno), out);
    }
  }
  std::set<std::string> seen;
  for (const auto& p : out) {
    std::error_code ec;
    const auto canon = fs::weakly_canonical(p, ec);
    const std::string key = ec ? p : canon.string();
    if (!seen.insert(key).second) {
      MPIGAN_THROW(DataError, "data file '{}' is listed twice; every event must be seen once per epoch", p);
    }
  }
  return out;
}

}  // namespace mpigan::data
