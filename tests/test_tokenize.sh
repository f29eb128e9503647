#!/bin/sh
# rumor-train tokenize: 1 MB of the default corpus and a text of mixed
# scripts into shards of at most 50,000 GPT-2 tokens, with 1 and with 2
# threads. The shards must be llm.c's format (header counts that match
# their sizes), the same bytes whatever the threads, hold as many tokens as
# the whole files encode to (the cuts between blocks and at the validation
# split change no token), and decode (a decoder written here in Python from
# encoder.json) to each file's first ~90% in the train shards and the rest
# in the validation shards. rumor-train trains on --data tokens:DIR; bad
# usage and an --out that holds shards are refused. --train-bpe 320 on
# 200 kB of the corpus (ASCII) must give the merges of a trainer written
# here in Python from the rule (the most frequent adjacent pair over the
# distinct pieces, the lower ids on a tie, a pair that makes a token
# already passed over), and the shards it writes decode to the text.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
RUMOR_SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
export RUMOR_SRCDIR # tests/data/gpt2_bytes.py for the Python checks
b=$RUMOR_BUILDDIR
gpt2=$b/tokenizers/gpt2
[ -f "$gpt2/encoder.json" ] || skip "no $gpt2 (./bootstrap fetches GPT-2's files with npm pack)"
[ -f "$b/corpus/kjv.txt" ] || skip "no corpus/kjv.txt (./bootstrap build writes it)"
command -v python3 >/dev/null 2>&1 || skip "python3 not found (it decodes the shards)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 1000000 "$b/corpus/kjv.txt" >"$tmp/a.txt"
python3 "$RUMOR_SRCDIR/tests/data/unicode_text.py" 5000 9 >"$tmp/b.txt"
for t in 1 2; do
  "$b/rumor-train" tokenize "$tmp/a.txt" "$tmp/b.txt" --tokenizer "gpt2:$gpt2" --out "$tmp/s$t" \
    --shard-tokens 50000 --threads $t --progress 0 >"$tmp/out$t" 2>&1 ||
    fail "tokenize with $t thread(s): $(tail -2 "$tmp/out$t")"
done
cat "$tmp/out2"
for f in "$tmp"/s1/*.bin; do
  cmp -s "$f" "$tmp/s2/$(basename "$f")" || fail "$(basename "$f") differs between 1 and 2 threads"
done
[ "$(ls "$tmp/s1" | wc -l)" = "$(ls "$tmp/s2" | wc -l)" ] || fail "1 and 2 threads wrote different shards"
whole=$(( $("$b/tests/bpe_ids" "$gpt2" "$tmp/a.txt" | wc -l) + $("$b/tests/bpe_ids" "$gpt2" "$tmp/b.txt" | wc -l) ))
python3 - "$tmp" "$gpt2" "$whole" <<'PY' || fail "the shards are not the files' tokens"
import glob, os, struct, sys
sys.path.insert(0, os.environ["RUMOR_SRCDIR"] + "/tests/data")
from gpt2_bytes import decoder
d, gpt2, whole = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = decoder(f"{gpt2}/encoder.json")
def shards(kind):
    ids = []
    files = sorted(glob.glob(f"{d}/s2/{kind}_*.bin"))
    for k, f in enumerate(files):
        raw = open(f, "rb").read()
        h = struct.unpack("<256i", raw[:1024])
        assert h[0] == 20240520 and h[1] == 1 and len(raw) == 1024 + 2 * h[2], f"{f}: header {h[:3]}"
        assert h[2] <= 50000 and (h[2] == 50000 or k == len(files) - 1), f"{f}: {h[2]} tokens"
        ids += struct.unpack(f"<{h[2]}H", raw[1024:])
    return ids
tr, va = shards("train"), shards("val")
assert len(tr) + len(va) == whole, f"{len(tr)} + {len(va)} tokens, the files encode to {whole}"
dt, dv = b"".join(tok[i] for i in tr), b"".join(tok[i] for i in va)
a, b_ = open(f"{d}/a.txt", "rb").read(), open(f"{d}/b.txt", "rb").read()
ok = False
for s1 in range(int(0.9 * len(a)), len(a) + 1):
    s2 = len(dt) - s1
    if 0 <= s2 <= len(b_) and dt == a[:s1] + b_[:s2] and dv == a[s1:] + b_[s2:]:
        ok = True
        break
assert ok, "the train and validation shards do not decode to the files' two parts"
print(f"{len(tr)} train and {len(va)} validation tokens decode to the files; validation from byte {s1} of a.txt, {s2} of b.txt")
PY
timeout 120 "$b/rumor-train" --model gpt:layers=1,dim=32,heads=2,ctx=32,vocab=50257 \
  --data "tokens:$tmp/s2" --steps 5 --batch 4 --eval-batches 2 --checkpoint-dir "$tmp/ck2" \
  >"$tmp/train.out" 2>&1 || fail "rumor-train on tokens:DIR: $(tail -2 "$tmp/train.out")"
grep -q "validation loss" "$tmp/train.out" || fail "rumor-train on tokens:DIR printed no validation loss"
# a GPT-2 vocabulary model samples text: GPT-2's tokens decoded (its
# checkpoint names the shards' copy of the tokenizer)
ck2=$(ls "$tmp"/ck2/*.safetensors | tail -1)
"$b/rumor-train" sample "$ck2" --prompt "In the beginning" --tokens 30 --seed 2 >"$tmp/sample2.out" 2>&1 ||
  fail "sample of a GPT-2 vocabulary model: $(tail -2 "$tmp/sample2.out")"
python3 - "$tmp/sample2.out" "$gpt2/encoder.json" <<'PY' || fail "sample did not print GPT-2 tokens' text"
import json, sys
out = open(sys.argv[1], "rb").read()
assert out.startswith(b"In the beginning") and len(out) > len(b"In the beginning") + 30, out[:80]
print(f"sample (GPT-2 vocabulary): {out[:100]!r}")
PY
# the export's tokenizer in Hugging Face, where transformers is installed
"$b/rumor-train" export "$ck2" "$tmp/hf2" >"$tmp/export2.out" 2>&1 || fail "export: $(cat "$tmp/export2.out")"
printf 'And God said, Let there be light: and there was light. 42 times!' >"$tmp/line.txt"
if python3 -c "import transformers" 2>/dev/null; then
  want=$("$b/tests/bpe_ids" "$gpt2" "$tmp/line.txt" | tr '\n' ' ')
  got=$(python3 -c "import sys; from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained(sys.argv[1]); print(' '.join(map(str, t(open(sys.argv[2]).read())['input_ids'])))" "$tmp/hf2" "$tmp/line.txt" 2>"$tmp/hf.err") ||
    fail "AutoTokenizer.from_pretrained(export): $(tail -2 "$tmp/hf.err")"
  [ "$got " = "$want" ] || fail "Hugging Face's ids of the exported tokenizer: $got; rumor's: $want"
  echo "the export's tokenizer in Hugging Face: the same ids ($got)"
else
  echo "(transformers not installed: the export's tokenizer was not loaded in Hugging Face)"
fi
head -c 200000 "$b/corpus/kjv.txt" >"$tmp/c.txt"
"$b/rumor-train" tokenize "$tmp/c.txt" --train-bpe 320 --val-fraction 0 --out "$tmp/t" \
  --progress 0 >"$tmp/train-bpe.out" 2>&1 || fail "--train-bpe 320: $(tail -2 "$tmp/train-bpe.out")"
grep -q "trained a BPE of 320 tokens" "$tmp/train-bpe.out" || fail "--train-bpe 320 said: $(cat "$tmp/train-bpe.out")"
python3 - "$tmp" <<'PY' || fail "--train-bpe's merges are not the reference trainer's"
import collections, glob, json, os, re, struct, sys
sys.path.insert(0, os.environ["RUMOR_SRCDIR"] + "/tests/data")
from gpt2_bytes import ORDER as order, decoder, mapped
d = sys.argv[1]
V = 320
ws = " \t\n\x0b\x0c\r"
pat = re.compile(rf"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{ws}A-Za-z0-9]+|[{ws}]+(?![^{ws}])|[{ws}]+")
text = open(f"{d}/c.txt", "rb").read()
assert all(c < 128 for c in text), "the reference's pattern is for ASCII text"
pieces = collections.Counter(pat.findall(text.decode("ascii")))
tok = [bytes([b]) for b in order]
have = set(tok)
words = {tuple(order.index(c) for c in w.encode()): k for w, k in pieces.items()}
merges, banned = [], set()
while len(tok) < V - 1:
    pc = collections.Counter()
    for w, k in words.items():
        for p in zip(w, w[1:]):
            pc[p] += k
    cands = [(c, p) for p, c in pc.items() if c >= 2 and p not in banned]
    if not cands:
        break
    c, (a, b) = min(cands, key=lambda x: (-x[0], x[1]))
    if tok[a] + tok[b] in have:
        banned.add((a, b))
        continue
    new = len(tok)
    tok.append(tok[a] + tok[b]); have.add(tok[-1]); merges.append((a, b))
    nw = {}
    for w, k in words.items():
        out, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                out.append(new); i += 2
            else:
                out.append(w[i]); i += 1
        nw[tuple(out)] = nw.get(tuple(out), 0) + k
    words = nw
ref = ["#version: 0.2"] + [f"{mapped(tok[a])} {mapped(tok[b])}" for a, b in merges]
ours = open(f"{d}/t/tokenizer/vocab.bpe", encoding="utf-8").read().splitlines()
assert ours == ref, f"{len(ours) - 1} merges here, {len(ref) - 1} in the reference; first difference: " + \
    next((f"line {i + 1}: {x!r} against {y!r}" for i, (x, y) in enumerate(zip(ours, ref)) if x != y), "length")
enc = json.load(open(f"{d}/t/tokenizer/encoder.json", encoding="utf-8"))
assert len(enc) == V and enc["<|endoftext|>"] == V - 1, f"{len(enc)} tokens"
dec = decoder(f"{d}/t/tokenizer/encoder.json")
ids = []
for f in sorted(glob.glob(f"{d}/t/train_*.bin")):
    raw = open(f, "rb").read()
    ids += struct.unpack(f"<{(len(raw) - 1024) // 2}H", raw[1024:])
assert b"".join(dec[i] for i in ids) == text, "the trained BPE's shards do not decode to the text"
print(f"--train-bpe {V}: {len(merges)} merges, the reference's; {len(ids)} tokens decode to the text")
PY
# a model on the trained BPE's tokens: its checkpoint names the tokenizer;
# sample decodes with it, eval gives bits per byte (bits per token over the
# validation tokens' bytes a token, computed here), export writes it
timeout 120 "$b/rumor-train" --model gpt:layers=1,dim=32,heads=2,ctx=32,vocab=320 \
  --data "tokens:$tmp/t" --steps 4 --batch 4 --eval-batches 2 --checkpoint-dir "$tmp/ck" \
  >"$tmp/train4.out" 2>&1 || fail "rumor-train on the trained BPE: $(tail -2 "$tmp/train4.out")"
ck=$(ls "$tmp"/ck/*.safetensors | tail -1)
"$b/rumor-train" sample "$ck" --prompt "And God said" --tokens 20 >"$tmp/sample.out" 2>&1 ||
  fail "sample: $(tail -2 "$tmp/sample.out")"
grep -q "^And God said" "$tmp/sample.out" || fail "sample did not print its prompt: $(head -c 200 "$tmp/sample.out")"
run_expect 1 "was trained with another tokenizer" "$b/rumor-train" sample "$ck" --tokenizer "$gpt2"
"$b/rumor-train" eval "$ck" --data "tokens:$tmp/t" --batch 4 >"$tmp/eval.out" 2>&1 ||
  fail "eval: $(tail -2 "$tmp/eval.out")"
cat "$tmp/eval.out"
python3 - "$tmp" "$(cat "$tmp/eval.out")" <<'PY' || fail "eval's bits per byte are wrong"
import glob, json, math, re, struct, sys
d, line = sys.argv[1], sys.argv[2]
m = re.search(r"validation loss ([0-9.]+) nats per token \(([0-9.]+) bits per token, ([0-9.]+) bits per byte at ([0-9.]+) bytes a token\)", line)
assert m, line
nats, bpt_bits, bpb, bpt = map(float, m.groups())
enc = json.load(open(f"{d}/t/tokenizer/encoder.json", encoding="utf-8"))
ids = []
for f in sorted(glob.glob(f"{d}/t/val_*.bin")):
    raw = open(f, "rb").read()
    ids += struct.unpack(f"<{(len(raw) - 1024) // 2}H", raw[1024:])
if not ids:  # --val-fraction 0: the validation part is the last 10% of the train tokens
    for f in sorted(glob.glob(f"{d}/t/train_*.bin")):
        raw = open(f, "rb").read()
        ids += struct.unpack(f"<{(len(raw) - 1024) // 2}H", raw[1024:])
    ids = ids[len(ids) - int(len(ids) * 0.1):]
length = {i: len(s) for s, i in enc.items()}
want = sum(length[i] for i in ids) / len(ids)
assert abs(bpt - want) < 1e-4, f"{bpt} bytes a token, the validation tokens' {want:.4f}"
assert abs(bpb - nats / math.log(2) / bpt) < 2e-4, f"{bpb} bits per byte from {nats} nats at {bpt}"
print(f"eval: {bpb} bits per byte = {nats} nats / ln 2 / {want:.3f} bytes a token")
PY
"$b/rumor-train" export "$ck" "$tmp/hf" >"$tmp/export.out" 2>&1 || fail "export: $(cat "$tmp/export.out")"
cmp -s "$tmp/hf/vocab.json" "$tmp/t/tokenizer/encoder.json" && cmp -s "$tmp/hf/merges.txt" "$tmp/t/tokenizer/vocab.bpe" ||
  fail "export did not write the model's tokenizer as vocab.json and merges.txt"
grep -q '"tokenizer_class": "GPT2Tokenizer"' "$tmp/hf/tokenizer_config.json" || fail "no tokenizer_config.json"
run_expect 1 "trained on tokens of another tokenizer" "$b/rumor-train" eval "$ck" --data "tokens:$tmp/s2"
run_expect 2 "--tokenizer and --train-bpe" "$b/rumor-train" tokenize "$tmp/a.txt" --train-bpe 300 \
  --tokenizer "gpt2:$gpt2" --out "$tmp/s6"
run_expect 2 "--train-bpe" "$b/rumor-train" tokenize "$tmp/a.txt" --train-bpe 100 --out "$tmp/s7"
run_expect 1 "holds shards already" "$b/rumor-train" tokenize "$tmp/a.txt" --tokenizer "gpt2:$gpt2" \
  --out "$tmp/s1"
run_expect 1 "encoder.json: No such file" "$b/rumor-train" tokenize "$tmp/a.txt" \
  --tokenizer "gpt2:$tmp" --out "$tmp/s3"
run_expect 2 "--tokenizer gpt2:DIR is required" "$b/rumor-train" tokenize "$tmp/a.txt" --out "$tmp/s4"
run_expect 2 "expected text files first" "$b/rumor-train" tokenize --out "$tmp/s4"
run_expect 1 "nothere.txt" "$b/rumor-train" tokenize "$tmp/nothere.txt" --tokenizer "gpt2:$gpt2" \
  --out "$tmp/s5"
finish
