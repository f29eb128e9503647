#!/bin/sh
# A GPT trained on real English text with the real rumor-train binary:
#  - a short run reaches a validation loss well under the text's unigram
#    entropy (computed here in Python from the same bytes): it learned more
#    than byte frequencies;
#  - the same run cut into pipeline stages (zbv, 2 devices) reaches the
#    same validation loss;
#  - the same run on the same bytes shuffled (same unigram entropy, no
#    structure) does not, so the bar can fail;
#  - its metrics' evaluations carry the validation loss and no accuracy
#    (a language model has none);
#  - the checkpoint it wrote samples text (rumor-train sample), evaluates to
#    the run's last validation loss (rumor-train eval) and exports to
#    Hugging Face's layout (rumor-train export);
#  - greedy decoding (sample --temperature 0) gives the same text whatever
#    the seed, and each byte is the argmax of a GPT-2 written here in plain
#    Python from the checkpoint's tensors;
#  - two rumor-peer processes train it together with D-PSGD: the average
#    model beats the unigram entropy and the peers agree;
#  - bad text files are refused with the file's name.
# The corpus is the King James Bible that ./bootstrap writes to
# build/corpus/kjv.txt when present, else the licence texts every Debian
# system has in /usr/share/common-licenses.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
: "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
command -v python3 >/dev/null || skip "python3 missing"
train="$RUMOR_BUILDDIR/rumor-train"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if command -v flock >/dev/null 2>&1; then
  exec 9>"$RUMOR_BUILDDIR/.training-tests.lock"
  flock 9
fi

corpus=${RUMOR_CORPUS:-$RUMOR_BUILDDIR/corpus/kjv.txt}
if [ -f "$corpus" ]; then
  head -c 400000 "$corpus" >"$tmp/text.txt"
else
  cat /usr/share/common-licenses/* | head -c 400000 >"$tmp/text.txt"
fi
python3 - "$tmp/text.txt" "$tmp/shuffled.txt" <<'PY'
import random, sys
data = bytearray(open(sys.argv[1], 'rb').read())
random.Random(7).shuffle(data)
open(sys.argv[2], 'wb').write(bytes(data))
PY
# unigram entropy in nats of the training part (the first 90% of the file)
H=$(python3 - "$tmp/text.txt" <<'PY'
import math, sys, collections
data = open(sys.argv[1], 'rb').read()
data = data[:len(data) - len(data) // 10]
c = collections.Counter(data)
n = len(data)
print("%.4f" % -sum(k / n * math.log(k / n) for k in c.values()))
PY
)
echo "unigram entropy of the text: $H nats"

model=gpt:layers=2,dim=64,heads=4,ctx=64
args="--model $model --batch 16 --steps 400 --optimizer adamw --lr 3e-3 --eval-every 100 --eval-batches 8 --seed 1 --quiet"
val_of() { sed -n 's/^validation loss \([0-9.]*\) .*/\1/p' "$1" | tail -1; }

"$train" $args --data "text:$tmp/text.txt" --checkpoint-dir "$tmp/ckpt" --metrics "$tmp/text.jsonl" \
  >"$tmp/text.out" 2>&1
expect_rc 0 $? "training on text" "$tmp/text.out"
v=$(val_of "$tmp/text.out")
echo "text: validation loss $v nats"
expect_count "$tmp/text.jsonl" '"event":"eval","step":[0-9]*,"val_loss":' 4
grep -q 'accuracy' "$tmp/text.jsonl" &&
  fail "a language model's metrics carry an accuracy: $(grep -m1 accuracy "$tmp/text.jsonl")"
expect_num_lt "${v:-99}" "$(awk "BEGIN{print $H - 0.5}")" "validation loss vs unigram entropy - 0.5"

# the same run cut into 4 stages on 2 devices (zbv: the head on device 0
# with the embedding it shares, the blocks on device 1): the same
# gradients (the shared embedding's two parts add in another order), so the
# same validation loss
"$train" $args --data "text:$tmp/text.txt" --stages 2 --schedule zbv --microbatches 4 \
  >"$tmp/pipe.out" 2>&1
expect_rc 0 $? "training on text in a zbv pipeline" "$tmp/pipe.out"
vp=$(val_of "$tmp/pipe.out")
echo "text, 4 stages (zbv) on 2 devices: validation loss $vp nats"
expect_num_close "${vp:-0}" "${v:-9}" 0.002 "pipelined vs one-stage validation loss"

"$train" $args --data "text:$tmp/shuffled.txt" >"$tmp/shuf.out" 2>&1
expect_rc 0 $? "training on shuffled bytes" "$tmp/shuf.out"
s=$(val_of "$tmp/shuf.out")
echo "shuffled bytes: validation loss $s nats"
expect_num_ge "${s:-0}" "$(awk "BEGIN{print $H - 0.1}")" "shuffled-bytes validation loss vs unigram entropy - 0.1"

ck=$(ls "$tmp/ckpt"/*.safetensors 2>/dev/null | tail -1)
[ -n "$ck" ] || fail "no checkpoint written in $tmp/ckpt"
if [ -n "$ck" ]; then
  "$train" sample "$ck" --prompt "the " --tokens 80 --seed 3 >"$tmp/sample.out" 2>&1
  expect_rc 0 $? "rumor-train sample" "$tmp/sample.out"
  echo "sample: $(head -c 120 "$tmp/sample.out" | tr '\n' ' ')"
  [ "$(wc -c <"$tmp/sample.out")" -ge 84 ] || fail "sample printed $(wc -c <"$tmp/sample.out") bytes"
  "$train" sample "$ck" --prompt "the " --tokens 80 --seed 3 >"$tmp/sample2.out" 2>&1
  cmp -s "$tmp/sample.out" "$tmp/sample2.out" || fail "the same seed sampled different text"
  # eval of the last checkpoint on the same windows gives the run's last loss
  "$train" eval "$ck" --data "text:$tmp/text.txt" --batch 16 --eval-batches 8 >"$tmp/eval.out" 2>&1
  expect_rc 0 $? "rumor-train eval" "$tmp/eval.out"
  e=$(sed -n 's/.*: validation loss \([0-9.]*\) .*/\1/p' "$tmp/eval.out")
  expect_num_close "${e:-0}" "${v:-9}" 0.0002 "rumor-train eval of the last checkpoint vs the run's last validation loss"
  run_expect 1 "is a language model" "$train" eval "$ck"
  # greedy decoding: one text whatever the seed, each byte the argmax of an
  # independent GPT-2 (plain Python, float64, from the checkpoint's tensors)
  "$train" sample "$ck" --prompt "And God said" --tokens 40 --temperature 0 --seed 1 >"$tmp/greedy1.out" 2>&1
  expect_rc 0 $? "rumor-train sample --temperature 0" "$tmp/greedy1.out"
  "$train" sample "$ck" --prompt "And God said" --tokens 40 --temperature 0 --seed 99 >"$tmp/greedy2.out" 2>&1
  cmp -s "$tmp/greedy1.out" "$tmp/greedy2.out" || fail "greedy decoding depends on the seed"
  echo "greedy: $(head -c 52 "$tmp/greedy1.out" | tr '\n' ' ')"
  python3 - "$ck" "$tmp/greedy1.out" 12 52 <<'PY' || fail "greedy decoding is not the argmax"
import json, math, struct, sys
from operator import mul
ck, out, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raw = open(ck, "rb").read()
(hlen,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + hlen])
spec = dict(kv.split("=") for kv in header["__metadata__"]["model"][4:].split(","))
L, D, H, T, V = (int(spec[k]) for k in ("layers", "dim", "heads", "ctx", "vocab"))
data = raw[8 + hlen:]
def tensor(name):
    e = header["transformer." + name]
    a, b = e["data_offsets"]
    flat = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    if len(e["shape"]) == 1:
        return list(flat)
    r, c = e["shape"]
    return [list(flat[i * c:(i + 1) * c]) for i in range(r)]
def lin_of(name):  # Conv1D's (in, out), kept as its out columns
    return [list(c) for c in zip(*tensor(name + ".weight"))], tensor(name + ".bias")
def ln_of(name):
    return tensor(name + ".weight"), tensor(name + ".bias")
wte, wpe = tensor("wte.weight"), tensor("wpe.weight")
blocks = [dict(ln1=ln_of("h.%d.ln_1" % i), attn=lin_of("h.%d.attn.c_attn" % i),
               proj=lin_of("h.%d.attn.c_proj" % i), ln2=ln_of("h.%d.ln_2" % i),
               fc=lin_of("h.%d.mlp.c_fc" % i), out=lin_of("h.%d.mlp.c_proj" % i))
          for i in range(L)]
lnf = ln_of("ln_f")
def ln(x, wb):
    m = sum(x) / len(x)
    s = 1 / math.sqrt(sum((a - m) ** 2 for a in x) / len(x) + 1e-5)
    return [(a - m) * s * w + b for a, w, b in zip(x, *wb)]
def lin(x, wb):
    return [sum(map(mul, x, c)) + b for c, b in zip(*wb)]
def gelu(a):  # GPT-2's tanh form
    return 0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
hs = D // H
keys, values = [[] for _ in range(L)], [[] for _ in range(L)]
def next_logits(tok, pos):
    """Causal attention over the tokens so far (cached keys and values)."""
    x = [a + b for a, b in zip(wte[tok], wpe[pos])]
    for blk, ks, vs in zip(blocks, keys, values):
        qkv = lin(ln(x, blk["ln1"]), blk["attn"])
        ks.append(qkv[D:2 * D])
        vs.append(qkv[2 * D:])
        y = []
        for h in range(H):
            a, b = h * hs, (h + 1) * hs
            sc = [sum(map(mul, qkv[a:b], k[a:b])) / math.sqrt(hs) for k in ks]
            e = [math.exp(z - max(sc)) for z in sc]
            y += [sum(w * v[j] for w, v in zip(e, vs)) / sum(e) for j in range(a, b)]
        x = [p + q for p, q in zip(x, lin(y, blk["proj"]))]
        x = [p + q for p, q in zip(x, lin([gelu(z) for z in lin(ln(x, blk["ln2"]), blk["fc"])], blk["out"]))]
    x = ln(x, lnf)
    return [sum(map(mul, x, w)) for w in wte]
text = open(out, "rb").read()[:n]
assert len(text) == n <= T, (len(text), n, T)
bad = ties = 0
for pos in range(n - 1):
    logits = next_logits(text[pos], pos)
    if pos + 1 < prompt:
        continue
    got, best = text[pos + 1], max(range(V), key=lambda v: logits[v])
    if got != best and logits[best] - logits[got] > 1e-4:
        bad += 1
        print("byte %d: rumor's greedy %r, the argmax %r (logits %.5f, %.5f)"
              % (pos + 1, chr(got), chr(best), logits[got], logits[best]))
    ties += got != best
print("%d greedy bytes: %d differ from the reference's argmax, %d within 1e-4 of it"
      % (n - prompt, bad, ties - bad))
sys.exit(1 if bad or ties > 2 else 0)
PY
  "$train" export "$ck" "$tmp/hf" >"$tmp/export.out" 2>&1
  expect_rc 0 $? "rumor-train export" "$tmp/export.out"
  [ -s "$tmp/hf/model.safetensors" ] && [ -s "$tmp/hf/config.json" ] ||
    fail "export wrote no model.safetensors or config.json"
  grep -q '"n_layer":[[:space:]]*2' "$tmp/hf/config.json" || fail "config.json: $(cat "$tmp/hf/config.json")"
fi

# two rumor-peer processes train the GPT together (D-PSGD over loopback):
# both learn, and their models agree
if [ -x "$RUMOR_BUILDDIR/rumor-peer" ]; then
  ports=$(free_endpoints 2)
  pids=
  for r in 0 1; do
    "$RUMOR_BUILDDIR/rumor-peer" --insecure --rank $r --peers "$ports" --model gpt:layers=1,dim=32,heads=2,ctx=32 \
      --data "text:$tmp/text.txt" --batch 8 --epochs 1 --optimizer adamw --lr 3e-3 -q \
      >"$tmp/peer-$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || fail "peer exited with $?: $(tail -3 "$tmp"/peer-*.log)"; done
  l0=$(sed -n 's/^peer 0: local validation loss \(.*\)/\1/p' "$tmp/peer-0.log")
  l1=$(sed -n 's/^peer 1: local validation loss \(.*\)/\1/p' "$tmp/peer-1.log")
  a0=$(sed -n 's/^peer 0: swarm average validation loss \(.*\)/\1/p' "$tmp/peer-0.log")
  echo "2-peer swarm: local validation losses $l0 and $l1, average model $a0"
  expect_num_lt "${a0:-99}" "$(awk "BEGIN{print $H - 0.3}")" "swarm average validation loss vs unigram entropy - 0.3"
  expect_num_close "${l0:-0}" "${l1:-9}" 0.05 "the two peers' validation losses"
fi

: >"$tmp/empty.txt"
run_expect 1 "$tmp/empty.txt" "$train" --model "$model" --data "text:$tmp/empty.txt" --steps 1 -q
run_expect 1 "$tmp/missing.txt" "$train" --model "$model" --data "text:$tmp/missing.txt" --steps 1 -q
finish
