#!/bin/sh
# The manual pages: rumor-peer(1), rumor-train(1) and rumor-sim(1)
# (generated from --help by help2man) hold every long option their
# program's --help and its subcommands' --help name, and they and
# rumor-topo(1) format without a warning (groff -man -ww).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
b=$RUMOR_BUILDDIR
[ -f "$b/peers/rumor-peer.1" ] || skip "no generated manual pages (configure found no help2man)"
command -v groff >/dev/null || skip "groff not found"
plain() { sed 's/\\f[BIRP]//g; s/\\-/-/g; s/\\(em/--/g' "$1"; }
options() { grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
check() { # PAGE HELP-TEXT-FILE
  n=0
  for o in $(options <"$2"); do
    plain "$1" | grep -q -- "$o" || fail "$(basename "$1") lacks $o"
    n=$((n + 1))
  done
  echo "$(basename "$1"): all $n options of --help"
}
"$b/rumor-peer" --help >"$b/peers/test-help-peer.txt"
"$b/rumor-peer" keygen --help >>"$b/peers/test-help-peer.txt"
check "$b/peers/rumor-peer.1" "$b/peers/test-help-peer.txt"
"$b/rumor-train" --help >"$b/peers/test-help-train.txt"
for c in sample eval export schedule tokenize; do "$b/rumor-train" $c --help >>"$b/peers/test-help-train.txt"; done
check "$b/peers/rumor-train.1" "$b/peers/test-help-train.txt"
"$b/rumor-sim" --help >"$b/peers/test-help-sim.txt"
check "$b/sim/rumor-sim.1" "$b/peers/test-help-sim.txt"
rm -f "$b/peers/test-help-peer.txt" "$b/peers/test-help-train.txt" "$b/peers/test-help-sim.txt"
# at groff's page width and at man(1)'s on an 80-column terminal (78n):
# a long word that fits the one may not break in the other
for page in "$b/peers/rumor-peer.1" "$b/peers/rumor-train.1" "$b/sim/rumor-sim.1" \
  "$RUMOR_SRCDIR/topo/rumor-topo.1"; do
  for width in "" "-rLL=78n -rLT=78n"; do
    # shellcheck disable=SC2086
    w=$(groff -man -ww -z $width "$page" 2>&1)
    [ -z "$w" ] || fail "$(basename "$page") formats with warnings${width:+ ($width)}: $(echo "$w" | head -3)"
  done
done
# the usage lines are the SYNOPSIS, none of them under DESCRIPTION
for page in "$b/peers/rumor-peer.1" "$b/peers/rumor-train.1"; do
  desc=$(sed -n '/^\.SH DESCRIPTION/,/^\.SH/p' "$page" | sed 's/\\f[BIRP]//g; s/\\-/-/g')
  prog=$(basename "$page" .1)
  echo "$desc" | grep -q "^$prog \(--[a-z]\|keygen \[\)" &&
    fail "$(basename "$page"): a usage line is under DESCRIPTION: $(echo "$desc" | grep "$prog" | head -2)"
done
finish
