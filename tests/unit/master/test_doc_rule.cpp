// The example rule of docs/algorithms.md ("downpour with bounded staleness"), compiled from the
// document itself (tests/CMakeLists.txt) and run through the master's real update service: the
// guide's code compiles against the current API and does what the guide says.
#include "service_stub.hpp"

namespace mpigan::algos {
std::unique_ptr<Algorithm> make_bounded(ConfigNode& c);  // defined by the guide's code
}  // namespace mpigan::algos

using namespace mpigan;
using master::Outcome;

TEST_CASE("the guide's example rule: updates staler than max_staleness are dropped, the others applied") {
  ConfigDocument doc = ConfigDocument::parse("algorithm: {max_staleness: 1}\n", "bounded.yaml");
  ConfigNode root = doc.root();
  ConfigNode section = root.section("algorithm");
  auto rule = algos::make_bounded(section);
  section.reject_unknown();
  doc.finish();
  REQUIRE(rule);
  CHECK(rule->name() == "bounded");
  CHECK(rule->describe() == "bounded: staleness <= 1");
  // Three workers, all given version 0; SGD with lr 0.5 on the master, whose optimizer warms up over
  // the first 3 updates (the default of OptimizerApply: factors 1/3, 2/3, 1): w <- w - 0.5 f g.
  test::ServiceStub stub(std::move(rule), {1.0f, 2.0f}, 3, test::ServiceStub::sgd(0.5));
  const auto g = stub.payload({1.0f, 1.0f});
  const auto weights_are = [&](double a, double b) {
    const auto w = stub.weights();
    CHECK(w[0] == doctest::Approx(a).epsilon(1e-6));
    CHECK(w[1] == doctest::Approx(b).epsilon(1e-6));
  };
  CHECK(stub.submit(0, g, 0).outcome == Outcome::applied);  // staleness 0
  weights_are(1.0 - 0.5 / 3, 2.0 - 0.5 / 3);
  CHECK(stub.submit(1, g, 0).outcome == Outcome::applied);  // staleness 1
  weights_are(0.5, 1.5);
  CHECK(stub.submit(2, g, 0).outcome == Outcome::rejected_by_rule);  // staleness 2: dropped
  weights_are(0.5, 1.5);
  CHECK(stub.version() == 2);
  // Pulled again, it is applied, and its reply is the new weights.
  CHECK(stub.submit(2, g, 2).outcome == Outcome::applied);
  weights_are(0.0, 1.0);
  CHECK(stub.slots[2][0] == doctest::Approx(0.0).epsilon(1e-6));
  CHECK(stub.slots[2][1] == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("the guide's example rule: an out-of-range max_staleness is reported with its line") {
  ConfigDocument doc = ConfigDocument::parse("algorithm:\n  max_staleness: -3\n", "bounded.yaml");
  ConfigNode root = doc.root();
  ConfigNode section = root.section("algorithm");
  (void)algos::make_bounded(section);
  CHECK_THROWS_WITH_AS(doc.finish(), doctest::Contains("bounded.yaml:2:18: algorithm.max_staleness"), ConfigError);
}
