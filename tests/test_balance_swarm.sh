#!/bin/sh
# --balance batch in a real swarm: three peers on loopback train a GPT on
# the GPL's text, peer 2 four times slower (--throttle 4). The fast peers
# take more batches a round (their metrics say how many) and process more
# examples a second than the slow one, which takes fewer (one, unless the
# shared cores slow it further); everyone finishes and mixes. --balance with --mode async is refused.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
text_peer_test_setup

eps=$(free_endpoints 3)
for r in 0 1 2; do
  slow=; [ $r = 2 ] && slow="--throttle 4"
  # shellcheck disable=SC2086
  timeout 300 "$RUMOR_PEER" --insecure --rank $r --peers "$eps" --data "text:$text" \
    --model gpt:layers=2,dim=32,heads=2,ctx=32 --batch 8 --rounds 120 --optimizer adamw \
    --lr 3e-3 --no-average --progress 0.2 --round-timeout 20 --balance batch --balance-max 4 \
    $slow --metrics "$tmp/p$r.jsonl" >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a peer failed: $(tail -n 2 "$tmp"/p*.log)"; done
b0=$(metrics_field "$tmp/p0.jsonl" round batches)
b1=$(metrics_field "$tmp/p1.jsonl" round batches)
b2=$(metrics_field "$tmp/p2.jsonl" round batches)
e0=$(metrics_field "$tmp/p0.jsonl" done examples_per_s)
e2=$(metrics_field "$tmp/p2.jsonl" done examples_per_s)
echo "batches a round at the end: peer 0 $b0, peer 1 $b1, peer 2 (4x slower) $b2;" \
  "examples/s: peer 0 $e0, peer 2 $e2"
expect_num_ge "${b0:-0}" 2 "peer 0's batches a round"
expect_num_ge "${b1:-0}" 2 "peer 1's batches a round"
# the slow peer keeps 1 batch on machines of its own; on two shared cores the
# fast peers' extra batches slow it too, and it may wait now and then
[ "${b2:-9}" -lt "${b0:-0}" ] && [ "${b2:-9}" -lt "${b1:-0}" ] ||
  fail "the slow peer took ${b2:-?} batches a round, not fewer than the fast ones (${b0:-?}, ${b1:-?})"
expect_num_ge "${e0:-0}" "$(awk "BEGIN{print 1.5 * ${e2:-1e9}}")" "peer 0's examples/s against 1.5x the slow peer's"
grep -q "batches [0-9]" "$tmp/p0.log" || fail "no batches in the progress lines"

run_expect 2 "needs --mode dpsgd" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "text:$text" --balance batch --mode async
finish
