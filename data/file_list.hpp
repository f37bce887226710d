// File lists for datasets: explicit paths, shell globs and @list files.
//
// Invariants of expand_file_list():
//  - The result is in the order of the entries; the matches of one glob are sorted by name, so the
//    same patterns give the same order on every rank and every run.
//  - An entry "@FILE" reads FILE: one path or glob per line; blank lines and lines starting with
//    '#' are ignored; relative paths are relative to FILE's directory.
//  - A glob that matches nothing, an unreadable list file, and a path that appears twice are
//    DataErrors (a file listed twice would be seen twice per epoch). Literal paths are passed on
//    as they are: opening them reports a missing file.
#pragma once

#include <string>
#include <vector>

namespace mpigan::data {

std::vector<std::string> expand_file_list(const std::vector<std::string>& entries);

}  // namespace mpigan::data
