#!/bin/sh
# One exit-status rule for every rumor binary (their --help says it):
#   0  success;
#   1  a runtime error: anything found while reading inputs or running (a
#      missing or corrupt input file, a checkpoint that is not safetensors or
#      fails its digest, the network, nothing left to do);
#   2  bad usage: anything the command line or config file decides before
#      work begins (an unknown option, a value or spec that does not parse or
#      is out of range, options that do not go together, an output location
#      that cannot be used).
# Every case is one line, `case_ STATUS TEXT COMMAND...`: the command exits
# STATUS and its output holds TEXT. Add a binary's cases to its section.
# Bad-usage cases of rumor-train name data that does not exist: the
# refusal must come before any data is read.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
: "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
train="$RUMOR_BUILDDIR/rumor-train"
peer="$RUMOR_BUILDDIR/rumor-peer"
topo="$RUMOR_BUILDDIR/rumor-topo"
sim="$RUMOR_BUILDDIR/rumor-sim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case_() { run_expect "$@"; }

# ---- fixtures: text, a GPT's checkpoints at steps 2 and 4 (sgd), a corrupt
# copy, a file that is not safetensors, a GPT of vocab 300
seq 1 30000 >"$tmp/text.txt"
gpt=gpt:layers=1,dim=16,heads=2,ctx=16
tiny="--model $gpt --data text:$tmp/text.txt --batch 4 --eval-every 2 --eval-batches 1 -q"
"$train" $tiny --steps 4 --checkpoint-dir "$tmp/ck" >"$tmp/fixture.log" 2>&1 ||
  { fail "training the fixture: $(tail -3 "$tmp/fixture.log")"; finish; }
ck="$tmp/ck/train-r0-000000000004.safetensors"
ck2="$tmp/ck/train-r0-000000000002.safetensors"
[ -f "$ck" ] && [ -f "$ck2" ] || { fail "no checkpoints in $tmp/ck: $(ls "$tmp/ck")"; finish; }
cp "$ck" "$tmp/corrupt.safetensors"
size=$(wc -c <"$ck")
printf 'XXXXXXXX' | dd of="$tmp/corrupt.safetensors" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
echo "not a checkpoint, just words in a text file" >"$tmp/words.txt"
touch "$tmp/afile"
printf '0 1\n1 x\n' >"$tmp/bad.edges"
none="$tmp/none" # data that does not exist

# ---- --help promises the rule
for b in "$train" "$peer"; do
  "$b" --help 2>&1 | grep -q "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage." ||
    fail "$b --help does not state the exit-status rule"
done
for sub in sample eval export; do
  "$train" $sub --help 2>&1 | grep -q "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage." ||
    fail "rumor-train $sub --help does not state the exit-status rule"
done
"$topo" --help 2>&1 | grep -q "2 bad usage" || fail "rumor-topo --help does not state the rule"

# ---- rumor-train: bad usage, before the (missing) data is read
case_ 2 "unknown option '--bogus'" "$train" --bogus
case_ 2 "expected an integer" "$train" --epochs 0
case_ 2 "must be less than --world" "$train" --rank 2 --world 2
case_ 2 "model 'bogus': unknown kind" "$train" --data "$none" --model bogus
case_ 2 "model 'mlp:784-0-10'" "$train" --data "$none" --model mlp:784-0-10
case_ 2 "is a language model; --data $none holds images" "$train" --data "$none" --model $gpt
case_ 2 "is not a language model" "$train" --data "text:$none" --model mlp:784-10
case_ 2 "device 'gpu'" "$train" --data "$none" --device gpu
case_ 2 "--precision bf16: the CPU computes in fp32" "$train" --data "$none" --precision bf16
# --devices and --stages that disagree, and empty entries, name both counts
case_ 2 "--stages 3 and --devices 'cpu:1,cpu:1' (2 devices) disagree" \
  "$train" --data "$none" --stages 3 --devices cpu:1,cpu:1
case_ 2 "--stages 2 and --devices 'cpu:1,cpu:1,cpu:1' (3 devices) disagree" \
  "$train" --data "$none" --stages 2 --devices cpu:1,cpu:1,cpu:1
case_ 2 "--devices 'cpu:1,,cpu:1': entry 2 is empty (3 entries, 2 devices)" \
  "$train" --data "$none" --devices cpu:1,,cpu:1
case_ 2 "--devices 'cpu:1,': entry 2 is empty (2 entries, 1 device)" "$train" --data "$none" --devices cpu:1,
case_ 2 "device 'cpu:lots'" "$train" --data "$none" --devices cpu:1,cpu:lots
case_ 2 "9 stages for a model of 4 blocks" "$train" --data "$none" --stages 9
case_ 2 "(2 < 4)" "$train" --data "$none" --stages 4 --microbatches 2
case_ 2 "must start at block 2" "$train" --data "$none" --stages 2 --partition 0-1,3
case_ 2 "the pipeline has 2 stages and the model 4 blocks" "$train" --data "$none" --stages 2 --partition 0-2
case_ 2 "expected uniform, params or block ranges" "$train" --data "$none" --stages 2 --partition halves
# a GPT's vocabulary against text's 256
case_ 2 "vocab=50257 is not the data's vocabulary (256: --data text:$none is bytes)" \
  "$train" --data "text:$none" --model $gpt,vocab=50257
case_ 2 "give --allow-vocab-mismatch" "$train" --data "text:$none" --model $gpt,vocab=300
case_ 2 "vocab=100 is smaller than the data's vocabulary" \
  "$train" --data "text:$none" --model $gpt,vocab=100 --allow-vocab-mismatch
# where checkpoints go: checked at start, not at the first checkpoint
case_ 2 "--checkpoint-dir: '$tmp/afile': '$tmp/afile' is a file, not a directory" "$train" $tiny --steps 4 --checkpoint-dir "$tmp/afile"
case_ 2 "'$tmp/afile/sub': '$tmp/afile' is a file, not a directory" "$train" $tiny --steps 4 --checkpoint-dir "$tmp/afile/sub"
case_ 2 "'$tmp/afile/a/b': '$tmp/afile' is a file" "$train" --data "$none" --checkpoint-dir "$tmp/afile/a/b"
case_ 2 "--metrics $none/m.jsonl: there is no directory $none" "$train" --data "$none" --metrics "$none/m.jsonl"
case_ 2 "--trace $tmp: is a directory" "$train" --data "$none" --trace "$tmp"

# ---- rumor-train: runtime errors
case_ 1 "$none/train-images-idx3-ubyte.gz" "$train" --data "$none"
case_ 1 "$none" "$train" --data "text:$none" --model $gpt
case_ 1 "$none.safetensors: cannot open" "$train" $tiny --steps 4 --resume "$none.safetensors"
case_ 1 "words.txt: not a safetensors file" "$train" $tiny --steps 4 --resume "$tmp/words.txt"
case_ 1 "digest mismatch" "$train" $tiny --steps 4 --resume "$tmp/corrupt.safetensors"
# token shards do not record their vocabulary: a token outside the model's
# is an error of the data, named
if command -v python3 >/dev/null; then
  python3 -c 'import struct, sys; t = [i % 200 for i in range(400)]; t[123] = 300
sys.stdout.buffer.write(struct.pack("<256i", 20240520, 1, len(t), *[0] * 253) + struct.pack("<%dH" % len(t), *t))' \
    >"$tmp/tokens.bin"
  case_ 1 "tokens.bin: token 300 at index 123 is outside the vocabulary of 256" \
    "$train" --data "tokens:$tmp/tokens.bin" --model $gpt,vocab=256 --steps 1
fi
# resumed at or past the end: nothing to train is not a success
case_ 1 "is at step 4, already at this run's last step 4 (--steps 4): nothing to train" \
  "$train" $tiny --steps 4 --resume "$ck"
case_ 1 "is at step 4, already past this run's last step 3 (--steps 3)" \
  "$train" $tiny --steps 3 --resume "$ck"
case_ 0 "after 6 steps" "$train" $tiny --steps 6 --resume "$ck"
# another optimizer's state: the hint names an option that exists
case_ 1 "holds sgd state, the optimizer is adamw: give --optimizer sgd" \
  "$train" $tiny --steps 6 --optimizer adamw --resume "$ck"
"$train" --help | grep -q -- "--optimizer NAME *sgd or adamw" || fail "the hint's --optimizer sgd is not in --help"
case_ 0 "after 6 steps" "$train" $tiny --steps 6 --optimizer sgd --resume "$ck"
# a larger vocabulary when asked for
case_ 0 "validation loss" "$train" $tiny --model $gpt,vocab=300 --steps 2 --allow-vocab-mismatch \
  --checkpoint-dir "$tmp/ck300"
ck300="$tmp/ck300/train-r0-000000000002.safetensors"

# ---- rumor-train sample, eval, export, schedule, devices
case_ 2 "expected a checkpoint file first" "$train" sample
case_ 2 "unknown option '--bogus'" "$train" sample "$ck" --bogus
case_ 2 "--temperature 0.001: expected 0 (greedy) or 0.01 to 10" "$train" sample "$ck" --temperature 0.001
case_ 2 "expected a number in [0, 10]" "$train" sample "$ck" --temperature 11
case_ 1 "$none.safetensors: cannot open" "$train" sample "$none.safetensors"
case_ 1 "words.txt: not a safetensors file" "$train" sample "$tmp/words.txt"
case_ 1 "digest mismatch" "$train" sample "$tmp/corrupt.safetensors"
case_ 0 "" "$train" sample "$ck" --temperature 0 --tokens 5
case_ 2 "expected an integer" "$train" eval "$ck" --batch 0
case_ 2 "unknown option '--bogus'" "$train" eval "$ck" --bogus
case_ 1 "$none.safetensors: cannot open" "$train" eval "$none.safetensors" --data "text:$tmp/text.txt"
case_ 1 "words.txt: not a safetensors file" "$train" eval "$tmp/words.txt" --data "text:$tmp/text.txt"
case_ 1 "digest mismatch" "$train" eval "$tmp/corrupt.safetensors" --data "text:$tmp/text.txt"
case_ 1 "is a language model: give --data" "$train" eval "$ck"
case_ 1 "has vocab=300, not the data's vocabulary (256" "$train" eval "$ck300" --data "text:$tmp/text.txt"
case_ 0 "validation loss" "$train" eval "$ck300" --data "text:$tmp/text.txt" --allow-vocab-mismatch
case_ 2 "expected CKPT and DIR" "$train" export "$ck"
case_ 2 "unknown option '--bogus'" "$train" export "$ck" "$tmp/hf" --bogus
case_ 2 "$tmp/afile: not a directory" "$train" export "$ck" "$tmp/afile"
case_ 2 "cannot be created" "$train" export "$ck" "$none/a/hf"
case_ 1 "$none.safetensors: cannot open" "$train" export "$none.safetensors" "$tmp/hf1"
case_ 1 "words.txt: not a safetensors file" "$train" export "$tmp/words.txt" "$tmp/hf1"
case_ 1 "digest mismatch" "$train" export "$tmp/corrupt.safetensors" "$tmp/hf1"
[ -e "$tmp/hf1" ] && fail "a failed export left $tmp/hf1 behind"
# an earlier export is never replaced without --force
case_ 0 "model.safetensors" "$train" export "$ck" "$tmp/hf"
cp "$tmp/hf/model.safetensors" "$tmp/first-export.safetensors"
case_ 2 "$tmp/hf is not empty (it holds" "$train" export "$ck2" "$tmp/hf"
cmp -s "$tmp/hf/model.safetensors" "$tmp/first-export.safetensors" ||
  fail "a refused export changed the earlier one"
case_ 0 "model.safetensors" "$train" export "$ck2" "$tmp/hf" --force
cmp -s "$tmp/hf/model.safetensors" "$tmp/first-export.safetensors" &&
  fail "export --force did not replace the earlier export"
mkdir "$tmp/empty"
case_ 0 "model.safetensors" "$train" export "$ck" "$tmp/empty"
case_ 2 "unknown; expected gpipe, 1f1b" "$train" schedule --schedule 2f2b
case_ 2 "--svg $none/s.svg: there is no directory $none" "$train" schedule --svg "$none/s.svg"
case_ 2 "unknown argument '--bogus'" "$train" devices --bogus

# ---- rumor-peer: the training options it shares with rumor-train
# (refused before a peer is met: no neighbour listens on these ports)
eps=tcp://127.0.0.1:7,tcp://127.0.0.1:9
case_ 2 "model 'bogus'" "$peer" --insecure --rank 0 --peers $eps --data "$none" --model bogus
case_ 2 "entry 2 is empty" "$peer" --insecure --rank 0 --peers $eps --data "$none" --devices cpu:1,,cpu:1
case_ 2 "--stages 3 and --devices 'cpu:1,cpu:1' (2 devices) disagree" \
  "$peer" --insecure --rank 0 --peers $eps --data "$none" --stages 3 --devices cpu:1,cpu:1
case_ 2 "--partition 'halves'" "$peer" --insecure --rank 0 --peers $eps --data "$none" --stages 2 --partition halves
case_ 2 "give --allow-vocab-mismatch" \
  "$peer" --insecure --rank 0 --peers $eps --data "text:$none" --model $gpt,vocab=50257
case_ 2 "--metrics $none/m.jsonl: there is no directory" \
  "$peer" --insecure --rank 0 --peers $eps --data "$none" --metrics "$none/m.jsonl"

# ---- rumor-peer: its own options, refused before the (missing) data loads
# and before anyone is joined
pr="$peer --insecure --rank 0 --peers $eps --data $none"
case_ 2 "--checkpoint-dir: '$tmp/afile/ck': '$tmp/afile' is a file, not a directory" $pr --checkpoint-dir "$tmp/afile/ck"
case_ 2 "--save-average: '$tmp/afile': '$tmp/afile' is a file, not a directory" $pr --save-average "$tmp/afile"
case_ 2 "--outer steps each round's start by what H local steps and the mix propose (DiLoCo): it needs --local-steps H with H >= 2" $pr --outer nesterov
case_ 2 "--keyframe-every sets how often compressed gossip sends full parameters: it needs --compress" $pr --keyframe-every 4
case_ 2 "--consensus-step is compressed gossip's (CHOCO-SGD's) step: it needs --compress" $pr --consensus-step 0.5
case_ 2 "--max-message-mb 0.5 is below --chunk-mb 1" $pr --max-message-mb 0.5 --chunk-mb 1
case_ 2 "--min-round-timeout 5 is above --round-timeout 1" $pr --min-round-timeout 5 --round-timeout 1
case_ 2 "--listen: address 'tcp://no-such-host.invalid:7000': 'no-such-host.invalid' is neither an address of this machine nor a name that resolves" \
  $pr --listen tcp://no-such-host.invalid:7000
case_ 2 "cannot listen on tcp://192.0.2.1:7000: 192.0.2.1 is not an address of this machine" $pr --listen 192.0.2.1:7000
case_ 2 "peer list entry 0: address 'tcp://no-such-host.invalid:7': 'no-such-host.invalid' is neither" \
  "$peer" --insecure --rank 0 --peers tcp://no-such-host.invalid:7,tcp://127.0.0.1:9 --data "$none"
# a port in use is a runtime error, also found before the data loads
python3 -c 'import socket,time,sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(30)' >"$tmp/port" &
busy_pid=$!
i=0; while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
busy=$(cat "$tmp/port")
case_ 1 "cannot listen on tcp://127.0.0.1:$busy (another process listens there)" \
  "$peer" --insecure --rank 0 --peers tcp://127.0.0.1:$busy,tcp://127.0.0.1:9 --data "$none"
case_ 0 "" "$peer" --insecure --rank 0 --peers "tcp://127.0.0.1:$((busy + 1)),tcp://127.0.0.1:9" \
  --listen "localhost:$((busy + 1))" --data "text:$tmp/text.txt" --model $gpt --rounds 2 \
  --start-timeout 0.2 --round-timeout 0.2 --allow-alone --no-average -q
kill $busy_pid 2>/dev/null
# a sparse codec that sends less than one element of a range (the model is
# known once built: real data here)
case_ 2 "--compress topk:1e-9 sends" "$peer" --insecure --rank 0 --peers $eps --data "text:$tmp/text.txt" \
  --model $gpt --compress topk:1e-9

# ---- rumor-topo
case_ 2 "unknown command 'transmogrify'" "$topo" transmogrify
case_ 2 "unknown option '--frobnicate'" "$topo" analyze ring:8 --frobnicate
case_ 2 "spec 'ring:abc'" "$topo" analyze ring:abc
case_ 2 "unknown family 'hexagon'" "$topo" analyze hexagon:6
case_ 2 "uniform weights need a regular graph" "$topo" analyze star:5 --weights uniform
case_ 2 "unknown weights 'bogus'" "$topo" analyze ring:8 --weights bogus
case_ 2 "the share '3' must be a number in (0, 1]" "$topo" recommend --peers 8 --model-bytes 1MB --compress none,topk:3
case_ 2 "-o $none/w: there is no directory $none" "$topo" weights ring:8 -o "$none/w"
case_ 2 "-o $tmp: is a directory" "$topo" weights ring:8 -o "$tmp"
case_ 2 "--svg $none/x.svg" "$topo" analyze ring:8 --svg "$none/x.svg"
case_ 1 "$none.w" "$topo" analyze ring:8 --weights "file:$none.w"
case_ 1 "$none.links" "$topo" analyze ring:8 --links "$none.links" --model-bytes 1MB
case_ 1 "$none.edges" "$topo" analyze "file:$none.edges"
case_ 1 "bad.edges:2: peer ids '1' 'x' are not integers" "$topo" analyze "file:$tmp/bad.edges"
case_ 0 "ring:8" "$topo" analyze ring:8

# ---- rumor-sim
printf '100 100 25\n100 x 25\n' >"$tmp/bad.net"
case_ 2 "unknown option '--bogus'" "$sim" --bogus
case_ 2 "--loss '2': expected a number in [0, 1]" "$sim" --loss 2
case_ 2 "--svg '$none/x.svg': its directory does not exist" "$sim" --svg "$none/x.svg"
case_ 1 "--net $none.net: No such file or directory" "$sim" --net "$none.net"
case_ 1 "bad.net:2: expected 'UP_MBIT DOWN_MBIT LATENCY_MS'" "$sim" --net "$tmp/bad.net"
case_ 0 "" "$sim" --peers 5 --join-over 1 --duration 1 -q
finish
