#!/bin/sh
# A second process started with a rank that is already running is refused:
# it exits non-zero naming the rank and both addresses, the first one logs
# that it refused a copy of itself, and the swarm trains on undisturbed
# (no peer drops the real rank's messages as an old incarnation).
# Plaintext and CurveZMQ (where the copy holds the rank's real key).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

# run_case NAME SECURITY-FLAGS-FOR-RANK (a function of the rank)
run_case() {
  name=$1
  ports=$(free_endpoints 4)
  peers=$(echo "$ports" | cut -d, -f1-3)
  other=$(echo "$ports" | cut -d, -f4)
  pids=
  # 500 rounds of about 25 ms: the swarm runs while the copy starts
  for r in 0 1 2; do
    "$RUMOR_PEER" $(sec $r) --rank $r --peers "$peers" --epochs 10 --train-limit 3200 \
      --throttle 20 --data "$FASHION" --round-timeout 2 --no-average --log-level info \
      --progress 0.1 --metrics "$tmp/$name-$r.jsonl" >"$tmp/$name-$r.log" 2>&1 &
    pids="$pids $!"
  done
  # the copy of rank 1, listening elsewhere, once the swarm is under way
  wait_round "$tmp/$name-1.jsonl" 5
  timeout 30 "$RUMOR_PEER" $(sec 1) --rank 1 --peers "$peers" --listen "$other" --epochs 2 \
    --train-limit 1280 --data "$FASHION" --start-timeout 5 --no-average -q \
    >"$tmp/$name-copy.log" 2>&1
  rc=$?
  for p in $pids; do wait "$p"; done
  pids=
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "$name: the second rank 1 exited $rc: $(tail -2 "$tmp/$name-copy.log")"
  p1=$(echo "$peers" | cut -d, -f2)
  grep -q "rank 1 is taken.*$p1.*$other" "$tmp/$name-copy.log" ||
    fail "$name: the refusal does not name rank 1, $p1 and $other: $(tail -2 "$tmp/$name-copy.log")"
  grep -q "another process claims to be this peer (rank 1, listening on $other)" "$tmp/$name-1.log" ||
    fail "$name: rank 1 did not log the copy it refused"
  for r in 0 1 2; do
    grep -q "^peer $r: done" "$tmp/$name-$r.log" || fail "$name: peer $r did not finish: $(tail -2 "$tmp/$name-$r.log")"
    grep -q "restarted\|old_incarnation" "$tmp/$name-$r.log" &&
      fail "$name: peer $r took the copy for a restart of rank 1: $(grep -m1 "restarted\|old_incarnation" "$tmp/$name-$r.log")"
  done
  echo "$name: $(tail -1 "$tmp/$name-copy.log")"
}

sec() { echo --insecure; }
run_case plaintext

mkdir -p "$tmp/keys"
for r in 0 1 2; do "$RUMOR_PEER" keygen "$tmp/keys/peer-$r" >/dev/null || fail "keygen"; done
sec() { echo --keys "$tmp/keys/peer-$1.key" --allow "$tmp/keys"; }
run_case curve
finish
