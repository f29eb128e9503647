#!/bin/sh
# bench_corpus_memory: the resident memory of a training run against the
# size of its token corpus. Shards are mapped, not read (src/text.h): the
# vocabulary check at load lets go of what it read and training windows page
# in what they touch, so a corpus of many GB should add little to a run's
# peak resident set. Runs the same small GPT for 200 steps on the default
# corpus tokenized (4.6 MB of tokens) and on RUMOR_BENCH_CORPUS_GB (default
# 4, at most half the free disk) of shards made of it, and prints the peak
# resident set (VmHWM) of both and the difference. Skips without the
# tokenizer files or the corpus.
set -u
b=${RUMOR_BUILDDIR:-.}
gb=${RUMOR_BENCH_CORPUS_GB:-4}
[ -f "$b/tokenizers/gpt2/encoder.json" ] && [ -f "$b/corpus/kjv.txt" ] ||
  { echo "bench_corpus_memory: no tokenizer or corpus (./bootstrap)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rumor-bench-corpus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
free_gb=$(df -Pk "$tmp" | awk 'NR == 2 { print int($4 / 1048576 / 2) }')
[ "$free_gb" -ge "$gb" ] || gb=$free_gb
[ "$gb" -ge 1 ] || { echo "bench_corpus_memory: under 2 GB of free disk"; exit 77; }
"$b/rumor-train" tokenize "$b/corpus/kjv.txt" --tokenizer "gpt2:$b/tokenizers/gpt2" --out "$tmp/small" \
  --progress 0 >/dev/null || exit 1
# GB shards of 1 GiB each: the corpus's train tokens again and again
python3 - "$tmp/small/train_000000.bin" "$tmp/big" "$gb" <<'PY' || exit 1
import os, struct, sys
src, d, gb = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(d)
tok = open(src, "rb").read()[1024:]
n = (1 << 29)  # tokens a shard: 1 GiB
for k in range(gb):
    with open(f"{d}/train_{k:06d}.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        left = 2 * n
        while left:
            w = tok[:left]
            f.write(w)
            left -= len(w)
PY
cp "$tmp/small/val_000000.bin" "$tmp/big/val_000000.bin"
cp -r "$tmp/small/tokenizer" "$tmp/big/tokenizer"
peak() { # DIR: the run's VmHWM in kB
  "$b/rumor-train" --model gpt:layers=2,dim=64,heads=4,ctx=64,vocab=50257 --data "tokens:$1" \
    --steps 200 --batch 8 --threads 1 --eval-batches 4 --progress 0 >/dev/null 2>&1 &
  pid=$! hwm=0
  while kill -0 $pid 2>/dev/null; do
    h=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$pid/status 2>/dev/null)
    [ -n "$h" ] && hwm=$h
    sleep 0.1
  done
  wait $pid || { echo "bench_corpus_memory: the run on $1 failed" >&2; exit 1; }
  echo "$hwm"
}
small=$(peak "$tmp/small") || exit 1
big=$(peak "$tmp/big") || exit 1
echo "bench_corpus_memory: peak resident set $((small / 1024)) MB on 4.6 MB of tokens, $((big / 1024)) MB on $gb GiB"
echo "bench: corpus_memory_gib = $gb GiB"
echo "bench: corpus_memory_peak_rss_small = $((small / 1024)) MB"
echo "bench: corpus_memory_peak_rss_big = $((big / 1024)) MB"
echo "bench: corpus_memory_rss_beyond = $(( (big - small) / 1024 )) MB"
