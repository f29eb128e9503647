#!/bin/sh
# Streaming outer steps (--fragments, --overlap): eight rumor-peer
# processes on the exponential graph train the MLP on Fashion-MNIST with
# 8 local steps and DiLoCo's outer Nesterov, once with the parameters
# gossiped whole every 8 steps and once in 4 fragments, one every 2 steps,
# with 1 of each round's 2 steps run while its fragment is in flight.
# Every peer's --trace must show round k sending fragment k mod 4 at
# optimizer step 2k + 1 (the schedule); a streamed round's bytes must be a
# fragment's, a quarter of a whole round's, while the run sends the same
# bytes a step; and the swarm average must land within 1.5 points of the
# unstreamed run. A fragment count that does not divide the local steps,
# and an overlap longer than a fragment's steps, are refused by name.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
command -v "$py" >/dev/null 2>&1 || skip "python3 not found (it reads the traces)"

# eight peers on the exponential graph, 8000 examples for 2 epochs, one
# thread each, traced; 8 local steps under DiLoCo's outer Nesterov
swarm8() {
  _s8=$1; shift
  FASHION_PEERS=8 FASHION_TRACE=1 FASHION_DATA="--train-limit 8000 --epochs 2 --threads 1" \
    fashion_swarm "$_s8" --topology exp --local-steps 8 --outer nesterov "$@"
}

swarm8 whole
swarm8 stream --fragments 4 --overlap 1
aw=$(swarm_accuracy whole) as=$(swarm_accuracy stream)
rw=$(metrics_field "$tmp/whole-0.jsonl" done rounds)
rs=$(metrics_field "$tmp/stream-0.jsonl" done rounds)
bw=$(metrics_field "$tmp/whole-0.jsonl" done bytes_sent)
bs=$(metrics_field "$tmp/stream-0.jsonl" done bytes_sent)
echo "whole every 8 steps: $rw rounds, ${bw:-?} bytes sent, swarm average ${aw:-?}%"
echo "4 fragments, 1 step of overlap: $rs rounds, ${bs:-?} bytes sent, swarm average ${as:-?}%"
grep -q "streaming outer steps: 4 fragments of 67331 parameters, one gossiped every 2 steps" \
  "$tmp/stream-0.log" || fail "peer 0 did not say it streams 4 fragments"
# 7500 examples a shard in batches of 32: 234 steps, 29 rounds of 8 or 117 of 2
[ "$rw" = 58 ] || fail "whole: $rw rounds, expected 2 x 29"
[ "$rs" = 234 ] || fail "stream: $rs rounds, expected 2 x 117"
expect_num_close "$(awk "BEGIN{print (${bs:-0} / $rs) / (${bw:-1} / $rw)}")" 0.25 0.01 \
  "bytes a round, 4 fragments against the whole"
expect_num_close "$(awk "BEGIN{print (${bs:-0} / 234) / (${bw:-1} / 232)}")" 1 0.03 \
  "bytes a step, 4 fragments against the whole"
expect_num_close "${as:-0}" "${aw:-99}" 1.5 "the swarm average's test accuracy, streamed against whole"
expect_num_ge "${as:-0}" 80 "the swarm average's test accuracy, streamed"
"$py" - "$tmp" <<'PY' || fail "the traces do not show each fragment sent at its step"
import json, sys
d = sys.argv[1]
for rank in range(8):
    ev = json.load(open(f"{d}/stream-{rank}.trace.json"))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    rounds = sorted((e["args"] for e in ev if e.get("cat") == "round"), key=lambda a: a["round"])
    assert [a["round"] for a in rounds] == list(range(234)), f"peer {rank}: rounds {len(rounds)}"
    for a in rounds:
        k = a["round"]
        assert a["fragment"] == k % 4 and a["sent_step"] == 2 * k + 1, f"peer {rank}: {a}"
print("8 peers x 234 rounds: round k sent fragment k mod 4 at step 2k + 1")
PY
eps=$(free_endpoints 2)
run_expect 2 "--fragments 3: --local-steps 8 is not a multiple of it" "$RUMOR_PEER" --insecure \
  --rank 0 --peers "$eps" --data "$FASHION" --local-steps 8 --outer sgd --fragments 3
run_expect 2 "--overlap 3: at most H / F = 2 steps" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --local-steps 8 --outer sgd --fragments 4 --overlap 3
run_expect 2 "--fragments streams the outer step of local SGD" "$RUMOR_PEER" --insecure \
  --rank 0 --peers "$eps" --data "$FASHION" --local-steps 8 --fragments 4
run_expect 2 "--overlap '1:alpha=2'" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" \
  --data "$FASHION" --local-steps 8 --outer sgd --overlap 1:alpha=2
finish
