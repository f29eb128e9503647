#!/bin/sh
# rumor-sim (sim/) against expectations derived from SWIM's parameters
# (gossip/swim.h defaults, which rumor-peer uses: probe_interval 0.5 s,
# probe_timeout 0.25 s, suspicion_mult 5, sync_every 10), not from earlier
# outputs: joins complete and views cover everyone without loss or churn; a
# silent death is declared no earlier than the suspicion timeout and within
# a few probe intervals after it; an orderly leave is known at once; total
# loss isolates every peer; equal seeds give equal runs; training rounds
# match closed forms (rates, the consensus distance of a ring, the
# deadline); bad flags exit 2 naming the flag. About 5 s on 2 cores.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
: "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
sim="$RUMOR_BUILDDIR/rumor-sim"
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# j FILE KEY: a number of rumor-sim's JSON (its keys are unique)
j() { tr -d ' \t\n' <"$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2; }
IVL=0.5 TMO=0.25 MULT=5
# suspicion_timeout for a view of n members (swim.h): mult * max(1, log10 n) * interval
susp() { awk -v n="$1" -v m=$MULT -v i=$IVL 'BEGIN { l = n > 10 ? log(n) / log(10) : 1; print m * l * i }'; }
N=50

# 1. no loss, no churn: every join completes and every view ends with all N.
# Bound: a joiner probes every member of its (full, synced) view once per
# round-robin pass of N-1 intervals, each probe carrying its own record, so
# it is in every view within two passes (a pass already started plus its
# own) even if no gossip helped.
"$sim" --peers $N --join-over 5 --duration 55 --kill-rate 0 --json -q >"$tmp/join.json" 2>"$tmp/err" ||
  fail "join run: $(cat "$tmp/err")"
bound=$(awk -v n=$N -v i=$IVL 'BEGIN { print 2 * (n - 1) * i }')
[ "$(j "$tmp/join.json" started)" = "$N" ] || fail "join: started $(j "$tmp/join.json" started)"
[ "$(j "$tmp/join.json" join_all_n)" = "$N" ] || fail "join: $(j "$tmp/join.json" join_all_n) of $N joins complete"
[ "$(j "$tmp/join.json" join_all_missing)" = "0" ] || fail "join: some joins never completed"
expect_num_le "$(j "$tmp/join.json" join_all_max_s)" "$bound" "join: slowest join into every view"
expect_num_le "$(j "$tmp/join.json" join_half_max_s)" "$(j "$tmp/join.json" join_all_max_s)" "join: half before all"
expect_num_ge "$(j "$tmp/join.json" coverage_min)" 1 "join: lowest view coverage at the end"
[ "$(j "$tmp/join.json" view_max)" = "$N" ] || fail "join: largest view $(j "$tmp/join.json" view_max), expected $N"
[ "$(j "$tmp/join.json" false_positives)" = "0" ] || fail "join: false positives"
# every message costs at least the 80-byte header
expect_num_ge "$(j "$tmp/join.json" bytes)" "$(( $(j "$tmp/join.json" messages) * 80 ))" "join: bytes counted"

# 2. one silent death at t = 30 s, no jitter: declared DEAD somewhere no
# earlier than the suspicion timeout (the suspicion starts after the death)
# and within: 4 intervals for some peer to probe it (49 probers each pick
# it with probability 1/49 an interval: missing 4 intervals in a row is
# ~2%, and the run is seeded), the interval's end (suspected), the
# suspicion timeout, and an interval of slack.
"$sim" --peers $N --join-over 5 --duration 40 --kill-rate 0 --kill-at 30 --jitter 0 --json -q \
  >"$tmp/kill.json" 2>"$tmp/err" || fail "kill run: $(cat "$tmp/err")"
[ "$(j "$tmp/kill.json" killed)" = "1" ] || fail "kill: killed $(j "$tmp/kill.json" killed), expected 1"
[ "$(j "$tmp/kill.json" detect_first_n)" = "1" ] || fail "kill: the death was not detected"
lo=$(susp $((N - 1)))
hi=$(awk -v s="$(susp $N)" -v i=$IVL 'BEGIN { print 4 * i + i + s + i }')
d=$(j "$tmp/kill.json" detect_first_max_s)
expect_num_ge "$d" "$lo" "kill: first detection vs the suspicion timeout"
expect_num_le "$d" "$hi" "kill: first detection"
echo "kill: first detection $d s after the death, bounds [$lo, $hi]"
[ "$(j "$tmp/kill.json" gone_all_n)" = "1" ] || fail "kill: not gone from every view"
expect_num_le "$d" "$(j "$tmp/kill.json" gone_all_max_s)" "kill: first detection before all"
[ "$(j "$tmp/kill.json" false_positives)" = "0" ] || fail "kill: false positives"
[ "$(j "$tmp/kill.json" live_end)" = "$((N - 1))" ] || fail "kill: live at the end"

# 2b. the same departure in order: the leaver tells members directly, so
# the first LEFT is one message away (latency 25 ms, no jitter)
"$sim" --peers $N --join-over 5 --duration 10 --kill-rate 0 --kill-at 12 --leave-share 1 \
  --jitter 0 --json -q >"$tmp/leave.json" 2>"$tmp/err" || fail "leave run: $(cat "$tmp/err")"
[ "$(j "$tmp/leave.json" left)" = "1" ] || fail "leave: left $(j "$tmp/leave.json" left), expected 1"
expect_num_le "$(j "$tmp/leave.json" leave_first_max_s)" 0.1 "leave: first LEFT"
[ "$(j "$tmp/leave.json" detect_first_n)" = "0" ] || fail "leave: counted as a death"

# 3. every message lost: nobody learns anybody
"$sim" --peers 20 --join-over 2 --duration 10 --kill-rate 0 --loss 1 --json -q >"$tmp/loss.json" ||
  fail "loss run failed"
[ "$(j "$tmp/loss.json" view_max)" = "1" ] || fail "loss 1: largest view $(j "$tmp/loss.json" view_max)"
[ "$(j "$tmp/loss.json" lost)" = "$(j "$tmp/loss.json" messages)" ] || fail "loss 1: not every message lost"
expect_num_le "$(j "$tmp/loss.json" coverage_max)" 0.051 "loss 1: coverage (1 of 20)"

# 4. determinism: equal seeds, equal figures (the simulator's own cost apart)
for run in 7a 7b 8a; do
  "$sim" --peers 40 --join-over 3 --duration 20 --kill-rate 0.5 --loss 0.02 --seed "${run%?}" --json -q |
    sed '/"simulator"/,$d' >"$tmp/seed$run"
done
cmp -s "$tmp/seed7a" "$tmp/seed7b" || fail "seed 7 twice: different results"
cmp -s "$tmp/seed7a" "$tmp/seed8a" && fail "seeds 7 and 8: identical results"
expect_num_ge "$(j "$tmp/seed7a" killed)" 1 "churn: somebody killed"

# 5. --svg and --net
printf '# up down latency\n100 100 20\n10 50 80 # a slow one\n\n' >"$tmp/net.txt"
"$sim" --peers 30 --join-over 2 --duration 10 --net "$tmp/net.txt" --svg "$tmp/p.svg" -q >"$tmp/net.out" ||
  fail "--net run failed"
grep -q "2 link kinds" "$tmp/net.out" || fail "--net: links not read: $(head -3 "$tmp/net.out")"
grep -q "^<svg" "$tmp/p.svg" && grep -q "</svg>" "$tmp/p.svg" && grep -q "<polyline" "$tmp/p.svg" ||
  fail "--svg: not a plot"

# 6. rounds (--rounds) against closed forms. A ring of 8 whose views are
# complete runs the static ring with Metropolis weights (1/3 each):
# a. compute 100 ms, latency 5 ms: the neighbours' PARAMS come before the
#    compute ends, so a round takes the compute, 10 rounds a second; with
#    a step of norm 1 a round (isotropic, 64 entries) the disagreement
#    ||Wx - x||'s mean square over peers and rounds is, in the stationary
#    state of x(k+1) = W x(k) + noise, (1/N) sum over W's eigenvalues
#    l != 1 of (1 - l) / (1 + l), l = (1 + 2 cos(2 pi k / N)) / 3
R="--rounds --topology ring --kill-rate 0 --jitter 0 --rate-mbit 0 --json -q"
"$sim" --peers 8 --join-over 2 --duration 60 --round-cpu-ms 100 --latency 5 --dim 64 $R \
  >"$tmp/r1.json" 2>"$tmp/err" || fail "rounds run: $(cat "$tmp/err")"
expect_num_close "$(j "$tmp/r1.json" rounds_per_s)" 10 0.001 "rounds: compute-bound rate"
rms=$(awk 'BEGIN { N = 8; for (k = 1; k < N; k++) { l = (1 + 2 * cos(2 * 3.14159265358979 * k / N)) / 3
                                                   s += (1 - l) / (1 + l) }; print sqrt(s / N) }')
expect_num_close "$(j "$tmp/r1.json" consensus_rms)" "$rms" 0.03 "rounds: consensus RMS vs closed form"
#    and the distance to the peers' average, sampled once a second: its
#    mean square is (1/N) sum over l != 1 of 1 / (1 - l^2)
spread=$(awk 'BEGIN { N = 8; for (k = 1; k < N; k++) { l = (1 + 2 * cos(2 * 3.14159265358979 * k / N)) / 3
                                                      s += 1 / (1 - l * l) }; print sqrt(s / N) }')
expect_num_close "$(j "$tmp/r1.json" spread_rms)" "$spread" 0.07 "rounds: distance to the average vs closed form"
[ "$(j "$tmp/r1.json" mixed_share)" = "1" ] || fail "rounds: not every round mixed"
echo "rounds: consensus RMS $(j "$tmp/r1.json" consensus_rms), closed form $rms; distance to the average $(j "$tmp/r1.json" spread_rms), closed form $spread"
# b. compute 10 ms, latency 50 ms: a round waits for its neighbours' (one
#    latency after they opened the same round): 20 rounds a second
"$sim" --peers 8 --join-over 2 --duration 30 --round-cpu-ms 10 --latency 50 $R >"$tmp/r2.json" ||
  fail "rounds run 2 failed"
expect_num_close "$(j "$tmp/r2.json" rounds_per_s)" 20 0.001 "rounds: latency-bound rate"
# c. 8 peers sharing 2 cores, 10 ms of compute each: 40 ms a round
"$sim" --peers 8 --join-over 2 --duration 30 --round-cpu-ms 10 --cores 2 --latency 0.05 $R \
  >"$tmp/r3.json" || fail "rounds run 3 failed"
expect_num_close "$(j "$tmp/r3.json" rounds_per_s)" 25 0.001 "rounds: shared cores"
# d. a silent death: its neighbours' rounds run into the deadline (4 x the
#    median round time, 0.4 s) until it is not waited for, and none waits
#    longer than that
"$sim" --peers 8 --join-over 2 --duration 30 --round-cpu-ms 100 --latency 5 --kill-at 15 $R \
  >"$tmp/r4.json" || fail "rounds run 4 failed"
expect_num_ge "$(j "$tmp/r4.json" late_share)" 0.001 "rounds: late rounds after a death"
expect_num_le "$(j "$tmp/r4.json" max_wait_s)" 0.4000001 "rounds: longest wait vs the deadline"
expect_num_ge "$(j "$tmp/r4.json" max_wait_s)" 0.29 "rounds: a round waited out its deadline"
[ "$(j "$tmp/r4.json" training_end)" = "7" ] || fail "rounds: $(j "$tmp/r4.json" training_end) of 7 train at the end"
# e. bench_scale's churn: a burst of 2 killed, 2 newcomers that train
"$sim" --peers 16 --join-over 4 --duration 30 --round-cpu-ms 50 --latency 1 --burst 15:2 $R \
  >"$tmp/r5.json" || fail "rounds run 5 failed"
[ "$(j "$tmp/r5.json" killed)" = "2" ] || fail "burst: killed $(j "$tmp/r5.json" killed)"
[ "$(j "$tmp/r5.json" training_end)" = "16" ] || fail "burst: $(j "$tmp/r5.json" training_end) of 16 train"
[ "$(j "$tmp/r5.json" admit_n)" = "2" ] || fail "burst: $(j "$tmp/r5.json" admit_n) newcomers trained"

# g. time to consensus: 8 peers on a ring starting apart (norm 100), no
#    steps of their own, mix geometrically: the slowest mode shrinks by
#    l2 = (1 + 2 cos(2 pi / 8)) / 3 a round, so falling 100-fold takes at
#    least ln(100) / -ln(l2) of the 0.1 s rounds... only if that mode
#    dominates; and with steps of norm 1 the distance never falls to 0.01
"$sim" --peers 8 --join-over 0 --duration 20 --round-cpu-ms 100 --latency 5 --drift 0 \
  --init-spread 100 --target 1 --sample 0.1 $R >"$tmp/t1.json" || fail "target run failed"
k=$(awk 'BEGIN { l = (1 + 2 * cos(2 * 3.14159265358979 / 8)) / 3; print 0.1 * log(100) / -log(l) }')
expect_num_ge "$(j "$tmp/t1.json" target_s)" "$(awk -v k="$k" 'BEGIN { print k / 2 }')" "target: faster than the ring mixes"
expect_num_le "$(j "$tmp/t1.json" target_s)" "$(awk -v k="$k" 'BEGIN { print 2 * k + 1 }')" "target: slower than the ring mixes"
echo "target: 100-fold in $(j "$tmp/t1.json" target_s) s; the ring's slowest mode takes $k s"
"$sim" --peers 8 --join-over 0 --duration 20 --round-cpu-ms 100 --latency 5 --target 0.01 $R \
  >"$tmp/t2.json" || fail "target run 2 failed"
[ "$(j "$tmp/t2.json" target_s)" = "null" ] || fail "target: reached 0.01 with steps of norm 1"

# f. steady churn at 128 peers (10% a minute, unlimited links): laid over
#    ranks, exp rewires many peers at each change and its rounds run into
#    their deadlines; chord (edges by id distance) moves a few edges, and
#    runs more rounds with fewer late ones (docs/scale.md, "Graphs that
#    survive churn")
for fam in exp chord; do
  "$sim" --peers 128 --join-over 16 --duration 60 --round-cpu-ms 100 --latency 25 --rounds \
    --topology $fam --jitter 0 --rate-mbit 0 --json -q >"$tmp/c$fam.json" || fail "churn run $fam failed"
done
expect_num_lt "$(j "$tmp/cchord.json" late_share)" "$(j "$tmp/cexp.json" late_share)" "churn: chord's late rounds vs exp's"
expect_num_lt "$(j "$tmp/cexp.json" rounds_per_s)" "$(j "$tmp/cchord.json" rounds_per_s)" "churn: exp's rounds/s vs chord's"
echo "churn at 128: rounds/s exp $(j "$tmp/cexp.json" rounds_per_s), chord $(j "$tmp/cchord.json" rounds_per_s); late exp $(j "$tmp/cexp.json" late_share), chord $(j "$tmp/cchord.json" late_share)"

# 7. bad usage exits 2 and names the flag; a bad input file exits 1
run_expect 2 "--peers" "$sim" --peers 0
run_expect 2 "--loss" "$sim" --loss 1.5
run_expect 2 "--lifetime 'weibull:3'" "$sim" --lifetime weibull:3
run_expect 2 "unknown option '--bogus'" "$sim" --bogus
run_expect 2 "--svg" "$sim" --svg /nonexistent/dir/p.svg
run_expect 2 "--topology 'nosuch'" "$sim" --rounds --topology nosuch
run_expect 2 "--burst '5'" "$sim" --burst 5
run_expect 2 "--dim" "$sim" --rounds --dim 65
printf '100 fast 20\n' >"$tmp/bad.net"
run_expect 1 "bad.net:1" "$sim" --net "$tmp/bad.net"
run_expect 0 "--kill-rate" "$sim" --help
finish
