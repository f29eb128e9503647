#!/bin/sh
# Swarms of real rumor-peer processes on loopback, on Fashion-MNIST:
#  1. 8 peers on a ring, D-PSGD, 2 epochs: every peer's model reaches at
#     least 84% test accuracy, the swarm average at least 85%, and the
#     consensus distance shrinks from epoch 1 to epoch 2;
#  2. the same swarm and seeds with the ring all-reduce baseline lands
#     within 1 point of D-PSGD;
#  3. a listed peer that never starts: the others finish, no round waits
#     longer than the deadline;
#  4. a peer killed with SIGKILL mid-run: its neighbours finish, every
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

# 3. a listed peer (rank 3 of 4) never starts
ports=$(seq 0 3 | while read i; do echo "tcp://127.0.0.1:$(( $(od -An -N2 -tu2 /dev/urandom) % 20000 + 30000 ))"; done | paste -sd, -)
t0=$(date +%s)
for r in 0 1 2; do
  timeout 120 "$RUMOR_PEER" --rank $r --peers "$ports" --epochs 1 --train-limit 640 --data "$FASHION" \
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

# 4. SIGKILL one of 4 peers mid-run
ports=$(seq 0 3 | while read i; do echo "tcp://127.0.0.1:$(( $(od -An -N2 -tu2 /dev/urandom) % 20000 + 30000 ))"; done | paste -sd, -)
pids=
for r in 0 1 2 3; do
  timeout 180 "$RUMOR_PEER" --rank $r --peers "$ports" --epochs 2 --train-limit 3200 --data "$FASHION" \
    --round-timeout 1 --no-average -q --metrics "$tmp/kill-$r.jsonl" >"$tmp/kill-$r.log" 2>&1 &
  pids="$pids $!"
done
victim=$(echo $pids | cut -d' ' -f3)
sleep 3
kill -KILL "$victim" 2>/dev/null || fail "peer 2 was already gone before the kill"
t0=$(date +%s)
for p in $pids; do wait "$p"; done
t1=$(date +%s)
for r in 0 1 3; do
  grep -q "^peer $r: done" "$tmp/kill-$r.log" || fail "peer $r did not finish after peer 2 was killed: $(tail -3 "$tmp/kill-$r.log")"
done
echo "after the kill the survivors finished in $((t1 - t0)) s"
[ $((t1 - t0)) -le 60 ] || fail "survivors took $((t1 - t0)) s after the kill"

finish
