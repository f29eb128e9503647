#!/bin/sh
# Joining from any live peer, and coming back at another address:
# 4 rumor-peer processes on a ring with --membership swim, over loopback.
#   - peers 0, 1 and 2 start with the list "A0,A1,A2,-": nobody knows where
#     peer 3 will listen;
#   - peer 3 starts late with the list "-,A1,-,A3": it knows only peer 1.
#     Its ring neighbours (by id) are peers 2 and 0, whose addresses it was
#     never given;
#   - then peer 2 is killed with SIGKILL and restarted from its checkpoint
#     at a NEW address B2, with the list "A0,-,B2,-" (a replacement machine
#     that knows one live peer). Peers 1 and 3 hold A2 for it.
# Asserted: every process exits 0; peer 3 learned the addresses of peers 0
# and 2 from the membership and peers 0 and 2 learned peer 3's; peers 1 and
# 3 moved peer 2 to B2; peer 3 and the restarted peer 2 both trained with
# their neighbours (views of 4, mixing rounds with in-neighbours' chunks,
# every round of theirs after joining counted); every peer's final local
# accuracy is within 3 points of peer 0's; no stale message was mixed.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion

PEER="$RUMOR_BUILDDIR/rumor-peer"
swarm_setup


set -- $(free_endpoints 5 | tr ',' ' ')
A0=$1 A1=$2 A2=$3 A3=$4 B2=$5
start() { # RANK LIFE LIST
  mkdir -p "$tmp/ckpt-$1"
  "$PEER" --insecure --rank "$1" --peers "$3" --membership swim --epochs 6 --data "$FASHION" \
    --seed 5 --throttle 10 --round-timeout 5 --start-timeout 2 --log-level info --progress 0.05 \
    --checkpoint-dir "$tmp/ckpt-$1" --checkpoint-every 20 --metrics "$tmp/m-$1-$2.jsonl" \
    >"$tmp/p-$1-$2.log" 2>&1 &
  eval "pid_$1=\$!"
  pids="$pids $!"
}

for r in 0 1 2; do start $r 0 "$A0,$A1,$A2,-"; done
wait_round "$tmp/m-0-0.jsonl" 30
start 3 0 "-,$A1,-,$A3"
echo "join: peer 3 started (knowing only peer 1) at round $(metrics_round "$tmp/m-0-0.jsonl")"
wait_round "$tmp/m-3-0.jsonl" 40
kill -KILL $pid_2 || fail "peer 2 was gone before its kill"
echo "join: peer 2 killed at round $(metrics_round "$tmp/m-2-0.jsonl"); back in 1 s at $B2 knowing only peer 0"
sleep 1
start 2 1 "$A0,-,$B2,-"
for r in 0 1 3; do eval "wait \$pid_$r"; expect_rc 0 $? "peer $r" "$tmp/p-$r-0.log"; done
wait $pid_2; expect_rc 0 $? "restarted peer 2" "$tmp/p-2-1.log"
pids=

learned() { # LOG PEER ADDRESS WHAT
  grep -q "info: peer $2 is at $3" "$1" && echo "join: $4" || fail "$4: not in $1: $(grep "is at" "$1" | head -5)"
}
learned "$tmp/p-3-0.log" 0 "$A0" "peer 3 learned peer 0's address"
learned "$tmp/p-3-0.log" 2 "$A2" "peer 3 learned peer 2's address"
learned "$tmp/p-0-0.log" 3 "$A3" "peer 0 learned peer 3's address"
learned "$tmp/p-2-0.log" 3 "$A3" "peer 2 learned peer 3's address"
learned "$tmp/p-1-0.log" 2 "$B2 now (was $A2)" "peer 1 moved peer 2 to its new address"
learned "$tmp/p-3-0.log" 2 "$B2 now (was $A2)" "peer 3 moved peer 2 to its new address"
learned "$tmp/p-2-1.log" 3 "$A3" "the restarted peer 2 learned peer 3's address"

# the joiners trained with their neighbours: views of 4, and rounds that
# mixed neighbours' chunks (complete > 0) after they joined
for f in "$tmp/m-3-0.jsonl" "$tmp/m-2-1.jsonl"; do
  v4=$(grep -c '"event":"round".*"members":4' "$f")
  mixed=$(grep '"event":"round"' "$f" | grep -c '"complete":[1-9]')
  run=$(metrics_field "$f" done rounds_run)
  echo "join: $(basename "$f"): $v4 rounds with a view of 4, $mixed rounds mixed with neighbours' chunks, ${run:-?} rounds run"
  expect_num_ge "$v4" 10 "$(basename "$f") rounds with a view of 4"
  expect_num_ge "$mixed" 10 "$(basename "$f") rounds mixed with neighbours"
done
grep -q "resumed from .* at round" "$tmp/p-2-1.log" || fail "peer 2 did not resume from its checkpoint"

ref=$(metrics_field "$tmp/m-0-0.jsonl" done local_accuracy)
for f in "$tmp/m-1-0.jsonl" "$tmp/m-3-0.jsonl" "$tmp/m-2-1.jsonl"; do
  a=$(metrics_field "$f" done local_accuracy)
  echo "join: $(basename "$f") local accuracy ${a:-?} (peer 0: $ref)"
  expect_num_close "${a:-0}" "${ref:-1}" 0.03 "$(basename "$f") accuracy vs peer 0"
done
stale=0
for f in "$tmp"/m-*.jsonl; do
  a=$(metrics_field "$f" done stale_applied); stale=$((stale + ${a:-0}))
done
[ "$stale" -eq 0 ] || fail "$stale stale contributions were mixed"
finish
