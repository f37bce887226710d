// A master's watch over its children's silences (master/child_watch.hpp): the automatic limit
// follows each child's own pace, a configured one wins, and the report names rank and checkpoint.
#include <doctest/doctest.h>

#include "mpigan/master/child_watch.hpp"

#include <vector>

using namespace mpigan::master;

TEST_CASE("child watch: the silence limit follows the child's pace; the report names it") {
  ChildWatch w;
  w.awaiting(0.0);
  CHECK(w.limit(0) == 600.0);    // start-up: no pace known yet
  CHECK(w.limit(3.0) == 600.0);  // not even a configured limit before the first request
  w.arrived(5.0, 0.0);
  CHECK(w.limit(3.0) == 3.0);
  CHECK(w.limit(0) == 600.0);  // one request: still no interval
  double t = 5.0;
  for (int i = 0; i < 50; ++i) {  // a request every 10 s
    w.arrived(t + 10.0, t);
    t += 10.0;
  }
  CHECK(w.limit(0) == doctest::Approx(200.0));  // 20 intervals
  ChildWatch fast;
  for (int i = 0; i < 10; ++i) fast.arrived(0.5 * (i + 1), 0.5 * i);
  CHECK(fast.limit(0) == 60.0);   // at least 60 s
  CHECK(fast.limit(3.0) == 3.0);  // topology.rank_timeout wins
  w.awaiting(t);
  CHECK_FALSE(w.too_long(t + 199.0, 0));
  CHECK(w.too_long(t + 201.0, 0));
  const std::vector<SilentChild> one{{2, 1, w.silent_for(t + 201.0), w.limit(0)}};
  const std::string r = hung_report(one, 0, 140, "runs/x");
  CHECK(r.find("rank 2 (child 1 of this master) has sent nothing for 201 s, more than its limit of 200 s") !=
        std::string::npos);
  CHECK(r.find(": it is hung or stopped") != std::string::npos);
  CHECK(r.find("The last complete checkpoint is step 140: resume with --resume runs/x") != std::string::npos);
  CHECK(hung_report(one, 0, -1, "runs/x").find("No complete checkpoint") != std::string::npos);
  // A second child found silent while the job ends: both are named, each with its own silence.
  const std::vector<SilentChild> two{{1, 0, 5.2, 3.0}, {2, 1, 7.4, 3.0}};
  const std::string r2 = hung_report(two, 3.0, 27, "runs/y");
  CHECK(r2.find("rank 1 (child 0 of this master) has sent nothing for 5 s, more than its limit of 3 s "
                "(topology.rank_timeout); rank 2 (child 1 of this master) has sent nothing for 7 s") !=
        std::string::npos);
  CHECK(r2.find(": they are hung or stopped") != std::string::npos);
  CHECK(r2.find("step 27: resume with --resume runs/y") != std::string::npos);
}
