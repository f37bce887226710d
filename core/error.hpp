// Errors with context: every exception mpigan throws carries the process label (rank), the
// source location, and a message that names the object and gives expected versus found.
//
//   MPIGAN_CHECK(src.shape() == want, "layer '{}': input shape expected {}, found {}", name, want, src.shape());
//
// Library code throws; only an executable's main() catches, logs and ends the job (MPI_Abort
// when several ranks run). Never exit() in library code.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace mpigan {

/// The label this process puts in front of its errors and log lines ("rank 3", "rank 0 master").
/// Set once by the executable after MPI start-up; empty in single-process tools.
void set_process_label(std::string label);
const std::string& process_label();

/// Base of all mpigan exceptions. what() = "[label] file:line: message".
class Error : public std::runtime_error {
 public:
  Error(std::string location, std::string message);
  const std::string& location() const noexcept { return m_location; }
  const std::string& message() const noexcept { return m_message; }

 private:
  std::string m_location;
  std::string m_message;
};

/// Bad user configuration (YAML, command line). Holds every problem found, not just the first.
class ConfigError : public Error {
 public:
  ConfigError(std::string location, std::vector<std::string> problems);
  const std::vector<std::string>& problems() const noexcept { return m_problems; }

 private:
  std::vector<std::string> m_problems;
};

/// Bad or unreadable input data (HDF5 files, datasets, events).
class DataError : public Error {
 public:
  using Error::Error;
};

/// A non-finite loss, gradient or update.
class NumericError : public Error {
 public:
  using Error::Error;
};

/// A shape that does not match what an op or layer expects.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// An error every rank of a job knows of: one rank raised it and told the others. The job then
/// ends without MPI_Abort, so the launcher forwards the message whole: the raising rank prints
/// what() and exits with status 1, the ranks that only learned of it (an empty what()) leave
/// quietly with status 0.
class JobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Shortens __FILE__ to the path inside the repository ("nn/conv3d.cpp").
std::string source_location(const char* file, int line);

/// A ConfigError raised this way holds the one formatted message as its only problem.
template <class E, class... Args>
[[noreturn]] void raise(const char* file, int line, fmt::format_string<Args...> format, Args&&... args) {
  if constexpr (std::is_same_v<E, ConfigError>) {
    throw E(source_location(file, line), {fmt::format(format, std::forward<Args>(args)...)});
  } else {
    throw E(source_location(file, line), fmt::format(format, std::forward<Args>(args)...));
  }
}
}  // namespace detail

}  // namespace mpigan

#define MPIGAN_THROW(ExceptionType, ...) ::mpigan::detail::raise<ExceptionType>(__FILE__, __LINE__, __VA_ARGS__)
#define MPIGAN_FATAL(...) MPIGAN_THROW(::mpigan::Error, __VA_ARGS__)
#define MPIGAN_CHECK(cond, ...)  \
  do {                           \
    if (!(cond)) [[unlikely]] {  \
      MPIGAN_FATAL(__VA_ARGS__); \
    }                            \
  } while (0)
#define MPIGAN_CHECK_SHAPE(cond, ...)                  \
  do {                                                 \
    if (!(cond)) [[unlikely]] {                        \
      MPIGAN_THROW(::mpigan::ShapeError, __VA_ARGS__); \
    }                                                  \
  } while (0)
/// Throws a ConfigError listing every problem in @p problems (a std::vector<std::string>) when
/// there is at least one; a single problem is MPIGAN_THROW(::mpigan::ConfigError, "fmt", args...).
#define MPIGAN_CHECK_PROBLEMS(problems)                                                             \
  do {                                                                                              \
    if (!(problems).empty()) [[unlikely]] {                                                         \
      throw ::mpigan::ConfigError(::mpigan::detail::source_location(__FILE__, __LINE__), problems); \
    }                                                                                               \
  } while (0)
