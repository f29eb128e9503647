#!/bin/sh
# bench_tokenize: GPT-2's BPE in rumor (rumor-train tokenize: mapped file,
# encoding, shards written) against tiktoken's gpt2 encoding (its
# WebAssembly build under node: encode_ordinary alone, the file already in
# memory) on the same text: the default corpus (4.3 MB of English) and a
# text of mixed scripts. Three rounds back to back; the figures are the
# medians of the per-round ratios, with one thread and with every core
# (tiktoken's encode is one thread either way). Skips without node or the
# files ./bootstrap fetches.
set -u
b=${RUMOR_BUILDDIR:-.}
src=${RUMOR_SRCDIR:-.}
tok=$b/tokenizers
command -v node >/dev/null 2>&1 || { echo "bench_tokenize: no node"; exit 77; }
[ -f "$tok/gpt2/encoder.json" ] && [ -f "$tok/tiktoken/tiktoken.cjs" ] && [ -f "$b/corpus/kjv.txt" ] ||
  { echo "bench_tokenize: no $tok/gpt2, $tok/tiktoken or corpus (./bootstrap)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cores=$(nproc)
python3 "$src/tests/data/unicode_text.py" 100000 5 >"$tmp/mixed.txt" 2>/dev/null || : >"$tmp/mixed.txt"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for text in "$b/corpus/kjv.txt" "$tmp/mixed.txt"; do
  name=$(basename "$text" .txt)
  [ -s "$text" ] || continue
  mb=$(awk -v s="$(stat -c %s "$text")" 'BEGIN { print s / 1e6 }')
  : >"$tmp/r1"; : >"$tmp/rn"
  for round in 1 2 3; do
    ts=$(node "$src/tests/data/tiktoken_ids.cjs" "$tok/tiktoken" "$text" "$tmp/tk.ids" 2>&1 >/dev/null)
    for t in 1 "$cores"; do
      rm -rf "$tmp/out"
      t0=$(date +%s.%N)
      "$b/rumor-train" tokenize "$text" --tokenizer "gpt2:$tok/gpt2" --out "$tmp/out" --threads "$t" \
        --progress 0 --val-fraction 0 >/dev/null || { echo "bench_tokenize: tokenize failed"; exit 1; }
      t1=$(date +%s.%N)
      r=$(awk -v a="$ts" -v b0="$t0" -v b1="$t1" 'BEGIN { printf "%.4f", a / (b1 - b0) }')
      [ "$t" = 1 ] && echo "$r" >>"$tmp/r1" || echo "$r" >>"$tmp/rn"
      [ "$t" = 1 ] && echo "$t0 $t1" >"$tmp/t1"
    done
    echo "$ts" >>"$tmp/tk"
  done
  ntk=$(wc -l <"$tmp/tk.ids")
  nours=$(( ($(cat "$tmp"/out/train_*.bin | wc -c) - 1024 * $(ls "$tmp"/out/train_*.bin | wc -l)) / 2 ))
  [ "$ntk" = "$nours" ] || echo "bench_tokenize: $name: $nours tokens here, tiktoken $ntk"
  tks=$(median <"$tmp/tk")
  echo "bench: tokenize_${name}_tiktoken = $(awk -v m="$mb" -v s="$tks" 'BEGIN { printf "%.2f", m / s }') MB/s"
  echo "bench: tokenize_${name}_vs_tiktoken_1thread = $(median <"$tmp/r1") x"
  echo "bench: tokenize_${name}_vs_tiktoken_${cores}threads = $(median <"$tmp/rn") x"
  : >"$tmp/tk"
done
