#!/bin/sh
# rumor-peer --metrics-listen: two peers train the MLP; peer 0 serves
# Prometheus metrics, scraped every 0.2 s from its start to its end.
#
# The start: peer 0's training images come through a FIFO, so that it
# stays in its data load until the test writes them. The server answers
# already then, with every family (initial values) and
# rumor_peer_phase{phase="starting"} 1; then "waiting" until peer 1 comes.
# 63 idle connections do not lock a scrape out, and are closed after the
# idle timeout. A port in use is refused with rumor's own message (none
# from libmicrohttpd), before the data loads.
#
# The run: every page parses with a text-format parser written here (HELP
# and TYPE before each family, samples name{labels} value, no family
# twice) and has the same families as the first; names follow
# Prometheus's conventions (rumor_ prefix, counters end in _total, base
# units); counters never decrease from one scrape to the next; the round
# goes up; the phase never goes back (starting, waiting, training, then
# leaving or done); rejected messages carry every reason as a label; the
# last page has the bytes, waiting, consensus, membership, checkpoint age
# and test accuracy. A malformed request gets a 400, bytes that are not
# HTTP are dropped, a POST gets a 405, another path a 404, and the peer
# keeps training and ends normally.
#
# Bad --metrics-listen values exit 2 with the reason, before the data
# loads (the --data given does not exist).
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

# ---- bad values: bad usage, found before the data loads (there is none)
nodata="$tmp/no-such-data"
for bad in "9400|expected ADDR:PORT" "127.0.0.1:70000|port '70000' is not in 1-65535" \
  "127.0.0.1:0|port '0' is not in 1-65535" "127.0.0.1:|port '' is not in 1-65535" \
  "127.0.0.1:94x0|port '94x0'" "nosuch.invalid:9400|'nosuch.invalid' is neither" \
  "300.1.2.3:9400|'300.1.2.3' is not an IPv4 address" "192.0.2.1:$port|192.0.2.1 is not an address of this machine"; do
  run_expect 2 "--metrics-listen '${bad%%|*}': ${bad#*|}" "$RUMOR_PEER" --insecure --rank 0 \
    --peers "$eps2" --data "$nodata" --metrics-listen "${bad%%|*}"
done

# ---- the start: a FIFO for the training images holds peer 0 in its data load
PYLIB="$tmp/promlib.py"
cat >"$PYLIB" <<'PYEOF'
import os, re, socket, sys, time, urllib.request, urllib.error
NAME = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
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

PHASES = ["starting", "waiting", "training", "leaving", "done"]
ORDER = {"starting": 0, "waiting": 1, "training": 2, "leaving": 3, "done": 3}
FAMILIES = ["rumor_peer_phase", "rumor_round", "rumor_rounds", "rumor_rounds_run_total",
            "rumor_rounds_mixed_total", "rumor_loss", "rumor_examples_per_second",
            "rumor_training_seconds_total", "rumor_wait_seconds_total", "rumor_wait_ratio",
            "rumor_consensus_distance", "rumor_sent_bytes_total", "rumor_received_bytes_total",
            "rumor_neighbors", "rumor_neighbors_alive", "rumor_members",
            "rumor_consensus_skipped_total", "rumor_jumps_total", "rumor_state_fetches_total",
            "rumor_messages_accepted_total", "rumor_messages_rejected_total",
            "rumor_checkpoint_age_seconds", "rumor_checkpoint_timestamp_seconds",
            "rumor_test_accuracy_ratio", "rumor_eval_loss"]
errors = []
def err(msg):
    errors.append(msg)
    print("test_prometheus:", msg, file=sys.stderr)

def phase_of(samples):
    """rumor_peer_phase as a state set: every phase once, 1 for one, 0 for the rest."""
    ph = {dict(k[1]).get("phase"): v for k, v in samples.items() if k[0] == "rumor_peer_phase"}
    if sorted(ph) != sorted(PHASES) or sorted(ph.values()) != [0.0] * (len(PHASES) - 1) + [1.0]:
        raise ValueError("rumor_peer_phase is not a state set of %s: %s" % (PHASES, ph))
    return [p for p, v in ph.items() if v == 1][0]

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

def fetch(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        if r.status != 200 or "version=0.0.4" not in r.headers.get("Content-Type", ""):
            err("GET /metrics: %s %s" % (r.status, r.headers.get("Content-Type")))
        return r.read().decode()
PYEOF
data0="$tmp/data0"
mkdir -p "$data0"
for f in "$FASHION"/*; do ln -s "$f" "$data0/"; done
rm "$data0/train-images-idx3-ubyte.gz"
mkfifo "$data0/train-images-idx3-ubyte.gz" || skip "cannot make a FIFO in $tmp"
peer() { # peer R DATA [OPTION]...: rank R in the background, its log in $tmp/pR.log
  _r=$1 _d=$2
  shift 2
  timeout 300 "$RUMOR_PEER" --insecure --rank "$_r" --peers "$eps2" --data "$_d" \
    --train-limit 3000 --epochs 20 --batch 32 --progress 0 --metrics "$tmp/m$_r.jsonl" \
    --checkpoint-dir "$tmp/ck$_r" --checkpoint-every 50 "$@" >"$tmp/p$_r.log" 2>&1 &
  pids="$pids $!"
}
peer 0 "$data0" --metrics-listen "127.0.0.1:$port"
pid0=${pids# }
"$PY" - "$port" "$pid0" "$tmp" "$data0/train-images-idx3-ubyte.gz" \
  "$FASHION/train-images-idx3-ubyte.gz" <<'PYEOF'
import select, socket, sys, time
sys.path.insert(0, sys.argv[3])
from promlib import *
port, pid, tmp, fifo, real = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
url = "http://127.0.0.1:%d/metrics" % port

def check_page(text, want_phase):
    samples, types = parse(text)
    ph = phase_of(samples)
    if ph != want_phase:
        err("phase %s, expected %s" % (ph, want_phase))
    missing = [f for f in FAMILIES if f not in types]
    if missing:
        err("in phase %s, no %s" % (ph, " ".join(missing)))
    return samples, types

# the data is not loaded (the FIFO has no writer): the server answers already
t0, first = time.time(), None
while first is None and alive(pid) and time.time() - t0 < 30:
    try:
        first = fetch(url, 2)
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        time.sleep(0.1)
if first is None:
    err("no answer on --metrics-listen in 30 s while the data loads")
    sys.exit(1)
try:
    samples, types = check_page(first, "starting")
except ValueError as e:
    err("the first page: %s" % e)
    sys.exit(1)
open(tmp + "/families0", "w").write(" ".join(sorted(types)))

# 63 idle connections: all held open, and a scrape still answers at once
socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(63)]
time.sleep(0.5)
closed = select.select(socks, [], [], 0)[0]
if closed:
    err("%d of 63 idle connections were closed at once (a connection limit?)" % len(closed))
t = time.time()
try:
    fetch(url, 5)
    if time.time() - t > 2:
        err("with 63 idle connections open, a scrape took %.1f s" % (time.time() - t))
except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
    err("with 63 idle connections open, a scrape failed: %s" % e)
# ... and closed after the idle timeout (5 s)
left = set(socks)
while left and time.time() - t < 15:
    for s in select.select(list(left), [], [], 0.5)[0]:
        try:
            gone = not s.recv(1)
        except (ConnectionError, socket.timeout):
            gone = True
        if gone:
            left.discard(s)
            s.close()
if left:
    err("%d of 63 idle connections still open after %.0f s" % (len(left), time.time() - t))
    for s in left:
        s.close()

# the data comes: then the peer waits for peer 1, not started yet
fd, t = None, time.time()
while fd is None and alive(pid) and time.time() - t < 30:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: the peer has not opened it yet
        time.sleep(0.1)
if fd is None:
    err("peer 0 never opened its training images")
    sys.exit(1)
os.set_blocking(fd, True)
with open(real, "rb") as f:
    data = memoryview(f.read())
while data:
    data = data[os.write(fd, data):]
os.close(fd)
ph, t = "starting", time.time()
while ph != "waiting" and alive(pid) and time.time() - t < 30:
    try:
        samples, types = parse(fetch(url, 2))
        new = phase_of(samples)
        if ORDER[new] < ORDER[ph]:
            err("phase %s after %s" % (new, ph))
        ph = new
    except (urllib.error.URLError, ConnectionError, socket.timeout, ValueError) as e:
        err("while loading: %s" % e)
        break
    time.sleep(0.05)
if ph != "waiting":
    err("peer 0 did not wait for peer 1: phase %s" % ph)
else:
    check_page(fetch(url, 2), "waiting")
print("test_prometheus: the start: starting, then waiting, %d families" % len(types))
sys.exit(1 if errors else 0)
PYEOF
if [ $? -ne 0 ]; then
  fail "the start (see above)"
  kill "$pid0" # TERM, which timeout passes on (swarm_cleanup's KILL would not)
  finish
fi

# ---- a port in use: a runtime error, rumor's own message, before the data loads
run_expect 1 "--metrics-listen '127.0.0.1:$port': cannot listen there (another process listens there)" \
  "$RUMOR_PEER" --insecure --rank 1 --peers "$eps2" --data "$nodata" \
  --metrics-listen "127.0.0.1:$port"
case $out in *"Failed to bind"*) fail "libmicrohttpd's own message: $out" ;; esac

# ---- the run
peer 1 "$FASHION"
"$PY" - "$port" "$pid0" "$tmp" <<'PYEOF' || fail "the metrics endpoint (see above)"
import math, socket, sys, time
sys.path.insert(0, sys.argv[3])
from promlib import *
port, pid, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
url = "http://127.0.0.1:%d/metrics" % port
families0 = open(tmp + "/families0").read().split()
pages, t0, bad_done = [], time.time(), False
while alive(pid) and time.time() - t0 < 280:
    try:
        pages.append(fetch(url, 5))
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
if len(pages) < 5:
    err("only %d pages scraped" % len(pages))
    sys.exit(1)
prev, prev_round, last, phase, training = None, -1, None, "waiting", 0
for i, text in enumerate(pages):
    try:
        samples, types = parse(text)
        ph = phase_of(samples)
    except ValueError as e:
        err("page %d: %s" % (i, e))
        continue
    if sorted(types) != families0:
        err("page %d (%s): families %s, not the first page's" %
            (i, ph, " ".join(sorted(set(types) ^ set(families0)))))
    if ORDER[ph] < ORDER[phase]:
        err("page %d: phase %s after %s" % (i, ph, phase))
    phase = ph
    training += ph == "training"
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
if training < 5:
    err("only %d pages in phase training" % training)
if prev_round < 100:
    err("the round reached only %s" % prev_round)
need = ["rumor_sent_bytes_total", "rumor_received_bytes_total", "rumor_wait_seconds_total",
        "rumor_consensus_distance", "rumor_examples_per_second", "rumor_loss",
        "rumor_neighbors_alive", "rumor_members", "rumor_checkpoint_age_seconds",
        "rumor_test_accuracy_ratio", "rumor_eval_loss"]
for n in need:
    if not any(k[0] == n and not math.isnan(v) for k, v in last.items()):
        err("no value of %s on the last page" % n)
print("test_prometheus: %d pages scraped, round %d, last phase %s, %d samples on the last" %
      (len(pages), prev_round, phase, len(last)))
sys.exit(1 if errors else 0)
PYEOF
for p in $pids; do wait "$p" || fail "a peer failed: $(tail -n 3 "$tmp/p0.log")"; done
pids=
grep -q "done:" "$tmp/p0.log" || fail "peer 0 did not finish: $(tail -n 3 "$tmp/p0.log")"
finish
