// Output paths checked before anything is written: errors that name the path and the reason, not
// a filesystem exception's text or HDF5's error stack.
#pragma once

#include <string>
#include <string_view>

namespace mpigan {

/// @p path can be written as a file: its directory exists and @p path is not a directory. An Error
/// "WHAT: cannot write 'PATH': the directory 'DIR' does not exist" or "WHAT: 'PATH' is a directory:
/// give a file name" otherwise.
void check_output_file(const std::string& path, std::string_view what);

/// Creates the directory @p dir with its parents where missing. An Error "WHAT 'DIR': REASON"
/// (the system's reason, or that a file of that name exists) otherwise; @p what says which
/// directory, e.g. "validate: cannot create the report directory".
void make_output_directory(const std::string& dir, std::string_view what);

}  // namespace mpigan
