#!/bin/sh
# examples/mixed-swarm.sh and examples/gpt-swarm.sh take -p BASEPORT as
# examples/local-swarm.sh does: peer r listens on 127.0.0.1:BASEPORT+r. A
# port that is not a number, or a range past 65535, is a usage error
# (exit 2) said before anything runs.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
text_peer_test_setup
RUMOR_TRAIN="$RUMOR_BUILDDIR/rumor-train"
export RUMOR_TRAIN
MODEL=gpt:layers=1,dim=16,heads=2,ctx=16
export MODEL
mixed="$RUMOR_SRCDIR/examples/mixed-swarm.sh"
gpt="$RUMOR_SRCDIR/examples/gpt-swarm.sh"

# free_base N: a port P with P .. P+N-1 all free (below the ephemeral range)
free_base() {
  _busy=" $(listening_ports | tr '\n' ' ') "
  while :; do
    _b=$(( 10000 + $(od -An -N2 -tu2 /dev/urandom) % 22000 )) _j=0
    while [ $_j -lt "$1" ]; do
      case "$_busy" in *" $((_b + _j)) "*) break ;; esac
      _j=$((_j + 1))
    done
    [ $_j -lt "$1" ] || { echo $_b; return; }
  done
}
# listened DIR BASE N: each peer-R.log in DIR says it listened on BASE+R
listened() {
  _r=0
  while [ $_r -lt "$3" ]; do
    grep -q "listening on tcp://127.0.0.1:$(($2 + _r)) " "$1/peer-$_r.log" ||
      fail "$1: peer $_r did not listen on port $(($2 + _r)): $(grep listening "$1/peer-$_r.log")"
    _r=$((_r + 1))
  done
}

for s in "$mixed" "$gpt"; do
  run_expect 2 "-p 'x': expected a port number" sh "$s" -c "$text" -p x
  run_expect 2 "option '-p' needs a value" sh "$s" -c "$text" -p
  sh "$s" --help | grep -q -- "-p BASEPORT" || fail "$s --help does not describe -p BASEPORT"
done
# the range is local-swarm.sh's to check; its usage error is the script's
run_expect 2 "must lie in 1-65535" sh "$mixed" -n 2 -s 1 -r 5 -c "$text" -p 65535 -d "$tmp/range"

base=$(free_base 2)
timeout 300 sh "$mixed" -n 2 -s 1,2 -r 10 -c "$text" -p "$base" -d "$tmp/mixed" \
  >"$tmp/mixed.out" 2>&1
expect_rc 0 $? "mixed-swarm.sh -p $base" "$tmp/mixed.out"
listened "$tmp/mixed/swarm" "$base" 2

base=$(free_base 2)
timeout 300 sh "$gpt" -n 2 -r 2 -c "$text" -p "$base" >"$tmp/gpt.out" 2>&1
expect_rc 0 $? "gpt-swarm.sh -p $base" "$tmp/gpt.out"
dir=$(sed -n 's/^gpt-swarm: .* logs in \(.*\)$/\1/p' "$tmp/gpt.out")
if [ -n "$dir" ] && [ -d "$dir/swarm" ]; then
  listened "$dir/swarm" "$base" 2
  case "$dir" in /tmp/rumor-gpt-swarm-*) rm -rf "$dir" ;; esac
else
  fail "gpt-swarm.sh did not say where its logs are: $(head -n 3 "$tmp/gpt.out")"
fi
finish
