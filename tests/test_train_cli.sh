#!/bin/sh
# rumor-train's command line: help, bad flags and bad data give clear errors
# and the documented exit codes (0 ok, 1 runtime error, 2 usage), never a crash.
# Then what rumor-peer and examples/local-swarm.sh refuse before training:
# ports outside 1-65535, a config "file" that is a directory, a public key
# given for the secret one; and what they must take: Z85 keys with '#' in a
# peers file, a single .pub file as the allow-list.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion

train="$RUMOR_BUILDDIR/rumor-train"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$train" --help >"$tmp/help" 2>&1
expect_rc 0 $? "--help"
for opt in --data --rank --world --train-limit --shuffle-labels --model --device --threads \
           --epochs --batch --optimizer --lr --momentum --no-nesterov --weight-decay --beta1 \
           --beta2 --warmup-epochs --schedule --min-lr-ratio --seed --metrics --progress \
           --allow-vocab-mismatch --quiet --log-level --config --help --version "Exit status" "Example"; do
  grep -q -- "$opt" "$tmp/help" || fail "--help does not document $opt"
done

# usage errors: exit 2, message names the problem
run_expect 2 "expected an integer" "$train" --epochs 0
run_expect 2 "expected an integer" "$train" --batch 12x
run_expect 2 "expected a number" "$train" --lr nan
run_expect 2 "unknown option '--bogus'" "$train" --bogus
run_expect 2 "needs a value" "$train" --epochs
run_expect 2 "must be less than --world" "$train" --rank 2 --world 2

# ---- pipelines: the same run cut into 2 stages reaches the same accuracy
# (the gradient is the whole batch's either way, summed in another order:
# within 0.2 points); a trace; bad flags
one=$("$train" --data "$FASHION" --epochs 1 --train-limit 2000 -q 2>&1 | tail -1)
two=$("$train" --data "$FASHION" --epochs 1 --train-limit 2000 -q --stages 2 --schedule zb-h1 \
  --microbatches 4 --partition params --trace "$tmp/trace.json" 2>&1 | tail -1)
acc1=$(echo "$one" | sed -n 's/^test accuracy \([0-9.]*\)%.*/\1/p')
acc2=$(echo "$two" | sed -n 's/^test accuracy \([0-9.]*\)%.*/\1/p')
[ -n "$acc1" ] && [ -n "$acc2" ] || fail "2 stages: '$two', 1 stage: '$one'"
expect_num_close "${acc2:-0}" "${acc1:-99}" 0.2 "2 stages ('$two') against 1 ('$one')"
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" - "$tmp/trace.json" <<'PY' || fail "--trace: not a Chrome trace of every F, B and W"
import json, sys
ev = json.load(open(sys.argv[1]))
rows = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert sorted(rows) == [0, 1] and rows[1].startswith("device 1: cpu"), rows
x = [e for e in ev if e["ph"] == "X"]
acts = [e for e in x if e["cat"] in ("F", "B", "W")]
steps = {e["args"]["step"] for e in acts}
assert len(steps) == 16 and len(acts) == 16 * 2 * 4 * 3, len(acts)
assert len([e for e in x if e["cat"] == "optimizer"]) == 16
assert all(e["dur"] >= 0 and e["tid"] in (0, 1) for e in x)
# the times mean something: a micro-batch's F on stage 1 starts after its F
# on stage 0 ends, and every W after its B
at = {(e["cat"], e["args"]["stage"], e["args"]["micro"], e["args"]["step"]): e for e in acts}
for (k, s, m, t), e in at.items():
    if k == "F" and s == 1:
        f0 = at[("F", 0, m, t)]
        assert e["ts"] + 0.5 >= f0["ts"] + f0["dur"], (e, f0)
    if k == "W":
        b = at[("B", s, m, t)]
        assert e["ts"] + 0.5 >= b["ts"] + b["dur"], (e, b)
PY
# the trace drawn: one box a span of the steps asked for, and errors named
"$py" "$RUMOR_SRCDIR/examples/trace-svg" "$tmp/trace.json" "$tmp/trace.svg" --steps 3:5 \
  >"$tmp/svg.out" 2>&1 || fail "trace-svg: $(cat "$tmp/svg.out")"
"$py" - "$tmp/trace.svg" <<'PY' || fail "trace-svg: the picture does not hold the two steps' spans"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
boxes = [r for r in ET.parse(sys.argv[1]).getroot().iter(ns + "rect") if r.find(ns + "title") is not None]
# two steps: 2 x 4 micro-batches x 3 actions on 2 stages, and 2 updates
assert len(boxes) == 2 * 4 * 3 * 2 + 2, len(boxes)
PY
run_expect 2 "no spans in steps 90:91" "$py" "$RUMOR_SRCDIR/examples/trace-svg" "$tmp/trace.json" "$tmp/x.svg" --steps 90:91
run_expect 2 "$tmp/missing.json" "$py" "$RUMOR_SRCDIR/examples/trace-svg" "$tmp/missing.json" "$tmp/x.svg"
run_expect 0 "ms a step" "$train" --data "$FASHION" --epochs 1 --train-limit 600 --stages 2 \
  --partition profile --microbatches 4
run_expect 2 "the learning rate's schedule is --lr-schedule now" "$train" --schedule cosine
run_expect 2 "--stages 9 under 1f1b (1 chunk a device): 9 stages for a model of 4 blocks" "$train" --data "$FASHION" --stages 9
run_expect 2 "unknown; expected gpipe, 1f1b, interleaved[:V], zb-h1 or zbv" "$train" --data "$FASHION" --schedule 3f3b
run_expect 2 "expected an integer" "$train" --microbatches 0
run_expect 2 "must start at block 2" "$train" --data "$FASHION" --stages 2 --partition 0-1,3
run_expect 2 "the pipeline has 2 stages and the model 4 blocks" "$train" --data "$FASHION" --stages 2 --partition 0-2
run_expect 2 "(2 < 4)" "$train" --data "$FASHION" --stages 4 --microbatches 2

# ---- rumor-train schedule: the timeline, its picture and JSON; bad flags
run_expect 0 "bubble 27.3% (theory 27.3%), peak activations 4 3 2 1" \
  "$train" schedule --schedule 1f1b --stages 4 --microbatches 8 --svg "$tmp/s.svg"
grep -q '<svg' "$tmp/s.svg" && grep -q 'micro-batch 7' "$tmp/s.svg" || fail "schedule --svg: no picture"
run_expect 0 '"bubble":0.333333' "$train" schedule --schedule gpipe --stages 2 --microbatches 2 --json
# lists for given costs: zbv's follow them (its bubble at F, B, W = 1.6, 1.3,
# 0.8 falls from 7.9% with the unit-cost lists to 3.2%, as test_schedule
# finds); 1F1B at equal costs leaves its analysis' (P-1)/(M+P-1) = 1/5
run_expect 0 "at F, B, W = 1.6, 1.3, 0.8: bubble 3.2% (the unit-cost lists: 7.9%)" \
  "$train" schedule --schedule zbv --stages 2 --microbatches 16 --costs 1.6,1.3,0.8
run_expect 0 '"bubble_at_costs":0.200000,"unit_lists_bubble_at_costs":0.200000' \
  "$train" schedule --schedule 1f1b --stages 2 --microbatches 4 --costs 2,2,2 --json
run_expect 2 "--costs '1,2': expected three positive numbers F,B,W" "$train" schedule --costs 1,2
run_expect 2 "expected three positive numbers" "$train" schedule --costs 1,-1,1
run_expect 2 "unknown; expected gpipe, 1f1b, interleaved[:V], zb-h1 or zbv" "$train" schedule --schedule 2f2b
run_expect 2 "(2 < 4)" "$train" schedule --schedule zb-h1 --stages 4 --microbatches 2
run_expect 2 "must be a multiple of the stages (3)" "$train" schedule --schedule interleaved --stages 3 --microbatches 4
run_expect 2 "expected an integer" "$train" schedule --microbatches 0
run_expect 2 "--lr-schedule 'linear': expected one of cosine,constant" "$train" --lr-schedule linear
run_expect 2 "--optimizer 'adam': expected one of sgd,adamw" "$train" --optimizer adam
run_expect 2 "unexpected argument 'extra'" "$train" extra

# config files: keys are option names; flags override them; errors name file:line
printf '[train]\nepochs = 1\ntrain-limit = 3000\n\n# a comment\nlr = abc\n' >"$tmp/bad.ini"
run_expect 2 "$tmp/bad.ini:6: lr 'abc': expected a number" "$train" -c "$tmp/bad.ini"
printf 'epochs = 1\nepoch = 2\n' >"$tmp/typo.ini"
run_expect 2 "$tmp/typo.ini:2: unknown key 'epoch'" "$train" --config "$tmp/typo.ini"
printf 'epochs = 1\njust words\n' >"$tmp/junk.ini"
run_expect 2 "$tmp/junk.ini:2: not 'key = value'" "$train" -c "$tmp/junk.ini"
run_expect 2 "config file '$tmp/none.ini'" "$train" -c "$tmp/none.ini"
# a directory opens like a file but reads nothing: it must not run on defaults
mkdir "$tmp/conf.d"
run_expect 2 "config file '$tmp/conf.d': is a directory" "$train" -c "$tmp/conf.d" --epochs 1 \
  --train-limit 100
printf '[data]\ndata = %s\ntrain-limit = 2000\n[run]\nepochs = 5\nquiet = yes\nthreads = 1\n' "$FASHION" >"$tmp/good.ini"
out=$("$train" -c "$tmp/good.ini" --epochs 1 2>&1)
echo "$out" | grep -q "after 1 epoch in" || fail "config + --epochs 1 override: $out"
echo "$out" | grep -q "^rumor-train:" && fail "quiet = yes from the config file was not applied: $out"

# specs parsed later are checked up front: bad usage (tests/test_exit_status.sh has the rest)
run_expect 2 "model 'mlp:784-0-10'" "$train" --data "$FASHION" --model mlp:784-0-10 --train-limit 10
run_expect 2 "device 'gpu'" "$train" --data "$FASHION" --device gpu
run_expect 2 "--trace $tmp: is a directory" "$train" --data "$FASHION" --trace "$tmp"
# runtime errors: exit 1, message names the file or value
run_expect 1 "$tmp/none/train-images-idx3-ubyte.gz" "$train" --data "$tmp/none"
mkdir "$tmp/trunc"
cp "$FASHION"/*.gz "$tmp/trunc/"
head -c 100000 "$FASHION/train-images-idx3-ubyte.gz" >"$tmp/trunc/train-images-idx3-ubyte.gz"
run_expect 1 "train-images-idx3-ubyte.gz" "$train" --data "$tmp/trunc"
run_expect 1 "takes 100 inputs" "$train" --data "$FASHION" --model mlp:100-10 --train-limit 10
run_expect 2 "--metrics $tmp/no/such/dir.jsonl: there is no directory $tmp/no/such" "$train" \
  --data "$FASHION" --train-limit 10 --metrics "$tmp/no/such/dir.jsonl"
# A learning rate far too high: reported as divergence, not trained into NaN.
run_expect 1 "training diverged" "$train" --data "$FASHION" --lr 900 --momentum 0.99 --train-limit 5000

# ---- rumor-peer: refused before it trains (exit 2) or at the first step
# after the peer list and keys loaded (--topology bogus: exit 1, also what
# keeps a peer that wrongly takes its arguments from training).
peer="$RUMOR_BUILDDIR/rumor-peer"
P2=tcp://127.0.0.1:7000,tcp://127.0.0.1:7001
run_expect 2 "config file '$tmp/conf.d': is a directory" "$peer" -c "$tmp/conf.d" --rank 0 \
  --peers $P2 --insecure --topology bogus
# ZeroMQ keeps the low 16 bits of a port (99999 would listen on 34463) and
# takes 0 for any free port, which the other peers could not know.
run_expect 2 "peer 1: endpoint 'tcp://127.0.0.1:99999': port 99999 is outside 1-65535" \
  "$peer" --rank 0 --peers tcp://127.0.0.1:7000,tcp://127.0.0.1:99999 --insecure --topology bogus
run_expect 2 "peer 1: endpoint 'tcp://127.0.0.1:0': port 0 is outside 1-65535" \
  "$peer" --rank 0 --peers tcp://127.0.0.1:7000,tcp://127.0.0.1:0 --insecure --topology bogus
run_expect 2 "--listen: endpoint 'tcp://127.0.0.1:99999': port 99999 is outside 1-65535" \
  "$peer" --rank 0 --peers $P2 --listen tcp://127.0.0.1:99999 --insecure --topology bogus
run_expect 2 "--listen: endpoint 'tcp://0.0.0.0:0': port 0 is outside 1-65535" \
  "$peer" --rank 0 --peers $P2 --listen tcp://0.0.0.0:0 --insecure --topology bogus
printf 'tcp://127.0.0.1:7000\n# b\ntcp://127.0.0.1:65536\n' >"$tmp/peers-port.txt"
run_expect 2 "$tmp/peers-port.txt:3: peer 1: endpoint 'tcp://127.0.0.1:65536': port 65536 is outside 1-65535" \
  "$peer" --rank 0 --peers-file "$tmp/peers-port.txt" --insecure --topology bogus

# Keys whose Z85 text has a '#' (about 38% do) in a peers file's second
# column: the key is whole, the comment after it ignored.
mkdir "$tmp/keys"
hash_key() { # hash_key PREFIX: a keypair whose public key has a '#'
  for _try in $(seq 100); do
    rm -f "$1.key" "$1.pub"
    "$peer" keygen "$1" | grep -q '#' && return 0
  done
  fail "no public key with '#' in 100 keypairs"
}
hash_key "$tmp/keys/peer-0"
hash_key "$tmp/keys/peer-1"
pub() { sed -n 's/^public-key = "\(.*\)"$/\1/p' "$1"; }
printf 'tcp://127.0.0.1:7000 %s # peer 0\ntcp://127.0.0.1:7001\t%s\n' \
  "$(pub "$tmp/keys/peer-0.pub")" "$(pub "$tmp/keys/peer-1.pub")" >"$tmp/peers-keys.txt"
run_expect 1 "unknown family 'bogus'" "$peer" --rank 0 --peers-file "$tmp/peers-keys.txt" \
  --keys "$tmp/keys/peer-0.key" --allow "$tmp/keys" --topology bogus
# A public key given for the secret one: say so, not "chmod 600" it.
run_expect 1 "peer-0.pub is a public key (no secret-key line); the secret key is $tmp/keys/peer-0.key" \
  "$peer" --rank 0 --peers $P2 --keys "$tmp/keys/peer-0.pub" --allow "$tmp/keys"
echo "$out" | grep -q chmod && fail "--keys PREFIX.pub advises chmod: $out"
# One .pub file (what keygen writes) is an allow-list of one key, named by
# the file: peer-0, so it is also rank 0's key.
run_expect 1 "unknown family 'bogus'" "$peer" --rank 0 --peers tcp://127.0.0.1:7000 \
  --keys "$tmp/keys/peer-0.key" --allow "$tmp/keys/peer-0.pub" --topology bogus
# --help finishes every sentence: --connections with --io-threads
"$peer" --help >"$tmp/peer-help" 2>&1
grep -A1 -- '--connections N' "$tmp/peer-help" | tail -n 1 | grep -q -- '--io-threads N as well' ||
  fail "--help: the --connections sentence is cut: $(grep -A1 -- '--connections N' "$tmp/peer-help")"

# ---- examples/local-swarm.sh: its own options, then -- and rumor-peer's
# (-t bogus: a swarm that wrongly starts fails at once)
swarm="$RUMOR_SRCDIR/examples/local-swarm.sh"
export RUMOR_PEER="$peer"
run_expect 2 "unknown option '-x'" sh "$swarm" -x -n 2 -t bogus
run_expect 2 "unexpected argument 'extra'" sh "$swarm" -n 2 extra -t bogus
run_expect 2 "must lie in 1-65535" sh "$swarm" -n 2 -p 80000 -t bogus
run_expect 2 "must lie in 1-65535" sh "$swarm" -n 8 -p 65530 -t bogus
# a peer's error is shown whole in the table, not its last 120 characters
run_expect 1 "failed: topology: spec 'bogus:2': unknown family 'bogus' (expected ring:N," \
  sh "$swarm" -n 2 -t bogus -q -d "$tmp/swarm"

finish
