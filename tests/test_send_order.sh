#!/bin/sh
# The oldest round first, on the wire (docs/protocol.md, section 6): a peer
# hands round k + 1's ranges to ZeroMQ only once round k's went to every
# live neighbour, so that two rounds do not share its upload and the older
# one, which a neighbour waits for, is not made later. Checked where it
# matters, at the receivers: 4 peers in network namespaces with 50 Mbit/s
# links (examples/netns-swarm.sh --traces), onepeer-exp (each round to
# another neighbour, and one of the two a peer sends to never sends back in
# its rounds: it says its round only in heartbeats and looks behind, which
# once let its rounds go out beside the next), 60 rounds, the peers'
# --trace files lined up by their clock origins. For each sender and
# consecutive rounds k -> a, k + 1 -> b: how long b was already receiving
# round k + 1 before a had the last of round k, over the time one round
# takes on a link (L). What the kernel and the shaping hold after the hand
# over overlaps a little (measured 0.33-0.40 L on average); rounds handed
# over side by side overlap about twice that (0.71-0.76 L). Also: every
# round's receive span lies inside what causality allows (it starts after
# its sender began the round before, it ends before the round closed),
# which checks --trace's "receiving" spans and clock_origin themselves.
# examples/trace-svg draws the 4 traces on one time axis (--rows gossip):
# every peer's row, the receive bars of the rounds asked for inside the
# picture; a trace without a clock_origin is refused beside others.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v tc >/dev/null 2>&1 || skip "tc (iproute2) not found"
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
command -v "$py" >/dev/null 2>&1 || skip "python3 not found (it reads the traces)"
need_fashion
swarm_setup
probe=rumor-probe-$$
if ! ip netns add "$probe" 2>/dev/null; then skip "ip netns does not work here"; fi
ok=1
ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null &&
  ip netns exec "$probe" tc qdisc add dev v0 root tbf rate 50mbit burst 64k latency 50ms 2>/dev/null || ok=0
ip netns del "$probe" 2>/dev/null
[ "$ok" = 1 ] || skip "veth pairs or tbf shaping do not work in a network namespace"

timeout 180 bash "$RUMOR_SRCDIR/examples/netns-swarm.sh" -n 4 --rate 50mbit --traces \
  --no-follow --timeout 150 --run-dir "$tmp/run" --bin "$RUMOR_BUILDDIR/rumor-peer" -- \
  --insecure --data "$FASHION" --topology onepeer-exp --rounds 60 --batch 64 --threads 1 \
  --seed 1 --no-average --progress 0 >"$tmp/swarm.out" 2>&1
expect_rc 0 $? "netns-swarm.sh -n 4 --rate 50mbit --traces" "$tmp/swarm.out"
grep -E '^(epoch|TCP)' "$tmp/swarm.out"

"$py" - "$tmp/run" <<'PY' || fail "the order rounds arrived in: see above"
import json, sys
d, n, rate = sys.argv[1], 4, 50e6 / 8
tau = (n - 1).bit_length()
recv, rounds, sent_mb = {}, {}, []
for k in range(n):
    ev = json.load(open(f"{d}/peer{k}.trace.json"))
    o = [e for e in ev if e["ph"] == "M" and e["name"] == "clock_origin"]
    assert len(o) == 1 and o[0]["args"]["monotonic_s"] > 0, o
    o = o[0]["args"]["monotonic_s"]
    span = lambda e: (o + e["ts"] / 1e6, o + (e["ts"] + e["dur"]) / 1e6)
    for e in ev:
        if e["ph"] == "X" and e["name"] == "receiving":
            recv[(k, e["args"]["round"])] = span(e)
        if e["ph"] == "X" and e["cat"] == "round":
            rounds[(k, e["args"]["round"])] = span(e)
    for line in open(f"{d}/peer{k}.jsonl"):
        j = json.loads(line)
        if j["event"] == "done":
            sent_mb.append(j["bytes_sent"] / j["rounds"])
L = sum(sent_mb) / len(sent_mb) / rate   # one round's bytes over one link
print(f"{len(recv)} receive spans; a round takes {1e3 * L:.0f} ms on a link")
assert len(recv) >= n * 55, len(recv)
# onepeer-exp: in round r peer i sends to i - 2^(r mod tau)
to = lambda i, r: (i - (1 << (r % tau))) % n
late = []
for (i, r), (t0, t1) in recv.items():
    s = (i + (1 << (r % tau))) % n   # the sender
    if r >= 1 and (s, r - 1) in rounds:
        # x_s(r) exists once s began round r - 1 (sent ahead: cell by cell)
        assert t0 >= rounds[(s, r - 1)][0] - 1e-3, ("arrived before it existed", i, r)
    if (i, r) in rounds:
        assert t1 <= rounds[(i, r)][1] + 1e-3, ("arrived after its round closed", i, r)
ov = []
for s in range(n):
    for r in range(2, 59):
        a, b = to(s, r), to(s, r + 1)
        if a != b and (a, r) in recv and (b, r + 1) in recv:
            ov.append(max(0.0, recv[(a, r)][1] - recv[(b, r + 1)][0]) / L)
ov.sort()
mean = sum(ov) / len(ov)
print(f"{len(ov)} pairs of rounds: round k + 1 already arriving before round k's last byte, "
      f"over L: mean {mean:.2f}, median {ov[len(ov) // 2]:.2f}, 90th percentile {ov[9 * len(ov) // 10]:.2f}")
assert len(ov) >= 4 * 50, len(ov)
assert mean < 0.55, f"rounds went out side by side: mean overlap {mean:.2f} L (in order: about 0.38)"
PY

# the swarm drawn on one time axis: every peer's gossip row, a receive bar
# each for the rounds asked for, each inside the picture
"$py" "$RUMOR_SRCDIR/examples/trace-svg" "$tmp"/run/peer*.trace.json "$tmp/swarm.svg" \
  --rows gossip --steps 20:24 >"$tmp/svg.out" 2>&1 || fail "trace-svg of 4 traces: $(cat "$tmp/svg.out")"
"$py" - "$tmp/swarm.svg" <<'PY' || fail "trace-svg: the swarm's picture, see above"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
labels = [t.text for t in root.iter(ns + "text") if t.text and t.text.endswith(": gossip")]
assert labels == [f"peer{k}: gossip" for k in range(4)], labels
w = float(root.get("width"))
bars = [r for r in root.iter(ns + "rect")
        if r.find(ns + "title") is not None and r.find(ns + "title").text.startswith("receiving")]
rounds = {}
for r in bars:
    x, bw = float(r.get("x")), float(r.get("width"))
    assert 250 - 0.1 <= x and x + bw <= w - 20 + 0.1, (x, bw)
    k = int(r.find(ns + "title").text.split('"round": ')[1].split(",")[0])
    rounds.setdefault(k, 0)
    rounds[k] += 1
# rounds 20 to 23 at all 4 peers (neighbouring rounds' bars may show, clipped)
assert all(rounds.get(k) == 4 for k in range(20, 24)), rounds
PY
run_expect 2 "no row's name holds 'nothing'" "$py" "$RUMOR_SRCDIR/examples/trace-svg" \
  "$tmp"/run/peer*.trace.json "$tmp/x.svg" --rows nothing
# a trace with no clock to line it up by is refused beside others
printf '%s\n' '[{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"gossip"}},' \
  '{"name":"round 1","cat":"round","ph":"X","pid":1,"tid":1,"ts":1,"dur":2,"args":{"round":1}}]' \
  >"$tmp/noorigin.json"
run_expect 2 "noorigin.json: no clock_origin event" "$py" "$RUMOR_SRCDIR/examples/trace-svg" \
  "$tmp/run/peer0.trace.json" "$tmp/noorigin.json" "$tmp/x.svg"
finish
