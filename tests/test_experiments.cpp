// The experiments (experiments/*.cpp) end to end at the smallest budgets: each trains what it is given and writes
// its tables, and the tables read back from an experiment's own CSV (--from, how runs split over processes are
// joined) are the tables the run wrote. What they measure is in docs/; here only that they run.
#include <gtest/gtest.h>

#include <string>

#include "mixer_kinds.h"
#include "program_util.h"

using progutil::quote;
using progutil::RunResult;
using progutil::run_in;
using progutil::TempDir;

// Two kinds from the registry, comma-separated: the first (the GPT's own, which ./mixers' list must start with)
// and the last; `suffix` follows the second (a model setting, ":positions=none").
static std::string first_and_last_kind(const std::string& suffix = "") {
  const std::vector<std::string> kinds = testutil::registered_kinds();
  return kinds.front() + "," + kinds.back() + suffix;
}

// ./mixers refused every model before it knew the corpus's vocabulary (its up-front check saw vocab_size 0).
TEST(Experiments, MixersTrainsAndScoresTheModelsItIsGiven) {
  TempDir dir;
  progutil::write_corpus(dir);
  const RunResult r = run_in(dir, "./build/bin/mixers --models " + first_and_last_kind() + " --steps 2 --seeds 1 "
                                  "--rounds 1 --reps 1 --equal-time=false --threads 1 --data " +
                                  quote(dir / "corpus.txt") + " --out " + quote(dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string table = progutil::read_file(dir / "m/table.md");
  for (const std::string& kind : {testutil::registered_kinds().front(), testutil::registered_kinds().back()})
    EXPECT_CONTAINS(table, "| " + kind + " |");
}

// Runs `flags` into dir/run, then the same flags with --from dir/run/<csv> into dir/joined: the markdown tables of
// the two must be the same.
static void expect_tables_survive_their_csv(const std::string& program, const std::string& flags,
                                            const std::string& csv, const std::string& md) {
  TempDir dir;
  const RunResult run = run_in(dir, program + " " + flags + " --out " + quote(dir / "run"));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  const RunResult joined = run_in(dir, program + " " + flags + " --from " + quote(dir / ("run/" + csv)) + " --out " +
                                           quote(dir / "joined"));
  ASSERT_EQ(joined.exit_code, 0) << joined.describe();
  const std::string tables = progutil::read_file(dir / ("run/" + md));
  EXPECT_CONTAINS(tables, "±") << "two seeds: every cell a mean ± sd";
  EXPECT_EQ(progutil::read_file(dir / ("joined/" + md)), tables);
}

TEST(Experiments, StateTrackingTablesReadBackFromTheirCsv) {
  expect_tables_survive_their_csv("./build/bin/state_tracking",
                                  "--models " + first_and_last_kind(":positions=none") +
                                      " --layers 1 --seeds 2 --steps 2 --width 16 --test-length 72 --threads 1",
                                  "state_tracking.csv", "state_tracking.md");
}

TEST(Experiments, RecallTablesReadBackFromTheirCsv) {
  expect_tables_survive_their_csv("./build/bin/recall",
                                  "--models " + first_and_last_kind() +
                                      " --pairs 4 --widths 16 --seeds 2 --steps 2 --threads 1",
                                  "recall.csv", "recall.md");
}
