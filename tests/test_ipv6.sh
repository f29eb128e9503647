#!/bin/sh
# Peers on IPv6: three CurveZMQ peers whose endpoints are tcp://[::1]:P
# train and mix, peer 0 listening on the wildcard (tcp://*:P, both
# families) while the others dial its IPv6 address. The peers listen on
# IPv6 only, so every message they accept came over IPv6. The same swarm
# on 127.0.0.1 reaches the same swarm-average accuracy (the rounds and their
# mixes are the same; only the addresses differ). Without IPv6 on the
# loopback: exit 77. An open swarm's peer joins another at [::1]:P, and a
# peer whose own entry is an IPv6 address of another machine is refused at
# start, naming it.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null ||
  skip "no IPv6 loopback (::1) here"

mkdir -p "$tmp/keys"
for r in 0 1 2; do "$RUMOR_PEER" keygen "$tmp/keys/peer-$r" >/dev/null || fail "keygen"; done

# run NAME PEERS [LISTEN0]: the swarm on those endpoints, peer 0 bound to
# LISTEN0 where given
run() {
  name=$1 eps=$2 listen0=${3:-}
  pids=
  for r in 0 1 2; do
    l=; [ $r = 0 ] && [ -n "$listen0" ] && l="--listen $listen0"
    # shellcheck disable=SC2086
    timeout 120 "$RUMOR_PEER" --keys "$tmp/keys/peer-$r.key" --allow "$tmp/keys" --rank $r \
      --peers "$eps" $l --data "$FASHION" --train-limit 3000 --epochs 2 --batch 32 --lr 0.05 \
      --progress 0 >"$tmp/$name-$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || fail "$name: a peer failed: $(tail -n 2 "$tmp/$name-0.log")"; done
  pids=
  for r in 0 1 2; do
    line=$(grep "^peer $r: done" "$tmp/$name-$r.log") || { fail "$name: peer $r did not finish"; continue; }
    acc=$(echo "$line" | sed -n 's/.*accepted=\([0-9]*\).*/\1/p')
    [ "${acc:-0}" -gt 0 ] || fail "$name: peer $r accepted no message: $line"
    echo "$line" | grep -q 'connections: admitted=[1-9]' || fail "$name: peer $r admitted no CurveZMQ client: $line"
  done
}

v4=$(free_endpoints 3)
ports=$(echo "$v4" | sed 's/tcp:\/\/127.0.0.1://g')
v6=$(echo "$ports" | sed 's/\([0-9][0-9]*\)/tcp:\/\/[::1]:\1/g')
p0=$(echo "$ports" | cut -d, -f1)
run v6 "$v6" "tcp://*:$p0"
run v4 "$v4"
a6=$(swarm_accuracy v6) a4=$(swarm_accuracy v4)
echo "swarm average: IPv6 $a6%, IPv4 $a4% ($(grep '^peer 0: done' "$tmp/v6-0.log" | cut -d, -f1))"
[ -n "$a6" ] && [ -n "$a4" ] || fail "no swarm average (IPv6 '$a6', IPv4 '$a4')"
awk -v a="$a6" -v b="$a4" 'BEGIN { d = a - b; exit !(d < 0.3 && d > -0.3 && a > 70) }' ||
  fail "the IPv6 swarm's accuracy $a6% is not the IPv4 swarm's $a4% (or under 70%)"
# an open swarm on IPv6: a peer joins another through its bracketed address
j=$(free_endpoints 2 | sed 's/tcp:\/\/127.0.0.1://g')
j0=$(echo "$j" | cut -d, -f1) j1=$(echo "$j" | cut -d, -f2)
timeout 90 "$RUMOR_PEER" --listen "tcp://[::1]:$j0" --keys "$tmp/keys/peer-0.key" --allow "$tmp/keys" \
  --data "$FASHION" --train-limit 3000 --epochs 2 --min-peers 2 --progress 0 >"$tmp/open-0.log" 2>&1 &
pids=$!
timeout 90 "$RUMOR_PEER" --listen "tcp://[::1]:$j1" --join "[::1]:$j0" --keys "$tmp/keys/peer-1.key" \
  --allow "$tmp/keys" --data "$FASHION" --train-limit 3000 --epochs 2 --progress 0 \
  >"$tmp/open-1.log" 2>&1 || fail "the joiner on [::1] failed: $(tail -n 2 "$tmp/open-1.log")"
wait $pids || fail "the first open peer on [::1] failed: $(tail -n 2 "$tmp/open-0.log")"
pids=
grep -q 'swarm average test accuracy .* (2 peers alive)' "$tmp/open-0.log" ||
  fail "the open swarm on [::1] did not average over 2 peers: $(grep 'swarm average' "$tmp/open-0.log")"
# an IPv6 address that is not this machine's: refused at start by name
timeout 20 "$RUMOR_PEER" --insecure --rank 0 --peers "tcp://[2001:db8::1]:$p0,$(echo "$v6" | cut -d, -f2)" \
  --data "$FASHION" --train-limit 320 --epochs 1 --progress 0 >"$tmp/bad.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 124 ] || fail "a peer listening on an address not here exited $rc"
grep -q "2001:db8::1" "$tmp/bad.log" || fail "the refusal does not name the address: $(tail -2 "$tmp/bad.log")"
finish
