#!/bin/sh
# A peer whose neighbours never answer does not pass for a swarm member: it
# trains its rounds alone, then says so and exits 1 (its model is not the
# swarm's). --allow-alone accepts that on purpose (exit 0).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

ports=$(free_endpoints 2)
common="--insecure --rank 0 --peers $ports --epochs 1 --train-limit 320 --data $FASHION
        --start-timeout 1 --round-timeout 0.3 -q"
# shellcheck disable=SC2086
timeout 60 "$RUMOR_PEER" $common >"$tmp/alone.log" 2>&1
expect_rc 1 $? "a peer whose neighbour never answered" "$tmp/alone.log"
grep -q "rumor-peer 0: trained alone: no neighbour's parameters reached this peer in 5 rounds" "$tmp/alone.log" ||
  fail "no message says the peer trained alone: $(tail -2 "$tmp/alone.log")"
grep -q '^peer 0: done' "$tmp/alone.log" || fail "the results were not printed before the error"

# shellcheck disable=SC2086
timeout 60 "$RUMOR_PEER" $common --allow-alone >"$tmp/allowed.log" 2>&1
expect_rc 0 $? "--allow-alone" "$tmp/allowed.log"

finish
