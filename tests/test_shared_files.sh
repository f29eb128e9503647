#!/bin/sh
# Peers that share one --checkpoint-dir and one --metrics file:
#  - checkpoint files name their swarm (made safe for the file system) and
#    rank, and so does their metadata: two ranks in one directory keep their
#    own files, --keep-checkpoints counting each rank's own;
#  - a restarted rank resumes from its own newest checkpoint and says which
#    (one line on stderr with the path and the round); one whose newest is
#    at the run's end says there is nothing left to train and exits 1;
#  - a checkpoint of rank 1 renamed to rank 0's name (a higher round) is
#    refused with a warning naming the file, and rank 0's own is used;
#  - the shared metrics file holds whole lines only, appended (a restart
#    does not truncate it): every line is one JSON object, no key twice,
#    carrying the rank and swarm of the peer that wrote it, and no event is
#    lost although three processes append at once (one event per round).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v ss >/dev/null || skip "ss (iproute2) not found"
command -v python3 >/dev/null || skip "python3 not found (JSON and safetensors checks)"
peer="$RUMOR_BUILDDIR/rumor-peer"
swarm_setup

swarm="lab/a b" # a '/' and a space: the file name must not take them as they are
ck="$tmp/ckpt"
m="$tmp/metrics.jsonl"
eps=$(free_endpoints 3)
# 1920 examples a shard, batch 64: 30 rounds an epoch, 60 in all
run_peer() { # RANK [OPTION]...
  _r=$1; shift
  "$peer" --insecure --rank "$_r" --peers "$eps" --swarm "$swarm" --data "$FASHION" \
    --train-limit 1920 --epochs 2 --no-average --checkpoint-dir "$ck" --checkpoint-every 4 \
    --keep-checkpoints 2 --metrics "$m" "$@"
}

# The file name prefix of this swarm's checkpoints, by the rule checkpoint.h
# states: [A-Za-z0-9._-] kept, anything else (and a leading '.') '_', at most
# 48 characters, then, if anything changed, '+' and 8 hex digits of the
# name's BLAKE2b-256.
pre=$(python3 - "$swarm" <<'EOF'
import hashlib, re, sys
s = sys.argv[1]
t = re.sub(r"[^A-Za-z0-9._-]", "_", s)
t = ("_" + t[1:] if t.startswith(".") else t)[:48]
if t != s:
    t += "+" + hashlib.blake2b(s.encode(), digest_size=32).hexdigest()[:8]
print(t)
EOF
)
echo "shared: checkpoints of swarm '$swarm' are named $pre-rR-ROUND.safetensors"

# ---- 1. three ranks at once, one directory, one metrics file
pids=
for r in 0 1 2; do
  run_peer $r --round-timeout 2 --progress 0 >"$tmp/p$r.log" 2>&1 &
  pids="$pids $!"
done
for p in $pids; do
  wait "$p"
  expect_rc 0 $? "peer (pid $p)"
done
pids=
for r in 0 1 2; do
  grep -q "^peer $r: done" "$tmp/p$r.log" || fail "peer $r did not finish: $(tail -3 "$tmp/p$r.log")"
done
echo "shared: directory after the run: $(ls -A "$ck" | tr '\n' ' ')"

# every rank keeps its own 2 newest (56 and 60); nothing else is left
for r in 0 1 2; do
  got=$(ls -A "$ck" | grep -c -- "^$pre-r$r-[0-9]\{12\}\.safetensors\$")
  [ "$got" -eq 2 ] || fail "rank $r has $got checkpoints in the shared directory, expected 2"
  [ -f "$ck/$pre-r$r-000000000060.safetensors" ] || fail "rank $r has no checkpoint of round 60"
done
others=$(ls -A "$ck" | grep -v -- "^$pre-r[012]-[0-9]\{12\}\.safetensors\$")
[ -z "$others" ] || fail "other files in the checkpoint directory: $others"

# the metadata of each file names the rank, swarm and round its name says
python3 - "$ck" "$swarm" <<'EOF' || fail "checkpoint metadata does not match the file names"
import glob, json, os, re, struct, sys
bad = n = 0
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.safetensors"))):
    raw = open(p, "rb").read()
    (hl,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + hl])["__metadata__"]
    mt = re.search(r"-r(\d+)-(\d{12})\.safetensors$", p)
    n += 1
    if not mt or meta["rank"] != mt.group(1) or int(meta["round"]) != int(mt.group(2)) \
            or meta["swarm"] != sys.argv[2]:
        bad += 1
        print("%s: metadata rank %s round %s swarm %r" % (p, meta["rank"], meta["round"], meta["swarm"]))
print("shared: %d checkpoints, %d with metadata that disagrees with the name" % (n, bad))
sys.exit(1 if bad or not n else 0)
EOF

# ---- 2. rank 0 restarted alone finds its own newest checkpoint, and says
# which: at the run's last round, there is nothing left to train (exit 1)
lines_before=$(wc -l <"$m")
run_peer 0 --round-timeout 0.2 --start-timeout 0.5 >"$tmp/r0.out" 2>"$tmp/r0.err"
expect_rc 1 $? "restarted rank 0, its run done" "$tmp/r0.err"
expect_count "$tmp/r0.err" "$ck/$pre-r0-000000000060.safetensors is at round 60, at this run's last round 60: nothing left to train" 1
grep -q "nothing left" "$tmp/r0.out" && fail "the resume line went to standard output"
# asked for one more epoch, it resumes there (a copy: the run keeps 2)
mkdir "$tmp/ck2" && cp "$ck/$pre-r0-000000000060.safetensors" "$tmp/ck2/"
run_peer 0 --round-timeout 0.2 --start-timeout 0.5 --epochs 3 --allow-alone --progress 0 \
  --checkpoint-dir "$tmp/ck2" >"$tmp/r0m.out" 2>"$tmp/r0m.err"
expect_rc 0 $? "restarted rank 0 with one more epoch" "$tmp/r0m.err"
expect_count "$tmp/r0m.err" "resumed from $tmp/ck2/$pre-r0-000000000060.safetensors at round 60" 1
grep -q "resumed from" "$tmp/r0m.out" && fail "the resume line went to standard output"

# ---- 3. rank 1's newest renamed to rank 0's name, one round later: refused
cp "$ck/$pre-r1-000000000060.safetensors" "$ck/$pre-r0-000000000061.safetensors"
run_peer 0 --round-timeout 0.2 --start-timeout 0.5 >"$tmp/r0b.out" 2>"$tmp/r0b.err"
expect_rc 1 $? "rank 0 beside rank 1's renamed checkpoint" "$tmp/r0b.err"
grep -q "$pre-r0-000000000061.safetensors.*rank 1" "$tmp/r0b.err" ||
  fail "rank 1's checkpoint under rank 0's name was not refused by name: $(head -3 "$tmp/r0b.err")"
expect_count "$tmp/r0b.err" "$ck/$pre-r0-000000000060.safetensors is at round 60, at this run's last round 60" 1
sed -n '/000000000061/p; /resumed from/p' "$tmp/r0b.err"
for r in 1 2; do
  [ -f "$ck/$pre-r$r-000000000060.safetensors" ] || fail "rank $r's checkpoint went missing"
done

# ---- 4. the shared metrics file: whole lines, unique keys, rank in each
[ "$(wc -l <"$m")" -gt "$lines_before" ] || fail "the restart wrote no metrics"
python3 - "$m" "$swarm" <<'EOF' || fail "the shared metrics file is broken"
import collections, json, sys
def unique(pairs):
    keys = [k for k, _ in pairs]
    dup = sorted(set(k for k in keys if keys.count(k) > 1))
    if dup:
        raise ValueError("duplicate keys %s" % dup)
    return dict(pairs)
raw = open(sys.argv[1], "rb").read()
bad, n, count = 0, 0, collections.Counter()
if not raw.endswith(b"\n"):
    bad += 1
    print("the file does not end with a newline")
for i, line in enumerate(raw.split(b"\n")[:-1], 1):
    n += 1
    try:
        o = json.loads(line, object_pairs_hook=unique)
        assert isinstance(o, dict), "not an object"
        for k in ("time", "mono", "rank", "swarm", "event"):
            assert k in o, "no %s" % k
        assert o["swarm"] == sys.argv[2], "swarm %r" % o["swarm"]
        assert o["rank"] in (0, 1, 2), "rank %r" % o["rank"]
        count[(o["rank"], o["event"])] += 1
        if o["event"] == "done":
            count[(o["rank"], "rounds_run")] += o["rounds_run"]
    except Exception as e:
        bad += 1
        if bad <= 5:
            print("line %d: %s: %r" % (i, e, line[:160]))
# rank 0 ran twice (the run, then a restart for a third epoch; the restarts
# with no round left stop before they start); with --progress 0 a peer
# writes one round event for each round it runs
for r, runs in ((0, 2), (1, 1), (2, 1)):
    got = (count[(r, "start")], count[(r, "done")], count[(r, "round")])
    if got != (runs, runs, count[(r, "rounds_run")]) or not 1 <= count[(r, "epoch")] <= runs + 1 \
            or count[(r, "round")] < 30:
        bad += 1
        print("rank %d: %d start, %d done, %d round events (%d rounds run), %d epoch events; "
              "expected %d runs" % (r, got[0], got[1], got[2], count[(r, "rounds_run")],
                                    count[(r, "epoch")], runs))
print("shared: %d metrics lines, %d problems" % (n, bad))
sys.exit(1 if bad else 0)
EOF
finish
