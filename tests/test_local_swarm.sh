#!/bin/sh
# examples/local-swarm.sh with a peer that fails at start (-g puts peer 1 on
# a device that does not exist): the script stops the other peers at once
# instead of letting them wait --start-timeout (40 s here) for it, names
# the peer and shows its error, marks the others as stopped in its table,
# and exits 1; no peer is left running. A swarm that starts well still
# exits 0 with every peer's result.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
text_peer_test_setup
swarm="$RUMOR_SRCDIR/examples/local-swarm.sh"
opts="--insecure --data text:$text --model gpt:layers=1,dim=16,heads=2,ctx=16 --batch 4
  --rounds 20 --progress 0 --start-timeout 40"

t0=$(date +%s)
# shellcheck disable=SC2086
timeout 120 sh "$swarm" -n 3 -g -,bogus:0 -d "$tmp/bad" -- $opts >"$tmp/bad.out" 2>&1
rc=$?
secs=$(( $(date +%s) - t0 ))
cat "$tmp/bad.out"
echo "a peer failed at start: local-swarm.sh ended after $secs s, exit status $rc"
expect_rc 1 $rc "local-swarm.sh with a peer that fails at start"
# the peers load a tiny text in well under a second; 20 s leaves room for a
# loaded machine and is half the start timeout the others would have waited
expect_num_lt "$secs" 20 "seconds until local-swarm.sh gave up on a swarm that cannot start"
grep -q "^local-swarm: peer 1 failed at start (exit status [0-9]*)" "$tmp/bad.out" ||
  fail "local-swarm.sh did not say that peer 1 failed at start"
# the peer's own error, quoted from its log
grep "^  | rumor-peer 1: " "$tmp/bad.out" | grep -q "bogus:0" ||
  fail "local-swarm.sh did not show peer 1's error (naming bogus:0)"
for r in 0 2; do
  grep -q "^$r .*stopped: peer 1 failed at start" "$tmp/bad.out" ||
    fail "the table does not say peer $r was stopped because peer 1 failed"
done
grep -q "^1 .*failed: .*bogus:0" "$tmp/bad.out" || fail "the table does not give peer 1's error"
# nothing of this run is left running
sleep 1
# (a regular expression that does not match its own text: not grep itself)
left=$(grep -l -s -e "$tmp/bad/peer-[0-9]*\\.jsonl" /proc/[0-9]*/cmdline | cut -d/ -f3)
if [ -n "$left" ]; then
  fail "peers of the failed swarm still run: $(echo $left)"
  for p in $left; do kill -KILL "$p" 2>/dev/null; done
fi

# a swarm that starts: every peer's result, exit 0
# shellcheck disable=SC2086
timeout 120 sh "$swarm" -n 3 -q -d "$tmp/good" -- $opts >"$tmp/good.out" 2>&1
expect_rc 0 $? "local-swarm.sh with 3 healthy peers" "$tmp/good.out"
for r in 0 1 2; do
  grep -q "^peer $r: swarm average validation loss" "$tmp/good/peer-$r.log" ||
    fail "healthy swarm: peer $r gave no result"
done
grep -q "failed\|stopped" "$tmp/good.out" && fail "healthy swarm: $(grep 'failed\|stopped' "$tmp/good.out")"
finish
