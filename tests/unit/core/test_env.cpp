// Settings from environment variables: flags and choices, unset and empty alike, and a bad value
// refused with the variable, the value and every allowed value named.
#include "test_utils.hpp"

#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"

#include <string>

using namespace mpigan;

namespace {
enum class Colour { red, green, blue };
const EnvChoice<Colour> kColours[] = {
    {"red", "the first", Colour::red}, {"green", "the second", Colour::green}, {"blue", "the third", Colour::blue}};
constexpr const char* kVar = "MPIGAN_TEST_ENV_SETTING";
}  // namespace

TEST_CASE("env_value: unset and empty are both absent") {
  {
    const test::ScopedEnv unset(kVar, nullptr);
    CHECK(env_value(kVar) == nullptr);
  }
  {
    const test::ScopedEnv empty(kVar, "");
    CHECK(env_value(kVar) == nullptr);
  }
  const test::ScopedEnv set(kVar, "x");
  REQUIRE(env_value(kVar) != nullptr);
  CHECK(std::string(env_value(kVar)) == "x");
}

TEST_CASE("env_flag: the spellings of on and off, the fallback, a bad value named") {
  {
    const test::ScopedEnv unset(kVar, nullptr);
    CHECK(env_flag(kVar, true));
    CHECK_FALSE(env_flag(kVar, false));
  }
  for (const char* on : {"1", "on", "ON", "true"}) {
    const test::ScopedEnv v(kVar, on);
    CHECK(env_flag(kVar, false));
  }
  for (const char* off : {"0", "off", "OFF", "false"}) {
    const test::ScopedEnv v(kVar, off);
    CHECK_FALSE(env_flag(kVar, true));
  }
  const test::ScopedEnv bad(kVar, "yes");
  CHECK_THROWS_WITH_AS(env_flag(kVar, false),
                       doctest::Contains("environment variable MPIGAN_TEST_ENV_SETTING='yes' is not a flag"),
                       ConfigError);
}

TEST_CASE("env_choice: each value, the fallback, and every allowed value in the error") {
  {
    const test::ScopedEnv unset(kVar, nullptr);
    CHECK(env_choice(kVar, kColours, Colour::green) == Colour::green);
  }
  {
    const test::ScopedEnv empty(kVar, "");
    CHECK(env_choice(kVar, kColours, Colour::blue) == Colour::blue);
  }
  for (const auto& c : kColours) {
    const test::ScopedEnv v(kVar, c.name);
    CHECK(env_choice(kVar, kColours, Colour::red) == c.value);
    CHECK(std::string(env_choice_name(kColours, c.value)) == c.name);
  }
  const test::ScopedEnv bad(kVar, "Red");  // names are case-sensitive
  CHECK_THROWS_WITH_AS(env_choice(kVar, kColours, Colour::red),
                       doctest::Contains("environment variable MPIGAN_TEST_ENV_SETTING='Red': allowed are 'red' (the "
                                         "first), 'green' (the second) and 'blue' (the third)"),
                       ConfigError);
}
