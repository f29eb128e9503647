#!/bin/sh
# A peer that dies without a word: 3 rumor-peer processes on a complete
# graph over loopback (MLP, Fashion-MNIST, 1 MiB cells); peer 2 is killed
# with SIGKILL at round 40. Its neighbours' sends to it fill ZeroMQ's queue
# and stay there (nobody reads them); that connection must not hold back
# their sends to each other. Asserted: both survivors finish (exit 0) and
# run their rounds after the kill at 20 rounds a second or more; on this
# machine they run 100-130. A dead connection that kept gating the others
# (every redial, each 0.25 s, queued a fresh round that counted as moving)
# held each round until the next redial: 13 rounds a second in this test.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

ROUNDS=1000
eps=$(free_endpoints 3)
for r in 0 1 2; do
  # peer 2 runs without timeout(1), so that its SIGKILL reaches rumor-peer
  to="timeout 300"
  [ $r -eq 2 ] && to=
  $to "$RUMOR_PEER" --insecure --rank $r --peers "$eps" --topology complete \
    --data "$FASHION" --train-limit 30000 --rounds $ROUNDS --threads 1 --chunk-mb 1 \
    --round-timeout 3 --no-average --progress 0.05 --metrics "$tmp/p$r.jsonl" \
    >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
  eval "pid$r=\$!"
done
wait_round "$tmp/p2.jsonl" 40 || finish
kill -KILL "$pid2"
t_kill=$(date +%s.%N)
at=$(metrics_round "$tmp/p0.jsonl")
echo "peer 2 killed; peer 0 at round ${at:-?}"
for r in 0 1; do
  eval "wait \$pid$r"
  expect_rc 0 $? "peer $r" "$tmp/p$r.log"
done
t_end=$(date +%s.%N)
pids=
rate=$(awk "BEGIN{printf \"%.1f\", ($ROUNDS - ${at:-0}) / ($t_end - $t_kill)}")
echo "after the kill: $((ROUNDS - ${at:-0})) rounds in $(awk "BEGIN{printf \"%.1f\", $t_end - $t_kill}") s, $rate rounds/s"
grep -h "done:" "$tmp/p0.log" "$tmp/p1.log"
expect_num_ge "$rate" 20 "the survivors' rounds a second after peer 2 died"
finish
