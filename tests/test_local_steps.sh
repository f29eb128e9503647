#!/bin/sh
# --local-steps H (local SGD on the graph): three peers train the MLP on
# Fashion-MNIST, gossiping every step and every 8 steps. With H = 8 a peer
# sends about an eighth of the bytes a step (it gossips once a round of 8
# steps), takes the same optimizer steps, and its swarm average's test
# accuracy is within 1 point of H = 1's. With DiLoCo's outer Nesterov
# (--outer nesterov) on top it still learns (80%). --local-steps with the
# all-reduce, and --outer with async gossip, are refused.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

run() { # NAME H [OPTIONS]
  name=$1 h=$2; shift 2
  eps=$(free_endpoints 3)
  pids=
  for r in 0 1 2; do
    timeout 300 "$RUMOR_PEER" --insecure --rank $r --peers "$eps" --data "$FASHION" \
      --train-limit 6000 --epochs 3 --batch 32 --lr 0.05 --local-steps "$h" --progress 0 \
      --metrics "$tmp/$name-$r.jsonl" "$@" >"$tmp/$name-$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || fail "a peer of the $name run failed: $(tail -n 2 "$tmp/$name-0.log")"; done
  pids=
}
run h1 1
run h8 8
run h8o 8 --outer nesterov:lr=0.7,momentum=0.9
a1=$(sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/h1-0.log")
a8=$(sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/h8-0.log")
r1=$(metrics_field "$tmp/h1-0.jsonl" done rounds)
r8=$(metrics_field "$tmp/h8-0.jsonl" done rounds)
b1=$(metrics_field "$tmp/h1-0.jsonl" done bytes_sent)
b8=$(metrics_field "$tmp/h8-0.jsonl" done bytes_sent)
echo "H = 1: $r1 rounds, ${b1:-?} bytes sent, swarm average ${a1:-?}%"
echo "H = 8: $r8 rounds, ${b8:-?} bytes sent, swarm average ${a8:-?}%"
grep -q "8 optimizer steps a round" "$tmp/h8-0.log" || fail "peer 0 did not say it runs local steps"
# 6000 examples in batches of 32: 187 steps an epoch; 23 rounds of 8
[ "$r1" = 561 ] || fail "H = 1: $r1 rounds, expected 3 x 187"
[ "$r8" = 69 ] || fail "H = 8: $r8 rounds, expected 3 x 23"
ratio=$(awk "BEGIN{print ${b8:-0} / ${b1:-1}}")
expect_num_close "$ratio" "$(awk 'BEGIN{print 69 / 561}')" 0.03 "bytes sent with H = 8 over H = 1"
expect_num_close "${a8:-0}" "${a1:-99}" 1.0 "the swarm average's test accuracy, H = 8 against H = 1"
expect_num_ge "${a8:-0}" 80 "the swarm average's test accuracy with H = 8"
ao=$(sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/h8o-0.log")
bo=$(metrics_field "$tmp/h8o-0.jsonl" done bytes_sent)
echo "H = 8 with outer Nesterov: ${bo:-?} bytes sent, swarm average ${ao:-?}%"
expect_num_ge "${ao:-0}" 80 "the swarm average's test accuracy with H = 8 and --outer nesterov"
expect_num_close "$(awk "BEGIN{print ${bo:-0} / ${b8:-1}}")" 1 0.03 "bytes sent with --outer against without"
run_expect 2 "needs --mode dpsgd" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "$FASHION" --local-steps 4 --outer nesterov --mode async
run_expect 2 "--outer 'nesterov:lr=-1': lr '-1' is not in (0, 10]" "$RUMOR_PEER" --insecure \
  --rank 0 --peers "$eps" --data "$FASHION" --local-steps 4 --outer nesterov:lr=-1

run_expect 2 "needs --mode dpsgd or async" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "$FASHION" --local-steps 4 --mode allreduce
finish
