// Output paths checked before anything is written, and files replaced atomically: errors that name
// the path and the reason, not a filesystem exception's text or HDF5's error stack.
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

/// Replaces @p path with @p bytes: writes PATH.tmp, syncs it to disk and renames it over @p path,
/// so that a reader (a resume, another rank, a user) sees the old file or the new one, never a part.
/// On a failure (a full disk, a quota, a missing directory) PATH.tmp is removed, @p path is left as
/// it was, and an Error reads "WHAT 'PATH' could not be written: STEP 'PATH.tmp' failed after W of N
/// bytes: REASON (errno E); the temporary file is removed, 'PATH' is unchanged and F bytes are free
/// there" followed by @p advice (e.g. ". The previous checkpoint stays 'latest': ..."). STEP is
/// creating, writing, syncing, closing or renaming; @p what names the file for its reader
/// ("checkpoint", "export: the ONNX model").
void write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what,
                           std::string_view advice = {});

}  // namespace mpigan
