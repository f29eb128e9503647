#!/bin/sh
# A frozen peer: 4 peers on a ring (D-PSGD); once every peer is past round
# 150, peer 1 gets SIGSTOP, and SIGCONT 10 s later.
#  - its neighbours (0 and 2) carry on: no gap between two of their rounds
#    during the freeze is longer than the heartbeat timeout (2 s) plus one
#    round's deadline (plus slack), they keep making rounds, and none of the
#    other three is left behind (no state fetch, at most 10 rounds skipped);
#  - after SIGCONT peer 1 rejoins: it catches up (a state fetch or a jump),
#    then runs at least half of the remaining rounds itself (it trains with
#    the swarm again instead of fetching its state over and over), ends at
#    the same final round as the others, and its model lands within 2 points
#    of the swarm average;
#  - every peer exits 0, and no stale parameters were ever mixed.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v ss >/dev/null || skip "ss (iproute2) not found"
peer="$RUMOR_BUILDDIR/rumor-peer"
swarm_setup

HB=2        # the mixer's ZMTP heartbeat timeout (gossip/transport.h)
FREEZE=10   # seconds peer 1 stays stopped
SLACK=0.5   # scheduling slack on 2 loaded cores

now() { date +%s.%N; }
# fields of a metrics file's events, one line each: EVENT REALTIME ROUND
# DEADLINE MONOTONIC (the first "time" is the wall clock, the last the
# monotonic clock)
events() {
  awk -v ev="$2" '
    index($0, "\"event\":\"" ev "\"") {
      n = split($0, f, ","); rt = ""; mt = ""; r = -1; d = 0
      for (i = 1; i <= n; i++) {
        split(f[i], kv, ":"); k = kv[1]; v = kv[2]; gsub(/[{}"]/, "", k); gsub(/[{}"]/, "", v)
        if (k == "time") { if (rt == "") rt = v; else mt = v }
        else if (k == "round") r = v
        else if (k == "deadline_s") d = v
      }
      print ev, rt, r, d, (mt == "" ? rt : mt)
    }' "$1"
}
# a numeric field of the done event
done_field() { metrics_field "$1" done "$2"; }

eps=$(free_endpoints 4)
for r in 0 1 2 3; do
  # no timeout(1) wrapper: $! must be the peer itself for the signals;
  # --eval-every 1000: no test-set pass at each epoch's end (only at the
  # last), so a gap between rounds is waiting, not evaluating; 20 epochs
  # (4680 rounds): the neighbours run 2600-2900 rounds in the 10-s freeze,
  # and with 14 epochs a fast machine left peer 1 65-200 rounds after its
  # catch-up, too few to mix back within 2 points of the average
  "$peer" --rank $r --peers "$eps" --insecure --epochs 20 --eval-every 1000 --data "$FASHION" --progress 0.05 \
    --log-level info --metrics "$tmp/p$r.jsonl" >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
# a watchdog bounds the whole run
(trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 150 & s=$!; wait $s; kill -KILL $pids) \
  >/dev/null 2>&1 &
wd=$!
victim=$(echo $pids | cut -d' ' -f2)

# everyone past round 150
i=0
for r in 0 1 2 3; do
  until grep -q '"event":"round","round":\(1[5-9][0-9]\|[2-9][0-9][0-9]\|[0-9]\{4,\}\)' \
    "$tmp/p$r.jsonl" 2>/dev/null; do
    sleep 0.05; i=$((i + 1))
    [ $i -lt 1200 ] || { fail "peer $r never reached round 150: $(tail -3 "$tmp/p$r.log")"; finish; }
  done
done
t_stop=$(now)
kill -STOP "$victim" || { fail "peer 1 was gone before SIGSTOP"; finish; }
sleep $FREEZE
t_cont=$(now)
kill -CONT "$victim"

rcs=
for p in $pids; do wait "$p"; rcs="$rcs $?"; done
pids=
kill "$wd" 2>/dev/null; wd=
r=0
for rc in $rcs; do expect_rc 0 "$rc" "peer $r" "$tmp/p$r.log"; r=$((r + 1)); done
for r in 0 1 2 3; do
  grep -q '"event":"done"' "$tmp/p$r.jsonl" || { fail "peer $r wrote no done event"; finish; }
done

# ---- the neighbours during the freeze
for r in 0 2; do
  set -- $(events "$tmp/p$r.jsonl" round | awk -v a="$t_stop" -v b="$t_cont" '
    # consecutive rounds whose interval overlaps the freeze
    $2 > a && prt != "" && prt < b {
      g = $5 - pmt; if (g > gap) { gap = g; gd = $4 }; if ($4 > dl) dl = $4
    }
    $2 <= a { r0 = $3 }
    $2 <= b { r1 = $3 }
    { prt = $2; pmt = $5 }
    END { printf "%.3f %s %d %.3f\n", gap, (gd == "" ? 0 : gd), r1 - r0, dl }')
  gap=$1 gap_deadline=$2 made=$3 deadline=$4
  pre=$(events "$tmp/p$r.jsonl" round | awk -v a="$t_stop" '$2 <= a { r = $3 } END { print r + 0 }')
  echo "freeze: peer $r: longest gap between rounds during the freeze $gap s (deadline then $gap_deadline s, longest in the freeze $deadline s); $made rounds during the ${FREEZE} s freeze (at round $pre when it began)"
  bound=$(awk "BEGIN{print $HB + $deadline + $SLACK}")
  awk "BEGIN{exit !($gap <= $bound)}" ||
    fail "peer $r stalled $gap s during the freeze: more than heartbeat $HB s + deadline $deadline s + $SLACK s"
  expect_num_ge "$made" 50 "peer $r rounds during the freeze"
done
# none of the others was left behind: no state fetch, and at most a few
# rounds skipped (a deadline's wait can put a neighbour a few rounds behind)
for r in 0 2 3; do
  f=$tmp/p$r.jsonl
  j=$(done_field "$f" jumps) c=$(done_field "$f" catch_ups) k=$(done_field "$f" rounds_skipped)
  [ "$j" = 0 ] || echo "freeze: peer $r skipped $k rounds in $j jump(s)"
  if [ "$c" != 0 ] || [ "$k" -gt 10 ]; then
    fail "peer $r was left behind while peer 1 was frozen: $c state fetch(es), $j jump(s) over $k rounds; ran $(done_field "$f" rounds_run) of $(done_field "$f" rounds) rounds"
    grep -e "before the deadline" -e "fetching its state" -e "jumping from" "$tmp/p$r.log" | head -6 | sed 's/^/  | /' >&2
  fi
done

# ---- peer 1 after SIGCONT
v=$tmp/p1.jsonl
frozen_at=$(events "$v" round | awk -v a="$t_stop" '$2 <= a { r = $3 } END { print r + 0 }')
# caught up: peer 1's first round, after SIGCONT, at or past the round peer 0
# had reached by then (less 10: peer 0's newest event may be 50 ms old); its
# last catch-up: the last time its round leapt (more than 25 rounds between
# two progress events 50 ms apart: a jump or a state fetch)
caught=$( { events "$tmp/p0.jsonl" round | sed 's/^round/n/'; events "$v" round | sed 's/^round/v/'; } |
  sort -k2,2n | awk -v b="$t_cont" '
    $1 == "n" { nr = $3 }
    $1 == "v" && $2 > b && nr != "" {
      if (t1 == "" && $3 >= nr - 10) { t1 = $2 - b; r1 = $3; n1 = nr }
      if (pr != "" && $3 - pr > 25) { tl = $2 - b; leaps++ }
    }
    $1 == "v" { pr = $3 }
    END { if (t1 != "") printf "%.2f %d %d %.2f %d\n", t1, r1, n1, tl, leaps }')
jumps=$(done_field "$v" jumps) catch_ups=$(done_field "$v" catch_ups) skipped=$(done_field "$v" rounds_skipped)
ran=$(done_field "$v" rounds_run)
if [ -n "$caught" ]; then
  set -- $caught
  f0=$(events "$tmp/p0.jsonl" epoch | awk '{ r = $3 } END { print r }')
  # rounds peer 1 trained itself once it had caught up, of those left
  # (rounds_run also holds the few it ran before catching up)
  own=$((ran - frozen_at)) left=$((f0 - $2))
  [ $own -le $left ] || own=$left
  echo "freeze: peer 1 stopped at round $frozen_at; $1 s after SIGCONT it was at round $2 (peer 0 at $3); its last leap came $4 s after SIGCONT ($5 leaps): $catch_ups state fetch(es), $jumps jump(s) over $skipped rounds; it then ran $own of the $left rounds left itself"
  grep -e "fetching its state" -e "jumping from" "$tmp/p1.log" | head -8 | sed 's/^/    /'
  # rejoined: it trains with the swarm again, not copies the swarm's state
  # round after round
  [ "$left" -ge 200 ] || echo "freeze: (the swarm had $left rounds left when peer 1 caught up: too few to see it rejoin)"
  [ "$left" -le 0 ] || expect_num_ge "$own" "$((left / 2))" \
    "rounds peer 1 ran itself after catching up (of $left; the rest it fetched or skipped)"
else
  echo "freeze: peer 1 stopped at round $frozen_at; never caught up with peer 0: $catch_ups state fetch(es), $jumps jump(s) over $skipped rounds"
  fail "peer 1 never reached peer 0's round after SIGCONT"
fi
[ "${catch_ups:-0}" -ge 1 ] || [ "${jumps:-0}" -ge 1 ] ||
  fail "peer 1 neither fetched state nor jumped after the freeze (catch_ups=$catch_ups jumps=$jumps)"

final() { events "$tmp/p$1.jsonl" epoch | awk '{ r = $3 } END { print r }'; }
f0=$(final 0)
for r in 1 2 3; do
  [ "$(final $r)" = "$f0" ] || fail "peer $r ended at round $(final $r), peer 0 at $f0"
done
l1=$(done_field "$v" local_accuracy) avg=$(done_field "$v" average_accuracy)
echo "freeze: final round $f0 everywhere; peer 1 local accuracy $l1, swarm average $avg"
expect_num_close "$(awk "BEGIN{print 100 * $l1}")" "$(awk "BEGIN{print 100 * $avg}")" 2 \
  "peer 1 accuracy (points) vs the swarm average"
for r in 0 1 2 3; do
  s=$(done_field "$tmp/p$r.jsonl" stale_applied)
  [ "$s" = 0 ] || fail "peer $r mixed stale parameters $s times"
done
finish
