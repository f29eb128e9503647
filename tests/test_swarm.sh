#!/bin/sh
# Swarms of real rumor-peer processes on loopback, on Fashion-MNIST:
#  1. 8 peers on a ring, D-PSGD, 2 epochs: every peer's model reaches at
#     least 84% test accuracy, the swarm average at least 85%, and the
#     consensus distance shrinks from epoch 1 to epoch 2;
#  2. the same swarm and seeds with the ring all-reduce baseline lands
#     within 1 point of D-PSGD;
#  3. onepeer-exp (directed, time-varying: peers drift up to a period
#     apart): every message is used (no future-round drops), nothing waits
#     for a deadline, and the swarm still learns;
#  4. a listed peer that never starts: the others finish, no round waits
#     longer than the deadline;
#  5. a peer killed with SIGKILL mid-run: its neighbours finish, every
#     round bounded by the deadline.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v ss >/dev/null || skip "ss (iproute2) not found"

swarm="$RUMOR_SRCDIR/examples/local-swarm.sh"
export RUMOR_PEER="$RUMOR_BUILDDIR/rumor-peer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

acc() { sed -n "s/^peer $2: $3 test accuracy \(.*\)%/\1/p" "$1/peer-$2.log"; }
# the epoch event's consensus field of a metrics file, epoch E
consensus() { sed -n "s/.*\"event\":\"epoch\",\"epoch\":$2,.*\"consensus\":\([0-9.e+-]*\).*/\1/p" "$1"; }

# 1. D-PSGD
timeout 300 "$swarm" -q -n 8 -d "$tmp/dpsgd" -- --epochs 2 --data "$FASHION" >"$tmp/dpsgd.out" 2>&1
expect_rc 0 $? "8-peer D-PSGD swarm" "$tmp/dpsgd.out"
cat "$tmp/dpsgd.out"
for r in 0 1 2 3 4 5 6 7; do
  a=$(acc "$tmp/dpsgd" $r local)
  expect_num_ge "${a:-0}" 84 "peer $r local accuracy"
done
avg=$(acc "$tmp/dpsgd" 0 "swarm average")
expect_num_ge "${avg:-0}" 85 "swarm average accuracy"
for r in 0 3 7; do
  c1=$(consensus "$tmp/dpsgd/peer-$r.jsonl" 1); c2=$(consensus "$tmp/dpsgd/peer-$r.jsonl" 2)
  echo "peer $r consensus distance: epoch 1 $c1, epoch 2 $c2"
  expect_num_lt "${c2:-1}" "${c1:-0}" "peer $r consensus distance from epoch 1 to 2"
done
# the epoch events' CPU time: each peer's is real work, and all 8 together
# fit in the machine's cores over the slowest peer's epoch (their wall
# time would not: 8 processes share the cores)
cpu_sum=0 wall_max=0
for r in 0 1 2 3 4 5 6 7; do
  ev=$(grep '"event":"epoch","epoch":1,' "$tmp/dpsgd/peer-$r.jsonl")
  c=$(printf '%s' "$ev" | sed -n 's/.*"epoch_cpu_seconds":\([0-9.]*\).*/\1/p')
  w=$(printf '%s' "$ev" | sed -n 's/.*"epoch_seconds":\([0-9.]*\).*/\1/p')
  expect_num_ge "${c:-0}" 0.1 "peer $r epoch 1 CPU seconds"
  cpu_sum=$(awk -v a="$cpu_sum" -v b="${c:-0}" 'BEGIN { print a + b }')
  wall_max=$(awk -v a="$wall_max" -v b="${w:-0}" 'BEGIN { print (b > a ? b : a) }')
done
cores=$(getconf _NPROCESSORS_ONLN)
echo "epoch 1: the peers' CPU time $cpu_sum s, the slowest peer's epoch $wall_max s, $cores cores"
expect_num_lt "$cpu_sum" "$(awk -v w="$wall_max" -v c="$cores" 'BEGIN { print w * c * 1.05 + 0.5 }')" \
  "the 8 peers' epoch 1 CPU time over their cores"

# 2. all-reduce baseline, same seeds
timeout 300 "$swarm" -q -n 8 -d "$tmp/ar" -- --epochs 2 --mode allreduce --data "$FASHION" >"$tmp/ar.out" 2>&1
expect_rc 0 $? "8-peer all-reduce swarm" "$tmp/ar.out"
cat "$tmp/ar.out"
ar=$(acc "$tmp/ar" 0 local)
expect_num_close "${ar:-0}" "${avg:-100}" 1.0 "all-reduce accuracy vs D-PSGD average"
# all-reduce keeps every peer's model identical
for r in 1 5; do
  [ "$(acc "$tmp/ar" $r local)" = "$ar" ] || fail "all-reduce: peer $r differs from peer 0"
done

# 3. a time-varying topology
t0=$(date +%s)
timeout 300 "$swarm" -q -n 8 -t onepeer-exp -d "$tmp/onepeer" -- --epochs 1 --round-timeout 5 \
  --data "$FASHION" >"$tmp/onepeer.out" 2>&1
expect_rc 0 $? "8-peer onepeer-exp swarm" "$tmp/onepeer.out"
t1=$(date +%s)
cat "$tmp/onepeer.out"
for r in 0 1 2 3 4 5 6 7; do
  grep -q "^peer $r: done.*messages: accepted=[0-9]*;" "$tmp/onepeer/peer-$r.log" ||
    fail "onepeer-exp: peer $r dropped messages: $(grep "^peer $r: done" "$tmp/onepeer/peer-$r.log")"
  grep -q "before the deadline" "$tmp/onepeer/peer-$r.log" && fail "onepeer-exp: peer $r waited for a deadline"
done
expect_num_ge "$(acc "$tmp/onepeer" 0 "swarm average")" 80 "onepeer-exp swarm average after one epoch"
echo "onepeer-exp: one epoch in $((t1 - t0)) s"

# 4. a listed peer (rank 3 of 4) never starts
ports=$(free_endpoints 4)
t0=$(date +%s)
for r in 0 1 2; do
  timeout 120 "$RUMOR_PEER" --insecure --rank $r --peers "$ports" --epochs 1 --train-limit 640 --data "$FASHION" \
    --round-timeout 1 --start-timeout 2 --no-average -q --metrics "$tmp/miss-$r.jsonl" \
    >"$tmp/miss-$r.log" 2>&1 &
done
wait
t1=$(date +%s)
for r in 0 1 2; do
  grep -q "^peer $r: done" "$tmp/miss-$r.log" || fail "peer $r did not finish without peer 3: $(tail -3 "$tmp/miss-$r.log")"
done
# 10 rounds, at most one deadline each, plus the start timeout and start-up
echo "3 of 4 peers finished in $((t1 - t0)) s"
[ $((t1 - t0)) -le 30 ] || fail "a missing peer slowed the swarm to $((t1 - t0)) s"

# 5. SIGKILL one of 4 peers mid-run (at round 30 of 468)
ports=$(free_endpoints 4)
pids=
for r in 0 1 2 3; do
  # no timeout(1) wrapper: $! must be the peer itself for the kill to reach it
  "$RUMOR_PEER" --insecure --rank $r --peers "$ports" --epochs 2 --data "$FASHION" --round-timeout 1 \
    --no-average --progress 0.1 --log-level info --metrics "$tmp/kill-$r.jsonl" >"$tmp/kill-$r.log" 2>&1 &
  pids="$pids $!"
done
victim=$(echo $pids | cut -d' ' -f3)
i=0
until grep -q '"event":"round","round":[3-9][0-9]' "$tmp/kill-2.jsonl" 2>/dev/null; do
  sleep 0.1; i=$((i + 1))
  [ $i -lt 600 ] || { fail "peer 2 never reached round 30: $(tail -5 "$tmp/kill-2.log")"; break; }
done
kill -KILL "$victim" 2>/dev/null || fail "peer 2 was already gone before the kill"
killed_at=$(grep -o '"round":[0-9]*' "$tmp/kill-2.jsonl" | tail -1)
t0=$(date +%s)
for p in $pids; do wait "$p"; done
t1=$(date +%s)
for r in 0 1 3; do
  grep -q "^peer $r: done" "$tmp/kill-$r.log" || fail "peer $r did not finish after peer 2 was killed: $(tail -3 "$tmp/kill-$r.log")"
done
# peer 2's ring neighbours noticed it and stopped waiting for it
for r in 1 3; do
  grep -q "peer 2 sent .* before the deadline" "$tmp/kill-$r.log" || fail "peer $r never noticed peer 2 was gone"
done
echo "peer 2 killed at $killed_at; the survivors finished in $((t1 - t0)) s"
[ $((t1 - t0)) -le 60 ] || fail "survivors took $((t1 - t0)) s after the kill"

finish
