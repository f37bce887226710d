// Settings read from environment variables (the backends' MPIGAN_CPU_* and MPIGAN_CUDA_* switches,
// MPIGAN_GROUP_REDUCE): one reader, so that every such variable treats an empty value as unset and
// refuses a value it does not know with a ConfigError that names the variable, the value and every
// value it allows, with what each means.
#pragma once

#include "mpigan/core/error.hpp"

#include <cstddef>
#include <string>

namespace mpigan {

/// Environment variable @p name's value; null when it is unset or empty.
const char* env_value(const char* name);

/// Flag variable @p name: 1/on/ON/true or 0/off/OFF/false, @p fallback when unset; anything else
/// throws a ConfigError naming it.
bool env_flag(const char* name, bool fallback);

/// One value a choice variable may take: its name, what it means (for the error), the value.
template <class E>
struct EnvChoice {
  const char* name;
  const char* meaning;
  E value;
};

namespace detail {
[[noreturn]] void throw_bad_env_choice(const char* var, const char* value, const std::string& allowed);
}  // namespace detail

/// The value of environment variable @p var among @p choices, @p fallback when it is unset or
/// empty; any other value throws a ConfigError listing every allowed one and its meaning.
template <class E, std::size_t N>
E env_choice(const char* var, const EnvChoice<E> (&choices)[N], E fallback) {
  const char* v = env_value(var);
  if (v == nullptr) return fallback;
  for (const auto& c : choices)
    if (std::string(v) == c.name) return c.value;
  std::string allowed;
  for (std::size_t i = 0; i < N; ++i)
    allowed += fmt::format("{}'{}' ({})",
                           i == 0       ? ""
                           : i + 1 == N ? " and "
                                        : ", ",
                           choices[i].name, choices[i].meaning);
  detail::throw_bad_env_choice(var, v, allowed);
}

/// The name of @p value among @p choices ("?" when it is none of them).
template <class E, std::size_t N>
const char* env_choice_name(const EnvChoice<E> (&choices)[N], E value) {
  for (const auto& c : choices)
    if (c.value == value) return c.name;
  return "?";
}

}  // namespace mpigan
