#!/bin/sh
# bench_sim.sh: rumor-sim (librumor's SWIM in every simulated peer) at 100
# and 1000 peers (RUMOR_SIM_SIZES), each joining over 10 s (30 s at 1000)
# then 90 s with 10% of the peers killed a minute, each replaced, over
# 25 ms +- 5 links. Prints for each size N:
#   sim_N_detect_first_s     a death to the first peer that holds it DEAD (mean)
#   sim_N_gone_all_s         ... to its absence from every view (mean)
#   sim_N_newcomer_all_s     a newcomer's start to its presence in every view
#   sim_N_false_positives    live peers declared DEAD
#   sim_N_msgs_per_s, sim_N_bytes_per_s   what a peer sends a second (mean)
#   sim_N_coverage_min       the least complete view at the end
#   sim_N_rss_kib_per_peer   the simulator's memory a live peer
#   sim_N_events_per_s       the simulator's speed
set -u
SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
sim=$BUILDDIR/rumor-sim
[ -x "$sim" ] || { echo "bench_sim: no $sim"; exit 77; }
command -v python3 >/dev/null || { echo "bench_sim: python3 reads the JSON"; exit 77; }
for N in ${RUMOR_SIM_SIZES:-100 1000}; do
  over=10; [ "$N" -ge 1000 ] && over=30
  out=$("$sim" --peers "$N" --join-over $over --duration 90 --json -q) ||
    { echo "bench_sim: rumor-sim --peers $N failed"; exit 1; }
  echo "$out" | python3 -c '
import json, sys
n = sys.argv[1]
j = json.load(sys.stdin)
def fig(name, v, unit, fmt="%.2f"):
    print("bench: sim_%s_%s = %s %s" % (n, name, "nan" if v is None else fmt % v, unit))
fig("detect_first_s", j["detect_first_mean_s"], "s")
fig("gone_all_s", j["gone_all_mean_s"], "s")
fig("newcomer_all_s", j["newcomer_all_mean_s"], "s")
fig("false_positives", j["false_positives"], "peers", "%d")
fig("msgs_per_s", j["msgs_per_s_mean"], "msgs/s", "%.1f")
fig("bytes_per_s", j["bytes_per_s_mean"], "B/s", "%.0f")
fig("coverage_min", j["coverage_min"], "x", "%.3f")
fig("rss_kib_per_peer", j["simulator"]["rss_per_peer_kib"], "KiB", "%.0f")
fig("events_per_s", j["simulator"]["events_per_s"], "events/s", "%.0f")
' "$N" || exit 1
done
