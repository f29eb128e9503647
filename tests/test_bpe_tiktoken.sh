#!/bin/sh
# GPT-2's byte-level BPE in C (src/bpe.c) against tiktoken's gpt2 encoding
# (its WebAssembly build, run by node) on the same text: the default corpus
# (1 MB of the King James Bible), code (C headers and this project's own
# sources) and three texts of mixed scripts, white space of every kind,
# emoji and random assigned code points. The ids must be the same, one for
# one. Bytes that are not UTF-8, which tiktoken does not take: three texts
# of valid segments joined by such runs must encode to tiktoken's ids of
# each segment with, between them, ids that decode to exactly the run.
# ./bootstrap fetches GPT-2's files and tiktoken with npm into
# build/tokenizers; without them or node the test skips.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
RUMOR_SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
export RUMOR_SRCDIR # tests/data/gpt2_bytes.py for the Python checks
b=$RUMOR_BUILDDIR
tok=$b/tokenizers
command -v node >/dev/null 2>&1 || skip "node not found (it runs tiktoken)"
command -v python3 >/dev/null 2>&1 || skip "python3 not found (it writes the mixed texts)"
[ -f "$tok/gpt2/encoder.json" ] && [ -f "$tok/tiktoken/tiktoken.cjs" ] ||
  skip "no $tok/gpt2 or $tok/tiktoken (./bootstrap fetches them with npm pack)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
same() { # NAME FILE
  node "$RUMOR_SRCDIR/tests/data/tiktoken_ids.cjs" "$tok/tiktoken" "$2" "$tmp/$1.tk" 2>/dev/null ||
    fail "tiktoken could not encode $1"
  "$b/tests/bpe_ids" "$tok/gpt2" "$2" >"$tmp/$1.ours" || fail "bpe_ids could not encode $1"
  if cmp -s "$tmp/$1.tk" "$tmp/$1.ours"; then
    echo "$1: $(wc -l <"$tmp/$1.ours") ids, the same as tiktoken's"
  else
    l=$(cmp "$tmp/$1.tk" "$tmp/$1.ours" | sed 's/.*line //')
    fail "$1: the ids differ from tiktoken's at id ${l:-?}"
  fi
  n=$((n + 1))
}
if [ -f "$b/corpus/kjv.txt" ]; then
  head -c 1000000 "$b/corpus/kjv.txt" >"$tmp/kjv.txt"
  same kjv "$tmp/kjv.txt"
fi
cat /usr/include/stdio.h /usr/include/stdlib.h "$RUMOR_SRCDIR"/src/bpe.c "$RUMOR_SRCDIR"/tests/data/*.py \
  "$RUMOR_SRCDIR"/tests/data/*.cjs >"$tmp/code.txt" 2>/dev/null
same code "$tmp/code.txt"
for seed in 1 2 3; do
  python3 "$RUMOR_SRCDIR/tests/data/unicode_text.py" 20000 $seed >"$tmp/mixed$seed.txt"
  same "mixed$seed" "$tmp/mixed$seed.txt"
done
[ $n -ge 4 ] || fail "only $n texts compared"
for seed in 1 2 3; do
  d=$tmp/bad$seed
  mkdir -p "$d"
  k=$(python3 "$RUMOR_SRCDIR/tests/data/invalid_utf8.py" $seed "$d") || fail "invalid_utf8.py $seed"
  i=0
  while [ $i -lt "$k" ]; do
    node "$RUMOR_SRCDIR/tests/data/tiktoken_ids.cjs" "$tok/tiktoken" "$d/seg-$i.txt" "$d/seg-$i.tk" 2>/dev/null ||
      fail "tiktoken could not encode segment $i"
    i=$((i + 1))
  done
  "$b/tests/bpe_ids" "$tok/gpt2" "$d/all.bin" >"$d/all.ours" || fail "bpe_ids on invalid UTF-8"
  python3 - "$d" "$k" "$tok/gpt2/encoder.json" <<'PY' || fail "invalid UTF-8 (seed $seed): not tiktoken's ids around exact runs"
import os, sys
sys.path.insert(0, os.environ["RUMOR_SRCDIR"] + "/tests/data")
from gpt2_bytes import decoder
d, k, encp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tok = decoder(encp)
ours = [int(x) for x in open(f"{d}/all.ours")]
at = 0
for i in range(k):
    ref = [int(x) for x in open(f"{d}/seg-{i}.tk")]
    assert ours[at:at + len(ref)] == ref, f"segment {i}: not tiktoken's ids"
    at += len(ref)
    if i + 1 < k:
        bad = open(f"{d}/bad-{i}.bin", "rb").read()
        got = b""
        while len(got) < len(bad):
            got += tok[ours[at]]; at += 1
        assert got == bad, f"run {i}: {got!r} for {bad!r}"
assert at == len(ours), "ids after the last segment"
print(f"invalid UTF-8: {k} segments with tiktoken's ids, {k - 1} runs back exactly")
PY
done
finish
