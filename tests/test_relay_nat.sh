#!/bin/sh
# Peers behind real NATs reached through a relay (network namespaces and
# nftables masquerades, no mocks). Two public peers, A (a relay: --relay)
# and D, on 10.99.1.0/24; a router masquerades two private networks out to
# it, B on 10.99.2.0/24 and C on 10.99.3.0/24, and forwards nothing between
# them: nobody can dial B or C. B and C register with A's relay
# (--relay-via) and announce the addresses it gives them. Checked:
#  - all four join one open swarm, train and end at the same swarm average;
#    B's and C's neighbours' connections came through the relay (their
#    final lines count them) and their own traffic through the NAT;
#  - the relay cannot read what it carries: every byte it spliced (its
#    RUMOR_RELAY_TAP) holds none of the swarm's terms (model=...), which
#    every HELLO carries; the same swarm in plaintext shows them there (the check can
#    fail);
#  - membership records say how a member is reached: D counts A as direct
#    (and relaying), B and C as relayed;
#  - failover: with relays on A and D, B and C told of A's only (D's they
#    learn from its membership record), A is killed while the swarm trains;
#    B and C register with D's relay within the heartbeat timeout (5 s) and
#    a little more, announce their new addresses through SWIM, and D, B and
#    C train to their end and one swarm average;
#  - a peer whose key is not on the relay's allow-list gets no address: it
#    exits 1 saying the relay did not answer, and the relay counts the
#    refusal.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
netns_test_setup rr

for ns in $P-pub $P-rt $P-b $P-c; do
  ip netns add "$ns" || skip "cannot create a network namespace"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
done
# pub:a0 10.99.1.1, .2 -- rt:a1 10.99.1.254 | rt:b1 10.99.2.254 -- b:b0 10.99.2.2
#                                            | rt:c1 10.99.3.254 -- c:c0 10.99.3.2
ip -n $P-pub link add a0 type veth peer name a1 netns $P-rt &&
  ip -n $P-b link add b0 type veth peer name b1 netns $P-rt &&
  ip -n $P-c link add c0 type veth peer name c1 netns $P-rt &&
  ip -n $P-pub addr add 10.99.1.1/24 dev a0 && ip -n $P-pub addr add 10.99.1.2/24 dev a0 &&
  ip -n $P-pub link set a0 up &&
  ip -n $P-rt addr add 10.99.1.254/24 dev a1 && ip -n $P-rt link set a1 up &&
  ip -n $P-rt addr add 10.99.2.254/24 dev b1 && ip -n $P-rt link set b1 up &&
  ip -n $P-rt addr add 10.99.3.254/24 dev c1 && ip -n $P-rt link set c1 up &&
  ip -n $P-b addr add 10.99.2.2/24 dev b0 && ip -n $P-b link set b0 up &&
  ip -n $P-c addr add 10.99.3.2/24 dev c0 && ip -n $P-c link set c0 up &&
  ip -n $P-b route add default via 10.99.2.254 &&
  ip -n $P-c route add default via 10.99.3.254 &&
  ip netns exec $P-rt sysctl -qw net.ipv4.ip_forward=1 >/dev/null ||
  { fail "cannot wire the namespaces"; finish; }
# the masquerade out to the public side, and no forwarding between the two
# private networks: B and C cannot dial each other either
ip netns exec $P-rt nft -f - <<'EOF' || skip "nft cannot masquerade in a namespace"
table ip nat {
  chain post { type nat hook postrouting priority srcnat; policy accept; oifname "a1" counter masquerade; }
}
table ip filter {
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "b1" oifname "c1" counter drop
    iifname "c1" oifname "b1" counter drop
    iifname "a1" ct state new counter drop
  }
}
EOF

mkdir -p "$tmp/keys" "$tmp/other"
for k in a b c d; do "$peer" keygen "$tmp/keys/$k" >/dev/null || fail "keygen"; done
"$peer" keygen "$tmp/other/e" >/dev/null || fail "keygen"
cp "$tmp/keys/"*.pub "$tmp/other/"

# swarm NAME SECURITY...: the four peers, each until the end; the tap is A's
swarm() {
  name=$1
  shift
  common="--data $FASHION --model mlp:784-32-10 --train-limit 2000 --batch 32 --lr 0.05 --progress 0 --epochs 2
          --min-peers 4 --start-timeout 30 --swarm relay-$name"
  sec() { if [ "$1" = insecure ]; then echo --insecure; else echo --keys "$tmp/keys/$2.key" --allow "$tmp/keys"; fi; }
  RUMOR_RELAY_TAP="$tmp/tap-$name" ip netns exec $P-pub timeout -k 5 90 "$peer" \
    --listen tcp://10.99.1.1:7000 --relay 7001 $(sec "$name" a) $common >"$tmp/$name-a.log" 2>&1 &
  pa=$!
  sleep 0.5
  ip netns exec $P-pub timeout -k 5 90 "$peer" --listen tcp://10.99.1.2:7000 \
    --join a@10.99.1.1:7000 $(sec "$name" d) $common >"$tmp/$name-d.log" 2>&1 &
  pd=$!
  ip netns exec $P-b timeout -k 5 90 "$peer" --listen tcp://10.99.2.2:7000 \
    --relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000 $(sec "$name" b) $common \
    >"$tmp/$name-b.log" 2>&1 &
  pb=$!
  ip netns exec $P-c timeout -k 5 90 "$peer" --listen tcp://10.99.3.2:7000 \
    --relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000 $(sec "$name" c) $common \
    >"$tmp/$name-c.log" 2>&1 &
  pc=$!
  pids="$pa $pd $pb $pc"
  for x in a d b c; do
    eval "wait \$p$x"
    rc=$?
    [ $rc = 0 ] || fail "$name: peer $x exited $rc: $(tail -n 3 "$tmp/$name-$x.log")"
  done
  pids=
}

swarm secure
accs=""
for x in a d b c; do
  acc=$(sed -n 's/.*swarm average test accuracy \([0-9.]*\)% (4 peers alive).*/\1/p' "$tmp/secure-$x.log")
  [ -n "$acc" ] || fail "peer $x printed no swarm average over 4 peers: $(grep -m2 'average\|error' "$tmp/secure-$x.log")"
  accs="$accs ${acc:-none}"
done
echo "relay-nat: swarm averages of A, D, B, C:$accs"
set -- $accs
[ "$1" = "$2" ] && [ "$1" = "$3" ] && [ "$1" = "$4" ] || fail "the four swarm averages differ:$accs"
expect_num_ge "${1:-0}" 70 "the swarm average"
for x in b c; do
  line=$(grep "reached through a relay at tcp://10.99.1.1:.*neighbours' connections" "$tmp/secure-$x.log")
  echo "relay-nat: $x: ${line#*: }"
  n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) neighbours. connections, \([0-9.]*\) MB.*/\1/p')
  mb=$(echo "$line" | sed -n 's/.*connections, \([0-9.]*\) MB.*/\1/p')
  expect_num_ge "${n:-0}" 1 "$x's neighbours' connections through the relay"
  expect_num_ge "${mb:-0}" 0.5 "$x's megabytes through the relay"
done
# how each is reached, as D's membership records say: A directly (and it
# relays), B and C through a relay
line=$(grep "membership: .* offer to relay" "$tmp/secure-d.log")
echo "relay-nat: d: ${line#*: }"
echo "$line" | grep -q "1 peers reached directly, 2 through relays; 1 offer to relay" ||
  fail "D's membership does not say how its peers are reached: $line"
line=$(grep "relayed for" "$tmp/secure-a.log")
echo "relay-nat: a: ${line#*: }"
echo "$line" | grep -q "relayed for 2 peers" || fail "A's relay did not serve B and C: $line"
nat=$(ip netns exec $P-rt nft list table ip nat | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
expect_num_ge "${nat:-0}" 6 "connections masqueraded (B's and C's own: joins, relays, data)"
dropped=$(ip netns exec $P-rt nft list table ip filter | sed -n 's/.*ct state new counter packets \([0-9]*\).*/\1/p')
echo "relay-nat: the router masqueraded $nat connections; dropped $dropped new connections from outside"

# what the relay saw: no terms in clear (every HELLO carries "model=..."),
# where the plaintext swarm's tap shows them
tapped=$(wc -c <"$tmp/tap-secure")
expect_num_ge "$tapped" 100000 "bytes the relay spliced"
grep -a -q "model=mlp:784-32-10" "$tmp/tap-secure" && fail "the relay's bytes hold the swarm's terms in clear"
swarm insecure
grep -a -q "model=mlp:784-32-10" "$tmp/tap-insecure" ||
  fail "the plaintext swarm's relayed bytes do not show its terms: the check above cannot fail"
echo "relay-nat: the relay spliced $tapped bytes of CurveZMQ, none of them in clear"

# failover: A and D both relay; B and C are told of A's relay only and
# learn D's from the membership (D's record offers it). A is killed while
# the swarm trains: B and C register with D within the heartbeat timeout
# (5 s) and a few seconds more, announce their new addresses, and the
# swarm of D, B and C trains to its end
fo="--data $FASHION --model mlp:784-32-10 --train-limit 2000 --batch 32 --lr 0.05 --progress 0
    --epochs 40 --throttle 8 --min-peers 4 --start-timeout 30 --swarm relay-failover"
fsec() { echo --keys "$tmp/keys/$1.key" --allow "$tmp/keys"; }
via="--relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000,d@10.99.1.2:7000"
# no timeout(1) around A: killing it must kill the peer itself (ip netns
# exec execs it; the cleanup kills it should the test stop early)
ip netns exec $P-pub "$peer" --listen tcp://10.99.1.1:7000 --relay 7001 \
  $(fsec a) $fo --no-average >"$tmp/fo-a.log" 2>&1 &
pa=$!
sleep 0.5
ip netns exec $P-pub timeout -k 5 90 "$peer" --listen tcp://10.99.1.2:7000 --relay 7001 \
  --join a@10.99.1.1:7000 $(fsec d) $fo >"$tmp/fo-d.log" 2>&1 &
pd=$!
sleep 0.5
ip netns exec $P-b timeout -k 5 90 "$peer" --listen tcp://10.99.2.2:7000 $via $(fsec b) $fo \
  >"$tmp/fo-b.log" 2>&1 &
pb=$!
ip netns exec $P-c timeout -k 5 90 "$peer" --listen tcp://10.99.3.2:7000 $via $(fsec c) $fo \
  >"$tmp/fo-c.log" 2>&1 &
pc=$!
pids="$pa $pd $pb $pc"
i=0 # until the swarm trains: B's first rounds
while ! grep -q "joined a swarm\|epoch 1/" "$tmp/fo-b.log" 2>/dev/null && [ $i -lt 300 ]; do
  sleep 0.1; i=$((i + 1)); done
sleep 2
killed=$(date +%s.%N)
kill -KILL $pa
wait $pa 2>/dev/null
for x in d b c; do
  eval "wait \$p$x"
  rc=$?
  [ $rc = 0 ] || fail "failover: peer $x exited $rc: $(tail -n 3 "$tmp/fo-$x.log")"
done
pids=
for x in b c; do
  # told of A's relay only: a move to D's is one learned from the membership
  line=$(grep -m1 "registered again, relayed at tcp://10.99.1.2:" "$tmp/fo-$x.log")
  [ -n "$line" ] || { fail "failover: $x did not move to D's relay: $(grep -m3 'relay' "$tmp/fo-$x.log")"; continue; }
  # the log line's time of day against the kill's
  t=$(echo "$line" | sed -n 's/.* \([0-9][0-9]\):\([0-9][0-9]\):\([0-9.]*\) warn.*/\1 \2 \3/p')
  after=$(echo "$t $killed" | awk '{ k = $4 % 86400; s = $1 * 3600 + $2 * 60 + $3; d = s - k; if (d < -43200) d += 86400; printf "%.2f", d }')
  echo "relay-nat: failover: $x registered with D's relay $after s after A was killed"
  expect_num_le "$after" 8 "$x's failover time (heartbeat timeout 5 s)"
  line=$(grep "reached through a relay at .*neighbours' connections" "$tmp/fo-$x.log")
  echo "$line" | grep -q "at tcp://10.99.1.2:" || fail "failover: $x's final relay is not D's: $line"
  echo "relay-nat: failover: $x: ${line#*: }"
done
accs=""
for x in d b c; do
  acc=$(sed -n 's/.*swarm average test accuracy \([0-9.]*\)% (3 peers alive).*/\1/p' "$tmp/fo-$x.log")
  accs="$accs ${acc:-none}"
done
echo "relay-nat: failover: swarm averages of D, B, C:$accs"
set -- $accs
[ "$1" = "$2" ] && [ "$1" = "$3" ] && [ "$1" != none ] || fail "failover: the swarm averages differ:$accs"
grep "relayed for" "$tmp/fo-d.log" | grep -q "relayed for 2 peers" ||
  fail "failover: D's relay did not take B and C: $(grep 'relayed for' "$tmp/fo-d.log")"

# a key not on the relay's allow-list: no address
ip netns exec $P-pub timeout -k 5 60 "$peer" --listen tcp://10.99.1.1:7000 --relay 7001 \
  --keys "$tmp/keys/a.key" --allow "$tmp/keys" --data "$FASHION" --train-limit 500 --epochs 50 \
  --throttle 20 --progress 0 --no-average >"$tmp/r.log" 2>&1 &
pr=$!
pids=$pr
sleep 0.5
ip netns exec $P-b timeout -k 5 60 "$peer" --listen tcp://10.99.2.2:7000 \
  --relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000 --keys "$tmp/other/e.key" \
  --allow "$tmp/other" --data "$FASHION" --start-timeout 3 >"$tmp/e.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "a key not on the relay's allow-list: exit $rc, expected 1: $(tail -n 2 "$tmp/e.log")"
grep -q "relay tcp://10.99.1.1:7001 did not answer" "$tmp/e.log" ||
  fail "the refused peer did not say that the relay did not answer: $(tail -n 2 "$tmp/e.log")"
kill -TERM $pr
wait $pr
pids=
grep -q "refused: [1-9][0-9]* keys" "$tmp/r.log" ||
  fail "the relay did not count the key it refused: $(grep 'relayed for' "$tmp/r.log")"
finish
