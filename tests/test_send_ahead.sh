#!/bin/sh
# --send-ahead (rumor_mixer_send_ahead): an unpipelined D-PSGD peer steps
# round k's mix cell by cell as the cells arrive and hands each stepped cell
# of x(k+1) to round k+1's out-neighbours at once, before round k ends.
# 4 rumor-peer processes on loopback, onepeer-exp (time-varying: each round
# sends to another neighbour), 64 KiB cells, the same seeds with and without:
#  1. no round of either run waits for its deadline, and every message is
#     used (a round sent early is never too far ahead for its receiver);
#  2. the swarm averages both runs save are the same bytes: sending a cell
#     early changes when it travels, not what is computed;
#  3. with it every peer sent part of its parameters ahead of their round,
#     without it none did;
#  4. the swarm learned.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

run() { # NAME OPTIONS...
  _name=$1; shift
  _eps=$(free_endpoints 4)
  mkdir -p "$tmp/$_name-avg"
  pids=
  for _r in 0 1 2 3; do
    timeout 200 "$RUMOR_PEER" --insecure --rank $_r --peers "$_eps" --topology onepeer-exp \
      --data "$FASHION" --train-limit 2000 --epochs 1 --batch 32 --lr 0.05 --threads 1 \
      --chunk-mb 0.0625 --min-round-timeout 10 --progress 0 --log-level info \
      --save-average "$tmp/$_name-avg" "$@" >"$tmp/$_name-$_r.log" 2>&1 &
    pids="$pids $!"
  done
  for _p in $pids; do
    wait "$_p" || fail "a peer of the $_name run failed: $(tail -n 3 "$tmp/$_name-0.log")"
  done
  pids=
  for _r in 0 1 2 3; do
    grep -q "before the deadline" "$tmp/$_name-$_r.log" &&
      fail "$_name: peer $_r waited for a deadline: $(grep -m1 'before the deadline' "$tmp/$_name-$_r.log")"
    grep -q "^peer $_r: done.*messages: accepted=[0-9]*;" "$tmp/$_name-$_r.log" ||
      fail "$_name: peer $_r dropped messages: $(grep "^peer $_r: done" "$tmp/$_name-$_r.log")"
  done
}

run ahead --send-ahead yes
run whole --send-ahead no
cat "$tmp/ahead-0.log"

# 2. the same parameters
a=$(ls "$tmp"/ahead-avg/*.safetensors 2>/dev/null | head -n 1)
w=$(ls "$tmp"/whole-avg/*.safetensors 2>/dev/null | head -n 1)
if [ -z "$a" ] || [ -z "$w" ]; then
  fail "a run saved no swarm average ($a / $w)"
elif cmp -s "$a" "$w"; then
  echo "the swarm averages are the same bytes ($(wc -c <"$a") bytes)"
else
  fail "the swarm average with --send-ahead differs from the one without ($a, $w)"
fi

# 3. sent ahead, or not
for r in 0 1 2 3; do
  pct=$(sed -n "s/^peer $r: sent ahead: \([0-9.]*\)% .*/\1/p" "$tmp/ahead-$r.log")
  echo "peer $r: ${pct:-none}% of what it sent went before its round began"
  expect_num_ge "${pct:-0}" 5 "peer $r: share sent ahead"
  grep -q "sent ahead" "$tmp/whole-$r.log" && fail "peer $r sent ahead with --send-ahead no"
done

# 4. learned: 62 rounds of batch 32
acc=$(sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/ahead-0.log")
expect_num_ge "${acc:-0}" 65 "swarm average accuracy with --send-ahead"
finish
