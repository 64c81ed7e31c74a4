#!/bin/sh
# Runs one libFuzzer target for a while; called by `make fuzz`.
#   sh fuzz/run_fuzzer.sh <target> <seconds> <build dir> "<libFuzzer flags>"
# Corpus directories, in libFuzzer's order (new inputs are written to the first one only):
#   <build dir>/corpus/<target>/    what earlier runs discovered (kept between runs, not committed)
#   fuzz/corpus/<target>/           committed seeds
#   <build dir>/seeds/<target>/     generated seeds (the checkpoint target: real files from save_checkpoint)
# tests/regressions/<target>/ is not among them: a known crash would end every run in its first second, before
# any fuzzing. Those files are replayed by the test suite (HardeningRegressions) and by `make fuzz-replay`.
# On a crash the input is minimized into <build dir>/artifacts/<target>/minimized-*; copy that file into
# tests/regressions/<target>/ and fix the bug (tests/test_hardening.cpp replays that directory).
set -u
target=$1
seconds=$2
dir=$3
flags=$4
bin="$dir/fuzz_$target"
work="$dir/corpus/$target"
artifacts="$dir/artifacts/$target"
mkdir -p "$work" "$artifacts"

set -- "$work"
for d in "fuzz/corpus/$target" "$dir/seeds/$target"; do
  [ -d "$d" ] && set -- "$@" "$d"
done
dict=""
[ -f "fuzz/$target.dict" ] && dict="-dict=fuzz/$target.dict"

echo "=== fuzz_$target: ${seconds}s"
# -print_final_stats prints stat::number_of_executed_units and stat::average_exec_per_sec at the end.
# shellcheck disable=SC2086
"$bin" $flags $dict -max_total_time="$seconds" -artifact_prefix="$artifacts/" "$@" 2>"$artifacts/log.txt"
status=$?
grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' \
  "$artifacts/log.txt" | sed "s/^/fuzz_$target: /"
grep -E '^#[0-9]+[[:space:]]+DONE' "$artifacts/log.txt" | tail -1 | sed "s/^/fuzz_$target: /"
if [ $status -ne 0 ]; then
  echo "fuzz_$target: FAILED (exit $status); the report:" >&2
  grep -E -A40 '^==[0-9]+==ERROR|FUZZ_CHECK failed|runtime error|^==[0-9]+== ERROR' "$artifacts/log.txt" | head -80 >&2
  for crash in "$artifacts"/crash-* "$artifacts"/oom-* "$artifacts"/timeout-* "$artifacts"/leak-*; do
    [ -f "$crash" ] || continue
    minimized="$artifacts/minimized-$(basename "$crash")"
    # shellcheck disable=SC2086
    "$bin" $flags -minimize_crash=1 -max_total_time=30 -exact_artifact_path="$minimized" "$crash" \
      >/dev/null 2>&1 || true
    [ -f "$minimized" ] || cp "$crash" "$minimized"
    echo "fuzz_$target: crash input $crash, minimized: $minimized" >&2
    echo "fuzz_$target:   keep it: cp $minimized tests/regressions/$target/" >&2
  done
  exit 1
fi
echo "fuzz_$target: no crash"
