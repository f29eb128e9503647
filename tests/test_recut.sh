#!/bin/sh
# A pipelined peer killed and restarted with another cut: three peers train
# a GPT on English text (the GPL's, from base-files); peer 1 runs it as 2
# stages, checkpointing every 20 rounds. SIGKILL mid-round (no goodbye, no
# last checkpoint); restarted with 3 stages under another schedule, it
# resumes from its newest checkpoint (which holds the whole space, not a
# cut), rejoins and the three finish with one model (validation losses
# within 0.05 nats). 800 rounds: the restarted peer rejoins after the
# neighbours' 5 s deadline, some 250 rounds later, and on a loaded machine
# later still; it needs rounds left to mix back to the swarm's model.
# A peer whose stage device does not open refuses to start with the device's
# name and never joins.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
text_peer_test_setup

eps=$(free_endpoints 3)
common="--insecure --peers $eps --data text:$text --model gpt:layers=3,dim=32,heads=2,ctx=32
  --batch 8 --rounds 800 --optimizer adamw --lr 3e-3 --round-timeout 5 --progress 0.2
  --no-average"
for r in 0 2; do
  # --throttle 4: alone while peer 1 restarts, the neighbours would run the
  # rounds left in the second or two its restart takes, and it would rejoin
  # a swarm with none left to mix back into (a fast machine did that)
  # shellcheck disable=SC2086
  timeout 300 "$RUMOR_PEER" $common --rank $r --throttle 4 --metrics "$tmp/p$r.jsonl" \
    >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
# shellcheck disable=SC2086
"$RUMOR_PEER" $common --rank 1 --stages 2 --schedule zb-h1 --checkpoint-dir "$tmp/ckpt" \
  --checkpoint-every 20 --metrics "$tmp/p1.jsonl" >"$tmp/p1.log" 2>&1 &
victim=$!
pids="$pids $victim"
wait_round "$tmp/p1.jsonl" 130
kill -KILL "$victim"
wait "$victim" 2>/dev/null
grep -q "^rumor-peer 1/3:   stage 1 on" "$tmp/p1.log" ||
  fail "peer 1 did not run 2 stages: $(grep -m3 'rumor-peer 1' "$tmp/p1.log")"
newest=$(ls "$tmp/ckpt" | grep '^rumor-r1-.*\.safetensors$' | sort | tail -1)
[ -n "$newest" ] || fail "peer 1 wrote no checkpoint in 130 rounds"
at=$(echo "$newest" | sed 's/^rumor-r1-0*\([0-9][0-9]*\)\.safetensors$/\1/')
echo "peer 1 (2 stages) killed past round 130; newest checkpoint: round $at"

# shellcheck disable=SC2086
timeout 300 "$RUMOR_PEER" $common --rank 1 --stages 3 --schedule gpipe --microbatches 4 \
  --checkpoint-dir "$tmp/ckpt" --checkpoint-every 20 --metrics "$tmp/p1b.jsonl" \
  >"$tmp/p1b.log" 2>&1
expect_rc 0 $? "peer 1 restarted with 3 stages" "$tmp/p1b.log"
grep -q "^rumor-peer 1/3:   stage 2 on" "$tmp/p1b.log" ||
  fail "the restarted peer 1 did not run 3 stages: $(grep -m4 'rumor-peer 1' "$tmp/p1b.log")"
grep -q "resumed from .*/$newest at round $at" "$tmp/p1b.log" ||
  fail "the restart did not resume from $newest: $(grep -m3 'rumor-peer 1' "$tmp/p1b.log")"
for p in $pids; do [ "$p" = "$victim" ] || wait "$p" || fail "a neighbour failed"; done
for r in 0 2; do
  grep -q "^peer $r: done" "$tmp/p$r.log" || fail "peer $r did not finish: $(tail -3 "$tmp/p$r.log")"
done
l0=$(sed -n 's/^peer 0: local validation loss \(.*\)/\1/p' "$tmp/p0.log")
l1=$(sed -n 's/^peer 1: local validation loss \(.*\)/\1/p' "$tmp/p1b.log")
l2=$(sed -n 's/^peer 2: local validation loss \(.*\)/\1/p' "$tmp/p2.log")
echo "validation losses: peer 0 ${l0:-?}, peer 1 (restarted, 3 stages) ${l1:-?}, peer 2 ${l2:-?}"
expect_num_close "${l1:-99}" "${l0:-0}" 0.05 "peer 1's validation loss against peer 0's"
expect_num_close "${l1:-99}" "${l2:-0}" 0.05 "peer 1's validation loss against peer 2's"
expect_num_lt "${l1:-99}" 3.5 "peer 1's validation loss (ln 256 = 5.55 untrained)"

# A stage device that does not open: refused, by name, before joining.
eps=$(free_endpoints 2)
timeout 60 "$RUMOR_PEER" --insecure --peers "$eps" --rank 0 --data "text:$text" \
  --model gpt:layers=2,dim=16,heads=2,ctx=16 --devices cpu:1,cpu:lots >"$tmp/bad.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a peer with the device cpu:lots exited $rc"
grep -q "device 'cpu:lots'" "$tmp/bad.log" || fail "the bad device was not named: $(cat "$tmp/bad.log")"
grep -q "listening on" "$tmp/bad.log" && fail "a peer with a device that did not open joined"
finish
