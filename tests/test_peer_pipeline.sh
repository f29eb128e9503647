#!/bin/sh
# Pipelined peers in a swarm: rumor-peer takes the pipeline options. Two
# peers on loopback, one cutting its model into 2 stages under zbv, the
# other unpipelined, train one epoch together with D-PSGD: both finish and
# learn, and each writes a Chrome trace (--trace) holding its compute (the
# pipelined peer: every F, B and W of every stage, a row a device; the other
# each round's gradient) and a gossip row whose rounds contain their waits
# and the comm thread's mixing, and each round's ranges arriving (ending
# before it closed); the pipelined peer's stages each step on
# their own range of the mix ("step S" on their device's row, after the
# stage's last action, inside the round).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

ports=$(free_endpoints 2)
common="--insecure --peers $ports --epochs 1 --train-limit 1280 --data $FASHION --no-average"
# shellcheck disable=SC2086
timeout 120 "$RUMOR_PEER" $common --rank 0 --stages 2 --schedule zbv --microbatches 4 \
  --trace "$tmp/t0.json" --metrics "$tmp/m0.jsonl" --progress 0 >"$tmp/p0.log" 2>&1 &
# shellcheck disable=SC2086
timeout 120 "$RUMOR_PEER" $common -q --rank 1 --trace "$tmp/t1.json" >"$tmp/p1.log" 2>&1
expect_rc 0 $? "the unpipelined peer" "$tmp/p1.log"
wait $!
expect_rc 0 $? "the pipelined peer (2 stages, zbv)" "$tmp/p0.log"
for r in 0 1; do
  a=$(sed -n "s/^peer $r: local test accuracy \(.*\)%/\1/p" "$tmp/p$r.log")
  expect_num_ge "${a:-0}" 60 "peer $r local accuracy after one epoch of 1280 examples"
done

# the rounds' progress lines and metrics carry the pipeline's measured bubble
grep -q "bubble [0-9]*%" "$tmp/p0.log" || fail "no bubble in the progress lines: $(grep -m1 '^round' "$tmp/p0.log")"
grep -q '"event":"round".*"bubble":0\.[0-9]' "$tmp/m0.jsonl" ||
  fail "no round event with the pipeline's bubble: $(grep -m1 '"event":"round"' "$tmp/m0.jsonl")"

py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" - "$tmp/t0.json" "$tmp/t1.json" <<'PY' || fail "--trace of rumor-peer: see above"
import json, sys
rounds = 1280 // 64  # --train-limit examples a peer, batches of 64
for path, pipelined in ((sys.argv[1], True), (sys.argv[2], False)):
    ev = json.load(open(path))
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    x = [e for e in ev if e["ph"] == "X"]
    gossip = max(names)
    assert names[gossip] == "gossip", names
    rs = [e for e in x if e["tid"] == gossip and e["cat"] == "round"]
    ws = [e for e in x if e["tid"] == gossip and e["cat"] == "wait"]
    assert len(rs) == rounds and len(ws) == rounds, (path, len(rs), len(ws))
    for r, w in zip(rs, ws):  # each wait inside its round
        assert r["args"]["round"] == w["args"]["round"]
        assert r["ts"] - 1 <= w["ts"] and w["ts"] + w["dur"] <= r["ts"] + r["dur"] + 1, (r, w)
    # each round's ranges arriving (sent ahead ones before it began), the
    # last before it closed; the trace says where its clock starts
    net = {e["args"]["round"]: e for e in x if e["tid"] == gossip and e["cat"] == "network"}
    assert len(net) == rounds and all(e["name"] == "receiving" for e in net.values()), len(net)
    for r in rs:
        e = net[r["args"]["round"]]
        assert e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1, (r, e)
    assert [e["args"]["monotonic_s"] > 0 for e in ev if e["name"] == "clock_origin"] == [True]
    if pipelined:
        assert gossip == 2 and names[0].startswith("device 0") and names[1].startswith("device 1")
        acts = [e for e in x if e["cat"] in ("F", "B", "W")]
        # zbv: 2 devices, 4 stages, 4 micro-batches: 4 x 4 x 3 actions a round
        assert len(acts) == rounds * 4 * 4 * 3, len(acts)
        assert {e["args"]["stage"] for e in acts if e["tid"] == 0} == {0, 3}
        assert {e["args"]["stage"] for e in acts if e["tid"] == 1} == {1, 2}
        # each stage's optimizer step on its own range of the mix, on its
        # device's row, after that stage's last action and inside the round
        steps = [e for e in x if e["cat"] == "optimizer"]
        assert len(steps) == rounds * 4, len(steps)
        for e in steps:
            s, k = e["args"]["stage"], e["args"]["step"]
            assert e["tid"] == (0 if s in (0, 3) else 1), e
            last = max(a["ts"] + a["dur"] for a in acts
                       if a["args"]["stage"] == s and a["args"]["step"] == k)
            assert e["ts"] >= last - 1, (e, last)
            r = [r for r in rs if r["args"]["step"] == k][0]
            assert r["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1, (r, e)
        waits = [e for e in x if e["cat"] == "gossip" and e["tid"] != gossip]
        assert all(e["name"].startswith("wait for mix") for e in waits), waits[:3]
        mixing = [e for e in x if e["cat"] == "gossip" and e["tid"] == gossip]
        assert len(mixing) > 0 and all(e["name"] == "mixing" for e in mixing), mixing[:3]
    else:
        assert gossip == 1 and names[0].startswith("compute")
        g = [e for e in x if e["cat"] == "compute"]
        assert len(g) == rounds, len(g)
    print(path, "ok:", len(x), "spans on", len(names), "rows")
PY
finish
