#!/bin/sh
# examples/plot-metrics draws a swarm's metrics files: two peers train the
# MLP for 2 epochs on loopback; their run directory drawn as SVG parses as
# XML with the four panels' titles and one legend entry per peer, and as
# PNG starts with PNG's signature. A file with a garbage line is refused
# naming the file and line; a peer's cut last line is skipped with a
# warning; an open swarm's peers (a "peer" id, no rank) in one file are
# told apart by their ids; a missing path or a picture that is neither .svg
# nor .png is a usage error.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not found"
"$PY" -c 'import matplotlib' 2>/dev/null || skip "matplotlib not installed (apt-get install python3-matplotlib)"
peer_test_setup
plot="$RUMOR_SRCDIR/examples/plot-metrics"
eps=$(free_endpoints 2)
mkdir -p "$tmp/run"
for r in 0 1; do
  timeout 120 "$RUMOR_PEER" --insecure --rank $r --peers "$eps" --data "$FASHION" \
    --train-limit 2000 --epochs 2 --batch 32 --progress 0 \
    --metrics "$tmp/run/peer$r.jsonl" >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a peer failed: $(tail -n 2 "$tmp/p0.log")"; done
pids=
out=$("$PY" "$plot" "$tmp/run" -o "$tmp/m.svg" --title "two peers" 2>&1) || fail "plot-metrics: $out"
echo "$out"
echo "$out" | grep -q "2 peers" || fail "plot-metrics did not find the 2 peers: $out"
"$PY" - "$tmp/m.svg" <<'PYEOF' || fail "the SVG (see above)"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
text = " ".join(t for t in root.itertext())
ok = True
for want in ("training loss", "test accuracy", "per second", "consensus distance", "two peers",
             "peer 0", "peer 1"):
    if want not in text:
        print("test_plot_metrics: the SVG has no %r" % want, file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
PYEOF
"$PY" "$plot" "$tmp/run/peer0.jsonl" -o "$tmp/m.png" >/dev/null 2>&1 || fail "plot-metrics to PNG"
[ "$(head -c 8 "$tmp/m.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "the PNG does not start with PNG's signature"
# a cut last line (a killed peer) is skipped; garbage elsewhere is an error
cp "$tmp/run/peer0.jsonl" "$tmp/cut.jsonl"
printf '{"time":1,"rank":0,"event":"rou' >> "$tmp/cut.jsonl"
run_expect 0 "a cut last line, skipped" "$PY" "$plot" "$tmp/cut.jsonl" -o "$tmp/c.svg"
{ head -n 1 "$tmp/run/peer0.jsonl"; echo 'not json'; tail -n 2 "$tmp/run/peer0.jsonl"; } > "$tmp/bad.jsonl"
run_expect 1 "bad.jsonl:2: not a JSON object" "$PY" "$plot" "$tmp/bad.jsonl" -o "$tmp/b.svg"
# An open swarm's peers (--join) carry a "peer" id and no rank: three of
# them in one shared file, their events interleaved, are three peers (one
# line each, labelled with the id's first 8 hex digits), not one zig-zag.
"$PY" - "$tmp/open.jsonl" <<'PYEOF'
import json, sys
ids = ["1a2b3c4d00000001", "5e6f708100000002", "9a0b1c2d00000003"]
with open(sys.argv[1], "w") as f:
    for i, peer in enumerate(ids):
        f.write(json.dumps({"time": 100.0 + i, "mono": 1.0, "peer": peer, "swarm": "rumor",
                            "event": "start", "peers": 3, "mode": "dpsgd"}) + "\n")
    for k in range(1, 13):
        for i, peer in enumerate(ids):
            f.write(json.dumps({"time": 100.0 + i + k, "mono": 1.0 + k, "peer": peer,
                                "swarm": "rumor", "event": "round", "round": k,
                                "loss": 2.0 / k + i, "examples_per_s": 1000.0 + 100 * i,
                                "consensus": 0.1 / k}) + "\n")
PYEOF
out=$("$PY" "$plot" "$tmp/open.jsonl" -o "$tmp/open.svg" 2>&1) || fail "plot-metrics (open swarm): $out"
echo "$out"
echo "$out" | grep -q "plot-metrics: 3 peers" || fail "an open swarm's 3 peers drawn as: $out"
"$PY" - "$tmp/open.svg" <<'PYEOF' || fail "the open swarm's SVG (see above)"
import sys, xml.etree.ElementTree as ET
texts = [t.strip() for t in ET.parse(sys.argv[1]).getroot().itertext() if t.strip()]
ok = True
for want in ("peer 1a2b3c4d", "peer 5e6f7081", "peer 9a0b1c2d"):
    if texts.count(want) != 1:  # once, in the legend
        print("test_plot_metrics: the open swarm's legend has %r %d times, not once: %s"
              % (want, texts.count(want), [t for t in texts if t.startswith("peer")]),
              file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
PYEOF
# two ids alike in their first 8 digits are labelled whole
sed 's/5e6f708100000002/1a2b3c4d00000002/' "$tmp/open.jsonl" > "$tmp/alike.jsonl"
run_expect 0 "3 peers" "$PY" "$plot" "$tmp/alike.jsonl" -o "$tmp/alike.svg"
grep -q ">peer 1a2b3c4d00000002<" "$tmp/alike.svg" ||
  fail "two open peers alike in 8 digits are not labelled with their whole ids"
run_expect 2 "no such file or directory" "$PY" "$plot" "$tmp/nope.jsonl" -o "$tmp/b.svg"
run_expect 2 "must end in .svg or .png" "$PY" "$plot" "$tmp/run" -o "$tmp/b.pdf"
finish
