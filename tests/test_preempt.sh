#!/bin/sh
# Preemption: a peer that gets SIGTERM mid-run ends its round, checkpoints,
# tells its neighbours and exits 0 within --leave-timeout; the neighbours
# stop waiting for it at once (no deadline per round) and finish; restarted,
# the peer resumes from its checkpoint at the round it left.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v ss >/dev/null || skip "ss (iproute2) not found"
peer="$RUMOR_BUILDDIR/rumor-peer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

eps=$(free_endpoints 3)
pids=
for r in 0 1 2; do
  # no timeout(1) wrapper: the signal must reach the peer itself
  "$peer" --insecure --rank $r --peers "$eps" --epochs 2 --data "$FASHION" --round-timeout 5 \
    --checkpoint-dir "$tmp/ckpt$r" --progress 0.1 --log-level info --no-average \
    --metrics "$tmp/p$r.jsonl" >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
victim=$(echo $pids | cut -d' ' -f2)
i=0
until grep -q '"event":"round","round":[1-9][0-9][0-9]' "$tmp/p1.jsonl" 2>/dev/null; do
  sleep 0.05; i=$((i + 1))
  [ $i -lt 1200 ] || { fail "peer 1 never reached round 100"; break; }
done
t0=$(date +%s.%N)
kill -TERM "$victim"
wait "$victim"; rc=$?
t1=$(date +%s.%N)
expect_rc 0 $rc "peer 1 after SIGTERM" "$tmp/p1.log"
leave_s=$(awk "BEGIN{print $t1 - $t0}")
echo "peer 1 left $leave_s s after SIGTERM: $(grep '^peer 1: left' "$tmp/p1.log")"
expect_num_lt "$leave_s" 10 "time from SIGTERM to exit (the default --leave-timeout)"
left=$(sed -n 's/^peer 1: left at round \([0-9]*\).*/\1/p' "$tmp/p1.log")
[ -n "$left" ] || fail "peer 1 did not report leaving: $(tail -3 "$tmp/p1.log")"
# checkpoints name their swarm (default rumor) and rank (src/checkpoint.h)
ls "$tmp/ckpt1" | grep -q "^rumor-r1-0*$left.safetensors" || fail "no checkpoint of round $left in $(ls "$tmp/ckpt1")"

for p in $pids; do wait "$p" 2>/dev/null; done
for r in 0 2; do
  grep -q "^peer $r: done" "$tmp/p$r.log" || fail "peer $r did not finish: $(tail -3 "$tmp/p$r.log")"
  grep -q "peer 1 is leaving" "$tmp/p$r.log" || fail "peer $r was not told peer 1 left"
  # told, it never waits for peer 1 again: at most the round in flight
  n=$(grep -c "peer 1 sent .* before the deadline" "$tmp/p$r.log")
  [ "$n" -le 1 ] || fail "peer $r waited for the departed peer in $n rounds"
done

# Restart peer 1 alone: it resumes at the round it left, and with every
# neighbour gone it does not wait out a deadline each round (alone on
# purpose: --allow-alone, or it would report that it trained alone).
t0=$(date +%s)
"$peer" --insecure --rank 1 --peers "$eps" --epochs 2 --data "$FASHION" --round-timeout 0.2 \
  --start-timeout 0.5 --checkpoint-dir "$tmp/ckpt1" --no-average --allow-alone >"$tmp/p1b.log" 2>&1
expect_rc 0 $? "restarted peer 1" "$tmp/p1b.log"
grep -q "resumed from .*/rumor-r1-0*$left.safetensors at round $left" "$tmp/p1b.log" ||
  fail "restart did not resume at round $left: $(grep -m2 'rumor-peer 1' "$tmp/p1b.log")"
t1=$(date +%s)
grep "resumed" "$tmp/p1b.log"
echo "restarted peer 1 finished its remaining rounds alone in $((t1 - t0)) s"
[ $((t1 - t0)) -le 30 ] || fail "the restarted peer took $((t1 - t0)) s: it waited for absent neighbours"
# A corrupt newest checkpoint: the previous one is used, and the file named.
newest=$(ls "$tmp/ckpt1" | sort | tail -1)
printf 'garbage' | dd of="$tmp/ckpt1/$newest" bs=1 seek=200 conv=notrunc 2>/dev/null
"$peer" --insecure --rank 1 --peers "$eps" --epochs 2 --data "$FASHION" --round-timeout 0.2 \
  --start-timeout 0.5 --checkpoint-dir "$tmp/ckpt1" --no-average --allow-alone --log-level warn \
  >"$tmp/p1c.log" 2>&1
expect_rc 0 $? "peer 1 with a corrupt newest checkpoint" "$tmp/p1c.log"
grep -q "$newest" "$tmp/p1c.log" || fail "the corrupt checkpoint was not reported: $(head -5 "$tmp/p1c.log")"
grep -q "resumed from" "$tmp/p1c.log" || fail "no earlier checkpoint was used"
finish
