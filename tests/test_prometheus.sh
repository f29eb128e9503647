#!/bin/sh
# rumor-peer --metrics-listen: two peers train the MLP; peer 0 serves
# Prometheus metrics, scraped every 0.2 s while it trains. Every page
# parses with a text-format parser written here (HELP and TYPE before each
# family, samples name{labels} value, no family twice); names follow
# Prometheus's conventions (rumor_ prefix, counters end in _total, base
# units); counters never decrease from one scrape to the next; the round
# goes up; rejected messages carry every reason as a label; the last page
# has the bytes, waiting, consensus, membership, checkpoint age and test
# accuracy. A malformed request gets a 400, bytes that are not HTTP are
# dropped, a POST gets a 405, another path a 404, and the peer keeps
# training and ends normally. A bad --metrics-listen is refused before the
# peer joins anyone.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not found"
"$RUMOR_PEER" --help | grep -q -- --metrics-listen || fail "rumor-peer has no --metrics-listen"
eps=$(free_endpoints 3)
port=$(echo "$eps" | cut -d, -f3 | sed 's/.*://')
eps2=$(echo "$eps" | cut -d, -f1,2)
grep -q "define HAVE_MHD 1" "$RUMOR_BUILDDIR/config.h" ||
  skip "rumor-peer was built without libmicrohttpd (apt-get install libmicrohttpd-dev)"
for r in 0 1; do
  extra=
  [ $r = 0 ] && extra="--metrics-listen 127.0.0.1:$port"
  # shellcheck disable=SC2086
  timeout 300 "$RUMOR_PEER" --insecure --rank $r --peers "$eps2" --data "$FASHION" \
    --train-limit 3000 --epochs 20 --batch 32 --progress 0 --metrics "$tmp/m$r.jsonl" \
    --checkpoint-dir "$tmp/ck$r" --checkpoint-every 50 $extra >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
set -- $pids
"$PY" - "$port" "$1" "$tmp" <<'PYEOF' || fail "the metrics endpoint (see above)"
import os, re, socket, sys, time, urllib.request, urllib.error
port, pid, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
url = "http://127.0.0.1:%d/metrics" % port
NAME = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
errors = []
def err(msg):
    errors.append(msg)
    print("test_prometheus:", msg, file=sys.stderr)

def parse(text):
    """Prometheus text format 0.0.4: returns {(name, labels): value}, {family: type}."""
    types, helps, samples, seen_family = {}, {}, {}, []
    for ln, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                raise ValueError("line %d: bad comment %r" % (ln, line))
            fam = parts[2]
            if line.startswith("# TYPE "):
                if fam in types:
                    raise ValueError("line %d: family %s typed twice" % (ln, fam))
                if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    raise ValueError("line %d: type %r" % (ln, parts[3]))
                types[fam] = parts[3]
                seen_family.append(fam)
            else:
                helps[fam] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (ln, line))
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        if name not in types:
            raise ValueError("line %d: sample %s before its TYPE" % (ln, name))
        if seen_family[-1] != name:
            raise ValueError("line %d: sample %s outside its family's block" % (ln, name))
        lab = tuple(sorted(LABEL.findall(labels)))
        if labels and ",".join('%s="%s"' % kv for kv in LABEL.findall(labels)) != labels:
            raise ValueError("line %d: bad labels %r" % (ln, labels))
        key = (name, lab)
        if key in samples:
            raise ValueError("line %d: %s%s twice" % (ln, name, labels))
        samples[key] = float(value)
    for fam in types:
        if fam not in helps:
            raise ValueError("family %s has no HELP" % fam)
    return samples, types

def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

pages, t0, bad_done = [], time.time(), False
while alive() and time.time() - t0 < 280:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            if r.status != 200 or "version=0.0.4" not in r.headers.get("Content-Type", ""):
                err("GET /metrics: %s %s" % (r.status, r.headers.get("Content-Type")))
            pages.append(r.read().decode())
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        pass
    if len(pages) == 5 and not bad_done:
        bad_done = True
        # a header line without its colon: 400
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost localhost\r\n\r\n")
        reply = s.recv(200).decode("latin-1")
        s.close()
        if not re.match(r"HTTP/1\.[01] 4\d\d", reply):
            err("a malformed request got %r, not a 4xx" % reply[:40])
        # bytes that are not HTTP at all: dropped, nothing else changes
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"\x00\x01\xffGARBAGE\r\n\r\n")
        s.settimeout(1)
        try:
            s.recv(200)
        except (socket.timeout, ConnectionError):
            pass
        s.close()
        for method, path, want in (("POST", "/metrics", 405), ("GET", "/nope", 404)):
            try:
                urllib.request.urlopen(urllib.request.Request(
                    "http://127.0.0.1:%d%s" % (port, path), data=b"x" if method == "POST" else None,
                    method=method), timeout=5)
                err("%s %s answered 200" % (method, path))
            except urllib.error.HTTPError as e:
                if e.code != want:
                    err("%s %s: %d, expected %d" % (method, path, e.code, want))
    time.sleep(0.2)
pages = [p for p in pages if "rumor_round{" in p]
if len(pages) < 5:
    err("only %d pages with rounds scraped" % len(pages))
    sys.exit(1)
prev, prev_round, last = None, -1, None
for i, text in enumerate(pages):
    try:
        samples, types = parse(text)
    except ValueError as e:
        err("page %d: %s" % (i, e))
        continue
    for fam, ty in types.items():
        if not fam.startswith("rumor_"):
            err("%s: not rumor_-prefixed" % fam)
        if (ty == "counter") != fam.endswith("_total"):
            err("%s: a %s %s _total" % (fam, ty, "without" if ty == "counter" else "with"))
        if re.search(r"_(ms|milliseconds|kb|mb|megabytes|minutes)(_|$)", fam):
            err("%s: not in base units" % fam)
    reasons = {dict(k[1]).get("reason") for k in samples if k[0] == "rumor_messages_rejected_total"}
    for r in ("bad_magic", "stale_round", "nonfinite", "bad_code"):
        if r not in reasons:
            err("page %d: no rejected-messages sample for reason %s" % (i, r))
    rnd = samples.get(("rumor_round", (("rank", "0"),)))
    if rnd is None or rnd < prev_round:
        err("page %d: round %s after %s" % (i, rnd, prev_round))
    prev_round = rnd if rnd is not None else prev_round
    if prev:
        for k, v in samples.items():
            if types.get(k[0]) == "counter" and k in prev and v < prev[k]:
                err("page %d: counter %s went down, %g -> %g" % (i, k, prev[k], v))
    prev, last = samples, samples
if prev_round < 100:
    err("the round reached only %s" % prev_round)
need = ["rumor_sent_bytes_total", "rumor_received_bytes_total", "rumor_wait_seconds_total",
        "rumor_consensus_distance", "rumor_examples_per_second", "rumor_loss",
        "rumor_neighbors_alive", "rumor_members", "rumor_checkpoint_age_seconds",
        "rumor_test_accuracy_ratio"]
for n in need:
    if not any(k[0] == n for k in last):
        err("no %s on the last page" % n)
print("test_prometheus: %d pages scraped, round %d, %d samples on the last" %
      (len(pages), prev_round, len(last)))
sys.exit(1 if errors else 0)
PYEOF
for p in $pids; do wait "$p" || fail "a peer failed: $(tail -n 3 "$tmp/p0.log")"; done
pids=
grep -q "done:" "$tmp/p0.log" || fail "peer 0 did not finish: $(tail -n 3 "$tmp/p0.log")"
run_expect 1 "expected ADDR:PORT" "$RUMOR_PEER" --insecure --rank 0 --peers "$eps2" \
  --data "$FASHION" --metrics-listen 9400
run_expect 1 "port '70000' is not in 1-65535" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps2" --data "$FASHION" --metrics-listen 127.0.0.1:70000
finish
