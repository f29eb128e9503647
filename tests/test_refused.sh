#!/bin/sh
# Refused connections are visible: a secure swarm of 2 peers (rank 2 of the
# list never runs) while three intruders try rank 2's place:
#  - a plaintext peer (--insecure: the NULL mechanism at a CURVE server),
#  - a peer with a key that is not on the swarm's allow-list (ZAP refuses),
#  - the real rank 2 key with a wrong public key for peer 0 (the handshake
#    fails cryptographically at peer 0).
# Peer 0 counts each kind, and shows them in its final "messages" line, in
# its done metrics event and in its round events while it runs.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
command -v python3 >/dev/null || skip "python3 not found"
peer_test_setup

ports=$(free_endpoints 6)
peers=$(echo "$ports" | cut -d, -f1-3)
mkdir -p "$tmp/keys" "$tmp/stranger" "$tmp/wrong"
for r in 0 1 2; do "$RUMOR_PEER" keygen "$tmp/keys/peer-$r" >/dev/null || fail keygen; done
"$RUMOR_PEER" keygen "$tmp/stranger-key" "$tmp/other" >/dev/null || fail keygen
# the stranger's allow-list: the swarm's keys, and its own as peer 2
cp "$tmp/keys/peer-0.pub" "$tmp/keys/peer-1.pub" "$tmp/stranger/"
cp "$tmp/stranger-key.pub" "$tmp/stranger/peer-2.pub"
# the real rank 2 key, but someone else's key listed for peer 0
cp "$tmp/keys/peer-1.pub" "$tmp/keys/peer-2.pub" "$tmp/wrong/"
cp "$tmp/other.pub" "$tmp/wrong/peer-0.pub"

for r in 0 1; do
  "$RUMOR_PEER" --keys "$tmp/keys/peer-$r.key" --allow "$tmp/keys" --rank $r --peers "$peers" \
    --epochs 12 --train-limit 3200 --throttle 20 --start-timeout 3 --round-timeout 1 \
    --data "$FASHION" --no-average --progress 0.1 --metrics "$tmp/peer-$r.jsonl" \
    >"$tmp/peer-$r.log" 2>&1 &
  pids="$pids $!"
done
wait_round "$tmp/peer-0.jsonl" 5
i=0
for sec in "--insecure" \
           "--keys $tmp/stranger-key.key --allow $tmp/stranger" \
           "--keys $tmp/keys/peer-2.key --allow $tmp/wrong"; do
  i=$((i + 1))
  timeout 30 "$RUMOR_PEER" $sec --rank 2 --peers "$peers" --listen "$(echo "$ports" | cut -d, -f$((3 + i)))" \
    --epochs 1 --train-limit 64 --start-timeout 1 --round-timeout 0.5 --data "$FASHION" \
    --no-average -q >"$tmp/intruder-$i.log" 2>&1 &
done
for p in $pids; do wait "$p"; done
pids=
wait
line=$(grep "^peer 0: done" "$tmp/peer-0.log")
echo "$line"
[ -n "$line" ] || fail "peer 0 did not finish: $(tail -3 "$tmp/peer-0.log")"
for kind in not_listed crypto; do
  echo "$line" | grep -q "connections: admitted=[0-9]* refused:.* $kind=[1-9]" ||
    fail "peer 0's messages line does not count $kind refusals"
done
echo "$line" | grep -Eq "connections: .* (mechanism|no_detail)=[1-9]" ||
  fail "peer 0's messages line does not count the plaintext client"
python3 - "$tmp/peer-0.jsonl" <<'PY' || fail "metrics events do not count the refusals"
import json, sys
done = None
live = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "done":
        done = e
    elif e["event"] == "round" and e["connections"]["refused"] > 0:
        live += 1
c = done["connections"]
assert c["not_listed"] > 0 and c["crypto"] > 0 and c["mechanism"] + c["no_detail"] > 0, c
assert c["refused"] == sum(c[k] for k in ("not_listed", "zap_mechanism", "zap_malformed",
                                          "crypto", "mechanism", "protocol", "no_detail")), c
assert live > 0, "no round event saw a refusal"
print("done event:", c, "; round events with refusals:", live)
PY
finish
