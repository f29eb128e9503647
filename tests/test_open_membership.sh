#!/bin/sh
# Open membership: a swarm without ranks that grows and shrinks.
#   - the reference: 4 ranks of a fixed list (--rank, --peers) train the
#     Fashion-MNIST MLP for R rounds, each on its shard;
#   - the open swarm: 4 peers start with --listen only (one founder, three
#     joining through it; --min-peers 4), each drawing its own seeded stream
#     over the whole training set; after round 100, 2 more join, each knowing
#     one address (not the founder's); once they train, 2 peers (a founder
#     and a newcomer) are killed with SIGKILL and never come back.
# Asserted:
#   - the newcomers fetched the swarm's state (they start where the swarm is,
#     not from round 0) and then mixed with their neighbours;
#   - every survivor finishes, and the swarm average all 4 survivors agree on
#     (a ring over the living) is within 1 point of the fixed list's;
#   - the failure detector's bound holds: every survivor's view drops to the
#     4 living within B = 8 s of the kill (SWIM with 6 members: a dead peer
#     is probed within a pass over 5 members, 2.5 s at most, suspected,
#     declared dead 2.5 s later, and the news spreads in a few periods:
#     3.4-6.9 s measured on 2 loaded cores), and after that no
#     survivor waits on the dead: every round's view is the 4 survivors (so
#     the dead are in nobody's graph), and at most 1 round in 100 of theirs
#     runs into its deadline (a loaded machine's hiccup; a dead neighbour
#     would cost every round one).
# The same rounds and examples a peer in both swarms (R rounds of batch 64):
# "the same epochs" would give the open peers, each of which passes over the
# whole set, 4 times the steps of a rank with a quarter of it.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
command -v pgrep >/dev/null || skip "pgrep (procps) not found"

R=1000 B=8
# --throttle 10: a round takes at least 10 times its gradient's time, so
# that on an idle machine the run still outlasts the newcomers' start
# (loading the data takes seconds), the kill and the detector's bound by
# many rounds (with 4, an AVX-512 machine ran the 755 rounds after the kill
# in less than the bound's 8 s)
common="--data $FASHION --rounds $R --batch 64 --lr 0.1 --seed 7 --progress 0 --round-timeout 5 --start-timeout 60 --throttle 10 --log-level info"
now() { date '+%s.%N'; }

# ---- the reference: a fixed list of 4 ranks
eps=$(free_endpoints 4)
pids=
for r in 0 1 2 3; do
  timeout 300 "$RUMOR_PEER" --insecure --rank $r --peers "$eps" $common \
    --metrics "$tmp/fixed-$r.jsonl" >"$tmp/fixed-$r.log" 2>&1 &
  pids="$pids $!"
done
for pp in $pids; do wait "$pp" || fail "a rank of the fixed list failed: $(tail -n 3 "$tmp/fixed-0.log")"; done
pids=
fixed=$(sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/fixed-0.log")
echo "open: fixed list of 4 ranks, $R rounds: swarm average ${fixed:-?}%"
expect_num_ge "${fixed:-0}" 80 "the fixed list's swarm average"

# ---- the open swarm
set -- $(free_endpoints 6 | tr ',' ' ')
start() { # NAME LISTEN [OPTIONS]
  _n=$1 _l=$2; shift 2
  timeout 300 "$RUMOR_PEER" --insecure --listen "$_l" $common --metrics "$tmp/$_n.jsonl" "$@" \
    >"$tmp/$_n.log" 2>&1 &
  eval "pid_$_n=\$!"
  pids="$pids $!"
}
A0=$1 A1=$2 A2=$3 A3=$4 A4=$5 A5=$6
start f0 "$A0" --min-peers 4
for i in 1 2 3; do eval "start f$i \"\$A$i\" --join \"\${A0#tcp://}\" --min-peers 4"; done
wait_round "$tmp/f0.jsonl" 100
echo "open: round $(metrics_round "$tmp/f0.jsonl"): two newcomers join, through f2 and f3"
start n4 "$A4" --join "${A2#tcp://}"
start n5 "$A5" --join "$A3"
# both newcomers have trained a few rounds with the swarm: kill f1 and n5
for n in n4 n5; do
  _i=0
  until grep -q '"event":"round"' "$tmp/$n.jsonl" 2>/dev/null &&
        [ "$(grep -c '"event":"round"' "$tmp/$n.jsonl")" -ge 30 ]; do
    sleep 0.1; _i=$((_i + 1)); [ $_i -lt 900 ] || { fail "$n never trained 30 rounds"; break; }
  done
done
# (the peers, not the timeout(1) processes that watch them)
kill -KILL $(pgrep -P "$pid_f1") $(pgrep -P "$pid_n5") || fail "f1 or n5 gone before the kill"
t_kill=$(now)
echo "open: killed f1 and n5 at round $(metrics_round "$tmp/f0.jsonl")"
for n in f0 f2 f3 n4; do eval "wait \$pid_$n"; expect_rc 0 $? "$n" "$tmp/$n.log"; done
pids=

# ---- the newcomers started from the swarm's state
for n in n4; do
  j=$(sed -n 's/.*joined at round \([0-9]*\)$/\1/p' "$tmp/$n.log" | head -1)
  fetched=$(metrics_field "$tmp/$n.jsonl" done catch_ups)
  mixed=$(metrics_field "$tmp/$n.jsonl" done rounds_mixed)
  echo "open: $n fetched the swarm's state and joined at round ${j:-?} (fetches ${fetched:-?}, rounds mixed ${mixed:-?})"
  expect_num_ge "${j:-0}" 100 "$n's first round"
  expect_num_ge "${fetched:-0}" 1 "$n's state fetches"
  expect_num_ge "${mixed:-0}" 100 "$n's rounds mixed with neighbours"
done
grep -q 'joined at round' "$tmp/n5.log" || fail "n5 did not fetch the swarm's state before it was killed"

# ---- the swarm average over the 4 survivors, against the fixed list's
avgs=
for n in f0 f2 f3 n4; do
  a=$(sed -n 's/^peer [0-9a-f]*: swarm average test accuracy \([0-9.]*\)% (\([0-9]*\) peers alive)/\1 \2/p' "$tmp/$n.log")
  set -- $a
  [ "${2:-0}" -eq 4 ] || fail "$n's average is over ${2:-?} peers, not the 4 alive"
  avgs="$avgs ${1:-0}"
done
echo "open: the survivors' swarm average:$avgs% (fixed list ${fixed:-?}%)"
set -- $avgs
for a in "$@"; do expect_num_close "$a" "$1" 0.005 "the survivors agree on the average"; done
expect_num_ge "$1" "$(awk -v f="${fixed:-100}" 'BEGIN{print f - 1.0}')" "open swarm average vs the fixed list's - 1 point"

# ---- the detector's bound, and no waiting on the dead after it
# rounds FILE: "time members timed_out round_wait_s" of every round event
rounds() {
  sed -n 's/.*"time":\([0-9.]*\).*"event":"round".*"members":\([0-9]*\).*"round_wait_s":\([0-9.]*\),"timed_out":\([01]\).*/\1 \2 \4 \3/p' "$1"
}
for n in f0 f2 f3 n4; do
  rounds "$tmp/$n.jsonl" >"$tmp/$n.rounds"
  # the first round after the kill whose view is the 4 living
  det=$(awk -v k="$t_kill" '$1 > k && $2 == 4 {printf "%.2f", $1 - k; exit}' "$tmp/$n.rounds")
  # after kill + B: rounds, rounds whose view is not the 4, rounds that ran
  # into their deadline, the longest wait
  set -- $(awk -v t="$(awk -v k="$t_kill" -v b="$B" 'BEGIN{printf "%.3f", k + b}')" '
    $1 > t {n++; if ($2 != 4) v++; if ($3) to++; if ($4 > w) w = $4}
    END {printf "%d %d %d %.3f", n, v, to, w}' "$tmp/$n.rounds")
  echo "open: $n: view of the 4 living ${det:-never} s after the kill; after $B s: $1 rounds, $2 with another view, $3 timed out, longest wait $4 s"
  expect_num_lt "${det:-99}" "$B" "$n: seconds from the kill to a view of the 4 living"
  expect_num_ge "$1" 50 "$n: rounds after the detector's bound"
  [ "$2" -eq 0 ] || fail "$n: $2 rounds after the bound with a view other than the 4 living"
  expect_num_lt "$3" "$(($1 / 100 + 1))" "$n: rounds after the bound that ran into their deadline"
done
finish
