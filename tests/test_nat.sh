#!/bin/sh
# Reachability behind a real NAT (network namespaces and an nftables
# masquerade, no mocks): a public peer A (10.99.1.1) runs an open swarm; a
# router namespace forwards for a private network (10.99.2.0/24) and
# masquerades its traffic out, as a home router does. Peer B, behind it,
# joins A: its CurveZMQ connection to A comes up (through the NAT, which
# counts it), but A cannot dial B's address back, so B never hears from the
# swarm. B must fail at start saying that it reached A and that nothing
# came back to its address (the others cannot dial it), not that nobody
# answered. Peer C, on the public side (the router's outer address), joins
# the same swarm and trains. The same check on a fixed list: B listed with
# A warns that its neighbours cannot reach it.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
netns_test_setup rn

for ns in $P-pub $P-rt $P-nat; do
  ip netns add "$ns" || skip "cannot create a network namespace"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
done
# pub:a0 10.99.1.1 -- rt:a1 10.99.1.254 | rt:b1 10.99.2.254 -- nat:b0 10.99.2.2
ip -n $P-pub link add a0 type veth peer name a1 netns $P-rt &&
  ip -n $P-nat link add b0 type veth peer name b1 netns $P-rt &&
  ip -n $P-pub addr add 10.99.1.1/24 dev a0 && ip -n $P-pub link set a0 up &&
  ip -n $P-rt addr add 10.99.1.254/24 dev a1 && ip -n $P-rt link set a1 up &&
  ip -n $P-rt addr add 10.99.2.254/24 dev b1 && ip -n $P-rt link set b1 up &&
  ip -n $P-nat addr add 10.99.2.2/24 dev b0 && ip -n $P-nat link set b0 up &&
  ip -n $P-nat route add default via 10.99.2.254 &&
  ip netns exec $P-rt sysctl -qw net.ipv4.ip_forward=1 >/dev/null ||
  { fail "cannot wire the namespaces"; finish; }
printf 'table ip nat {\n chain post {\n  type nat hook postrouting priority srcnat; policy accept;\n  oifname "a1" counter masquerade\n }\n}\n' |
  ip netns exec $P-rt nft -f - || skip "nft cannot masquerade in a namespace"
# the public side has no route to 10.99.2.0/24: nothing dials in, as on the internet
ip -n $P-pub route get 10.99.2.2 >/dev/null 2>&1 && fail "the public side has a route to the private network"
ip -n $P-nat route get 10.99.1.1 >/dev/null 2>&1 || fail "the private side has no route to the public one"

mkdir -p "$tmp/keys"
for k in a b c; do "$peer" keygen "$tmp/keys/$k" >/dev/null || fail "keygen"; done
sec() { echo --keys "$tmp/keys/$1.key" --allow "$tmp/keys"; }
common="--data $FASHION --train-limit 2000 --batch 32 --lr 0.05 --progress 0"

# A: the open swarm's first peer, on the public side, for as long as needed
ip netns exec $P-pub timeout -k 5 120 "$peer" --listen tcp://10.99.1.1:7000 $(sec a) $common \
  --epochs 200 --throttle 20 --no-average >"$tmp/a.log" 2>&1 &
pids="$pids $!"
sleep 1
# B behind the NAT: its connection to A comes up, nothing comes back
ip netns exec $P-nat timeout -k 5 60 "$peer" --listen tcp://10.99.2.2:7000 --join 10.99.1.1:7000 \
  $(sec b) $common --epochs 1 --start-timeout 6 >"$tmp/b.log" 2>&1
rc=$?
echo "behind the NAT: $(grep -m1 'rumor-peer' "$tmp/b.log" | grep -v WARNING | tail -1)"
[ $rc = 1 ] || fail "the peer behind the NAT exited $rc, expected 1: $(tail -n 2 "$tmp/b.log")"
grep -q "reached tcp://10.99.1.1:7000 (the CurveZMQ handshake completed) but nothing came back to its address tcp://10.99.2.2:7000" "$tmp/b.log" ||
  fail "the peer behind the NAT did not say that it reached A and nobody reached it: $(tail -n 2 "$tmp/b.log")"
grep -q "cannot dial it" "$tmp/b.log" || fail "no 'cannot dial it' in: $(tail -n 2 "$tmp/b.log")"
# said early too: 3 s after its connection to A came up, not at the timeout
grep -q "no peer dialled its address tcp://10.99.2.2:7000 back within 3 s" "$tmp/b.log" ||
  fail "the peer behind the NAT did not say early that nobody dialled it back: $(grep -m2 'warn' "$tmp/b.log")"
nat=$(ip netns exec $P-rt nft list table ip nat | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
[ "${nat:-0}" -gt 0 ] || fail "no connection went through the masquerade (counter ${nat:-none})"
echo "the router masqueraded ${nat:-0} packets of B's"

# C on the public side: joins and trains with A
RUMOR_LOG=info ip netns exec $P-rt timeout -k 5 60 "$peer" --listen tcp://10.99.1.254:7001 --join 10.99.1.1:7000 \
  $(sec c) $common --epochs 1 --no-average >"$tmp/c.log" 2>&1 ||
  fail "the public joiner failed: $(tail -n 2 "$tmp/c.log")"
# (B left A's swarm a moment ago and may still be in its view, not yet
# declared dead: a newcomer to a running swarm does not wait for it)
grep -q "joined a swarm of [23] peers alive" "$tmp/c.log" ||
  fail "the public joiner did not join A: $(grep -m2 'joined\|error' "$tmp/c.log")"
grep -q "nothing came back\|cannot dial\|dialled its address" "$tmp/c.log" &&
  fail "the public joiner was called unreachable"
# ... and said at start that A dialled it back (A's HELLO echoed its nonce)
grep -q "reachable: peer [0-9a-f]* dialled this peer's address tcp://10.99.1.254:7001 back, echoing its nonce" "$tmp/c.log" ||
  fail "the public joiner did not say that it is reachable: $(grep -m2 'reach' "$tmp/c.log")"
for p in $pids; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
pids=

# a fixed list: A and B listed, B behind the NAT: B warns that its
# neighbour cannot reach it
eps=tcp://10.99.1.1:7002,tcp://10.99.2.2:7002
mkdir -p "$tmp/lkeys"
for k in 0 1; do "$peer" keygen "$tmp/lkeys/peer-$k" >/dev/null || fail "keygen"; done
lsec() { echo --keys "$tmp/lkeys/peer-$1.key" --allow "$tmp/lkeys"; }
ip netns exec $P-pub timeout -k 5 60 "$peer" --rank 0 --peers "$eps" $(lsec 0) $common --epochs 1 \
  --start-timeout 4 --round-timeout 1 --no-average >"$tmp/la.log" 2>&1 &
pids="$pids $!"
ip netns exec $P-nat timeout -k 5 60 "$peer" --rank 1 --peers "$eps" $(lsec 1) $common --epochs 1 \
  --start-timeout 4 --round-timeout 1 --no-average >"$tmp/lb.log" 2>&1
for p in $pids; do wait "$p" 2>/dev/null; done
pids=
grep -q "none of them reached it at tcp://10.99.2.2:7002" "$tmp/lb.log" ||
  fail "B on the list did not warn that its neighbours cannot reach it: $(grep -m3 'WARN\|warn' "$tmp/lb.log")"
grep -q "none of them reached it" "$tmp/la.log" && fail "A on the list was called unreachable"
finish
