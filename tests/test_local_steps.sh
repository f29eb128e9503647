#!/bin/sh
# --local-steps H (local SGD on the graph): three peers train the MLP on
# Fashion-MNIST, gossiping every step and every 8 steps. With H = 8 a peer
# sends about an eighth of the bytes a step (it gossips once a round of 8
# steps), takes the same optimizer steps, and its swarm average's test
# accuracy is within 1 point of H = 1's. With DiLoCo's outer Nesterov
# (--outer nesterov) on top it still learns (80%). --local-steps with the
# all-reduce, and --outer with async gossip or without local steps, are
# refused; a start line says the outer optimizer runs.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

fashion_swarm h1 --local-steps 1
fashion_swarm h8 --local-steps 8
fashion_swarm h8o --local-steps 8 --outer nesterov:lr=0.7,momentum=0.9
a1=$(swarm_accuracy h1) a8=$(swarm_accuracy h8)
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
ao=$(swarm_accuracy h8o)
bo=$(metrics_field "$tmp/h8o-0.jsonl" done bytes_sent)
echo "H = 8 with outer Nesterov: ${bo:-?} bytes sent, swarm average ${ao:-?}%"
expect_num_ge "${ao:-0}" 80 "the swarm average's test accuracy with H = 8 and --outer nesterov"
expect_num_close "$(awk "BEGIN{print ${bo:-0} / ${b8:-1}}")" 1 0.03 "bytes sent with --outer against without"
grep -q "outer optimizer: Nesterov, lr 0.7, momentum 0.9, on each round's change" "$tmp/h8o-0.log" ||
  fail "no start line says the outer optimizer runs"
grep -q "outer optimizer" "$tmp/h8-0.log" && fail "a start line names an outer optimizer that does not run"
eps=$(free_endpoints 3)
run_expect 2 "needs --mode dpsgd" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "$FASHION" --local-steps 4 --outer nesterov --mode async
run_expect 2 "--outer 'nesterov:lr=-1': lr '-1' is not in (0, 10]" "$RUMOR_PEER" --insecure \
  --rank 0 --peers "$eps" --data "$FASHION" --local-steps 4 --outer nesterov:lr=-1

run_expect 2 "needs --mode dpsgd or async" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "$FASHION" --local-steps 4 --mode allreduce
finish
