#!/usr/bin/env bash
# The speed of the explorer's Explorer III answers (docs/explore.md): /api/timeline (its scores cached), /api/ablate
# (two heads, zero and mean), /api/lens (the text's forward remembered, then a new text each time), /api/head (one
# head step by step) and /api/refresh
# beside them, each asked 11 times with curl; prints the median, min and max in seconds and the load average.
# Usage: tools/explore_answers.sh URL   (a running ./inspect serve on a run folder with snapshots and a model whose
# vocabulary holds the text below, e.g. ./train --preset tiny --steps 200 --snapshot-every 20 --out build/ex3-tiny)
set -e
url=$1
med() { sort -n | awk '{a[NR]=$1} END {print "median " a[int((NR+1)/2)] " s, min " a[1] " s, max " a[NR] " s over " NR}'; }
# eleven() CURL-ARGS…: the same request 11 times, its median, min and max
eleven() {
  for i in $(seq 11); do
    curl -s -o /dev/null -w '%{time_total}\n' "$@"
  done | med
}
T='text=Once upon a time there was a little girl named Mira who lived'
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo -n "timeline (first: scores every snapshot not yet cached): "
curl -s -o /dev/null -w '%{time_total} s\n' "${url}api/timeline"
echo -n "timeline (cached): "
eleven "${url}api/timeline"
echo -n "refresh (for comparison): "
eleven --data-urlencode "$T" "${url}api/refresh"
for how in zero mean; do
  echo -n "ablate 0.0,1.2 $how: "
  eleven --data-urlencode "$T" -d heads=0.0,1.2 -d how=$how "${url}api/ablate"
done
echo -n "lens pos 40 (the text's forward remembered): "
eleven --data-urlencode "$T" -d pos=40 "${url}api/lens"
echo -n "lens pos 40 (a new text each time: one forward each): "
for i in $(seq 11); do
  end=$([ $((i % 2)) = 0 ] && echo d || echo s)
  curl -s -o /dev/null -w '%{time_total}\n' --data-urlencode "${T%d}$end" -d pos=40 "${url}api/lens"
done | med
echo -n "head 1.2 at 40, step by step: "
eleven --data-urlencode "$T" -d position=40 -d layer=1 -d head=2 "${url}api/head"
echo "load after: $(uptime | sed 's/.*load average/load average/')"
