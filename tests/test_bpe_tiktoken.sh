#!/bin/sh
# GPT-2's byte-level BPE in C (src/bpe.c) against tiktoken's gpt2 encoding
# (its WebAssembly build, run by node) on the same text: the default corpus
# (1 MB of the King James Bible) and three texts of mixed scripts, white
# space of every kind, emoji and random assigned code points. The ids must
# be the same, one for one. ./bootstrap fetches GPT-2's files and tiktoken
# with npm into build/tokenizers; without them or node the test skips.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
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
for seed in 1 2 3; do
  python3 "$RUMOR_SRCDIR/tests/data/unicode_text.py" 20000 $seed >"$tmp/mixed$seed.txt"
  same "mixed$seed" "$tmp/mixed$seed.txt"
done
[ $n -ge 3 ] || fail "only $n texts compared"
finish
