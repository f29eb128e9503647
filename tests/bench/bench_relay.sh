#!/bin/sh
# bench_relay.sh: a peer behind a NAT reached through a relay, against the
# same peer reached directly, on the same shaped links (network namespaces,
# tbf in both directions of every link, a real nftables masquerade).
#
#   a (10.97.1.1)  public peer, the swarm's founder
#   r (10.97.2.1)  rumor-peer relay (a relay alone)
#   b (10.97.3.2)  the other peer: dialled directly in the first run; in the
#                  second behind the router's masquerade (nothing dials in),
#                  registered with r (--relay-via)
#
# Two peers gossip the MLP 784-256-256-10 (1.08 MB a round each way) with
# CurveZMQ for a fixed number of rounds; the links carry RATE each way.
# Figures (each a run's own, the ratio within this run):
#   relay_rounds_per_s_ratio   b's rounds a second relayed / direct (>= 0.8
#                              is the target; the relay's hop adds latency,
#                              not a bottleneck, when its links are as fast)
#   relay_join_s, direct_join_s  b's start to its first round (joining
#                              through the relay includes registering)
# The failover time is measured by tests/test_relay_nat.sh and test_relay.
#
# Exits 77 (skip) when not root or when namespaces, nft or tbf do not work.
# Environment: RUMOR_BUILDDIR, RUMOR_SRCDIR (make bench);
#   RUMOR_BENCH_RELAY_RATE (default 50mbit), RUMOR_BENCH_RELAY_ROUNDS (40).
set -u
SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
RATE=${RUMOR_BENCH_RELAY_RATE:-50mbit}
ROUNDS=${RUMOR_BENCH_RELAY_ROUNDS:-40}
FASHION=${RUMOR_DATA:-/usr/share/datasets/fashion-mnist}
peer=$BUILDDIR/rumor-peer
skip() { echo "bench_relay: skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not found"
command -v nft >/dev/null 2>&1 || skip "nft (nftables) not found"
command -v tc >/dev/null 2>&1 || skip "tc not found"
[ -x "$peer" ] || skip "rumor-peer is not built"
[ -r "$FASHION/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION"

P=rb$$
tmp=$(mktemp -d)
pids=
cleanup() {
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do ip netns del "$ns"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ns in $P-a $P-r $P-b $P-rt; do
  ip netns add "$ns" || skip "cannot create a network namespace"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
done
# x0 in namespace x, its router side rx; 10.97.N.0/24 each, the router .254
n=1
for x in a r b; do
  addr=10.97.$n.1
  [ $x = b ] && addr=10.97.$n.2
  ip -n $P-$x link add ${x}0 type veth peer name r$x netns $P-rt &&
    ip -n $P-$x addr add $addr/24 dev ${x}0 && ip -n $P-$x link set ${x}0 up &&
    ip -n $P-rt addr add 10.97.$n.254/24 dev r$x && ip -n $P-rt link set r$x up &&
    ip -n $P-$x route add default via 10.97.$n.254 || skip "cannot wire the namespaces"
  # the link, both ways: this namespace's upload and the router's to it
  ip netns exec $P-$x tc qdisc add dev ${x}0 root tbf rate "$RATE" burst 64k latency 50ms &&
    ip netns exec $P-rt tc qdisc add dev r$x root tbf rate "$RATE" burst 64k latency 50ms ||
    skip "tbf does not work in a namespace here"
  n=$((n + 1))
done
ip netns exec $P-rt sysctl -qw net.ipv4.ip_forward=1 >/dev/null

mkdir -p "$tmp/keys"
for k in a r b; do "$peer" keygen "$tmp/keys/$k" >/dev/null || exit 1; done
sec() { echo --keys "$tmp/keys/$1.key" --allow "$tmp/keys"; }
common="--data $FASHION --model mlp:784-256-256-10 --train-limit 6000 --batch 32 --rounds $ROUNDS
        --min-peers 2 --start-timeout 30 --no-average -q --progress 0"

# run NAME [B's options]: a and b for ROUNDS rounds; b's rounds a second and
# its start to its first round
run() {
  name=$1
  shift
  ip netns exec $P-a timeout -k 5 120 "$peer" --listen tcp://10.97.1.1:7000 $(sec a) $common \
    >"$tmp/$name-a.log" 2>&1 &
  pa=$!
  pids="$pids $pa"
  sleep 0.5
  t0=$(date +%s.%N)
  ip netns exec $P-b timeout -k 5 120 "$peer" --listen tcp://10.97.3.2:7000 \
    --join a@10.97.1.1:7000 $(sec b) $common --metrics "$tmp/$name-b.jsonl" "$@" \
    >"$tmp/$name-b.log" 2>&1
  rcb=$?
  wait $pa
  rca=$?
  if [ $rca != 0 ] || [ $rcb != 0 ]; then
    echo "bench_relay: $name: exit $rca and $rcb"; tail -n 3 "$tmp/$name-a.log" "$tmp/$name-b.log"
    exit 1
  fi
  line=$(grep "done:" "$tmp/$name-b.log")
  secs=$(echo "$line" | sed -n 's/.* rounds ([0-9]* run here) in \([0-9.]*\) s.*/\1/p')
  run=$(echo "$line" | sed -n 's/.* rounds (\([0-9]*\) run here).*/\1/p')
  start=$(sed -n 's/^{"time":\([0-9.]*\),.*"event":"start".*/\1/p' "$tmp/$name-b.jsonl" | head -1)
  eval "${name}_rps=\$(awk -v r=\"\$run\" -v s=\"\$secs\" 'BEGIN { printf \"%.3f\", r / s }')"
  eval "${name}_join=\$(awk -v a=\"\$start\" -v b=\"\$t0\" 'BEGIN { printf \"%.2f\", a - b }')"
}

run direct
# b behind the masquerade: nothing dials in, so the relay it is
ip netns exec $P-rt nft -f - <<'EOF' || skip "nft cannot masquerade in a namespace"
table ip nat {
  chain post { type nat hook postrouting priority srcnat; policy accept; iifname "rb" counter masquerade; }
}
table ip filter {
  chain forward {
    type filter hook forward priority filter; policy accept;
    oifname "rb" ct state new counter drop
  }
}
EOF
ip netns exec $P-r timeout -k 5 300 "$peer" relay --listen tcp://10.97.2.1:7100 \
  --keys "$tmp/keys/r.key" --allow "$tmp/keys" --status-every 0 >"$tmp/relay.log" 2>&1 &
pr=$!
pids="$pids $pr"
sleep 0.3
run relayed --relay-via r@10.97.2.1:7100
kill -TERM $pr
wait $pr
grep -q "reached through a relay at tcp://10.97.2.1:" "$tmp/relayed-b.log" ||
  { echo "bench_relay: b was not relayed"; exit 1; }
dropped=$(ip netns exec $P-rt nft list table ip filter | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
echo "bench_relay: $RATE links; b direct: $direct_rps rounds/s, joined in $direct_join s;" \
  "relayed: $relayed_rps rounds/s, joined in $relayed_join s ($dropped dials into the NAT dropped)"
echo "bench_relay: $(grep 'relayed for' "$tmp/relay.log" | sed 's/^rumor-peer relay: //')"
echo "bench: relay_direct_rounds_per_s = $direct_rps rounds/s"
echo "bench: relay_relayed_rounds_per_s = $relayed_rps rounds/s"
echo "bench: relay_rounds_per_s_ratio = $(awk -v a="$relayed_rps" -v b="$direct_rps" 'BEGIN { printf "%.3f", a / b }') x"
echo "bench: relay_direct_join_s = $direct_join s"
echo "bench: relay_relayed_join_s = $relayed_join s"
