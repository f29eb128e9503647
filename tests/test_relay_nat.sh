#!/bin/sh
# Peers behind real NATs reached through a relay (network namespaces and
# nftables masquerades, no mocks). Two public peers, A (a relay: --relay)
# and D, on 10.99.1.0/24; two routers masquerade a private network each out
# to it, B's 10.99.2.0/24 and C's 10.99.3.0/24, and let in nothing their
# inside did not start: nobody can dial B or C. B and C register with A's
# relay (--relay-via) and announce the addresses it gives them. Checked:
#  - all four join one open swarm, train and end at the same swarm average;
#    B's and C's neighbours' connections came through the relay (their
#    final lines count them) and their own traffic through the NAT;
#  - the relay cannot read what it carries: every byte it spliced (its
#    RUMOR_RELAY_TAP) holds none of the swarm's terms (model=...), which
#    every HELLO carries; the same swarm in plaintext shows them there (the check can
#    fail);
#  - B and C punch direct paths to each other through both NATs (TCP
#    simultaneous open, coordinated through A's relay): their final lines
#    count direct connections and each router forwards hundreds of packets
#    to the other's NAT address; with --no-hole-punch none, all relayed;
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

for ns in $P-pub $P-rb $P-rc $P-b $P-c; do
  ip netns add "$ns" || skip "cannot create a network namespace"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
done
# the public network, a bridge in pub: A 10.99.1.1 and D .2 on it, and the
# two routers' outside ends, rb .253 and rc .252; behind them B and C
#   pub:br0 -- rb:wan 10.99.1.253 | rb:b1 10.99.2.254 -- b:b0 10.99.2.2
#           -- rc:wan 10.99.1.252 | rc:c1 10.99.3.254 -- c:c0 10.99.3.2
ip -n $P-pub link add br0 type bridge && ip -n $P-pub link set br0 up &&
  ip -n $P-pub addr add 10.99.1.1/24 dev br0 && ip -n $P-pub addr add 10.99.1.2/24 dev br0 &&
  ip -n $P-pub link add pb type veth peer name wan netns $P-rb &&
  ip -n $P-pub link add pc type veth peer name wan netns $P-rc &&
  ip -n $P-pub link set pb master br0 && ip -n $P-pub link set pb up &&
  ip -n $P-pub link set pc master br0 && ip -n $P-pub link set pc up &&
  ip -n $P-b link add b0 type veth peer name b1 netns $P-rb &&
  ip -n $P-c link add c0 type veth peer name c1 netns $P-rc &&
  ip -n $P-rb addr add 10.99.1.253/24 dev wan && ip -n $P-rb link set wan up &&
  ip -n $P-rc addr add 10.99.1.252/24 dev wan && ip -n $P-rc link set wan up &&
  ip -n $P-rb addr add 10.99.2.254/24 dev b1 && ip -n $P-rb link set b1 up &&
  ip -n $P-rc addr add 10.99.3.254/24 dev c1 && ip -n $P-rc link set c1 up &&
  ip -n $P-b addr add 10.99.2.2/24 dev b0 && ip -n $P-b link set b0 up &&
  ip -n $P-c addr add 10.99.3.2/24 dev c0 && ip -n $P-c link set c0 up &&
  ip -n $P-b route add default via 10.99.2.254 &&
  ip -n $P-c route add default via 10.99.3.254 &&
  ip netns exec $P-rb sysctl -qw net.ipv4.ip_forward=1 >/dev/null &&
  ip netns exec $P-rc sysctl -qw net.ipv4.ip_forward=1 >/dev/null ||
  { fail "cannot wire the namespaces"; finish; }
# each router masquerades its private network and, as home routers do,
# lets nothing in that the inside did not start (dropped, not refused).
# Counters: "direct", packets to the other NAT's address (a punched path);
# "new", connections from outside dropped
nat() { # NAMESPACE LAN OTHER-NAT
  ip netns exec "$1" nft -f - <<EOF
table ip nat {
  chain post { type nat hook postrouting priority srcnat; policy accept; oifname "wan" counter masquerade; }
}
table ip filter {
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "$2" ip daddr $3 counter comment "direct"
    iifname "wan" ct state new counter drop comment "new"
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "wan" ct state new counter drop
  }
}
EOF
}
nat $P-rb b1 10.99.1.252 && nat $P-rc c1 10.99.1.253 || skip "nft cannot masquerade in a namespace"
# counter NAMESPACE TABLE WHAT: the packets of the rule with comment WHAT
# (masquerade: the nat table's rule)
counter() {
  ip netns exec "$1" nft list table ip "$2" |
    sed -n "s/.*counter packets \([0-9]*\) .*$3.*/\1/p" | head -n 1
}

mkdir -p "$tmp/keys" "$tmp/other"
for k in a b c d; do "$peer" keygen "$tmp/keys/$k" >/dev/null || fail "keygen"; done
"$peer" keygen "$tmp/other/e" >/dev/null || fail "keygen"
cp "$tmp/keys/"*.pub "$tmp/other/"

# swarm NAME [OPTION...]: the four peers, each until the end, OPTIONs B's
# and C's; the tap is A's
swarm() {
  name=$1
  shift
  common="--data $FASHION --model mlp:784-32-10 --train-limit 2000 --batch 32 --lr 0.05 --progress 0 --epochs 2
          --topology complete --min-peers 4 --start-timeout 30 --swarm relay-$name"
  sec() { if [ "$1" = insecure ]; then echo --insecure; else echo --keys "$tmp/keys/$2.key" --allow "$tmp/keys"; fi; }
  RUMOR_RELAY_TAP="$tmp/tap-$name" ip netns exec $P-pub timeout -k 5 90 "$peer" \
    --listen tcp://10.99.1.1:7000 --relay 7001 $(sec "$name" a) $common >"$tmp/$name-a.log" 2>&1 &
  pa=$!
  sleep 0.5
  ip netns exec $P-pub timeout -k 5 90 "$peer" --listen tcp://10.99.1.2:7000 \
    --join a@10.99.1.1:7000 $(sec "$name" d) $common >"$tmp/$name-d.log" 2>&1 &
  pd=$!
  ip netns exec $P-b timeout -k 5 90 "$peer" --listen tcp://10.99.2.2:7000 \
    --relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000 $(sec "$name" b) $common "$@" \
    >"$tmp/$name-b.log" 2>&1 &
  pb=$!
  ip netns exec $P-c timeout -k 5 90 "$peer" --listen tcp://10.99.3.2:7000 \
    --relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000 $(sec "$name" c) $common "$@" \
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
for x in b c; do
  nat=$(counter $P-r$x nat masquerade)
  expect_num_ge "${nat:-0}" 3 "connections $x's router masqueraded ($x's own: join, relay, data)"
  echo "relay-nat: $x's router masqueraded ${nat:-0} connections; dropped $(counter $P-r$x filter '"new"') from outside"
done
# B and C, behind two NATs and one relay, punched direct paths to each
# other: their final lines count them, and each router forwarded their
# traffic (a complete graph: each round's parameters) to the other's NAT
# address, which no relayed byte is sent to
for x in b c; do
  line=$(grep "connections with peers behind the same relay" "$tmp/secure-$x.log")
  echo "relay-nat: $x: ${line#*: }"
  d=$(echo "$line" | sed -n 's/.*relay: \([0-9]*\) direct.*/\1/p')
  ok=$(echo "$line" | sed -n 's/.*hole punches: \([0-9]*\) of.*/\1/p')
  expect_num_ge "${d:-0}" 1 "$x's direct connections with a peer behind the same relay"
  expect_num_ge "${ok:-0}" 1 "$x's hole punches that made a direct path"
  pk=$(counter $P-r$x filter '"direct"')
  expect_num_ge "${pk:-0}" 500 "packets $x's router sent straight to the other NAT"
  echo "relay-nat: $x's router sent ${pk:-0} packets straight to the other NAT"
done

# what the relay saw: no terms in clear (every HELLO carries "model=..."),
# where the plaintext swarm's tap shows them
tapped=$(wc -c <"$tmp/tap-secure")
expect_num_ge "$tapped" 100000 "bytes the relay spliced"
grep -a -q "model=mlp:784-32-10" "$tmp/tap-secure" && fail "the relay's bytes hold the swarm's terms in clear"
# without hole punching: all of it through the relay
before=$(counter $P-rb filter '"direct"')
swarm insecure --no-hole-punch
grep -q "same relay: 0 direct, 0 relayed; hole punches: 0 of 0" "$tmp/insecure-b.log" ||
  fail "B with --no-hole-punch: $(grep 'same relay' "$tmp/insecure-b.log")"
[ "$(counter $P-rb filter '"direct"')" = "$before" ] ||
  fail "B with --no-hole-punch sent packets straight to C's NAT"
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
# (relayed paths only: B's and C's punched paths to each other would
# outlive A, and the pair would train on alone meanwhile, to its end)
via="--relay-via a@10.99.1.1:7001 --join a@10.99.1.1:7000,d@10.99.1.2:7000 --no-hole-punch"
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
