#!/bin/sh
# examples/delay-relay, the latency the test harness adds where the kernel
# has no netem: through a relay with a 100 ms round-trip time, a ping-pong
# over one connection takes 100 ms (+-25), a 6 MiB transfer arrives intact
# (same SHA-256) and no faster than its window allows (1 MiB held at most
# over a 50 ms one-way delay: at least 0.25 s), and two rumor-peers whose
# incoming connections each pass through a relay still train together,
# rounds taking at least the added delay; --jitter spreads the delays but
# keeps a stream's order; examples/netns-swarm.sh --delay and --link (as
# root) give a swarm those latencies and an unlike link, and --loss with
# --jitter a lossy, jittery one (nftables drops, TCP retransmits, every
# round runs). Bad arguments are refused.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
command -v ss >/dev/null || skip "ss (iproute2) not found"
relay="$RUMOR_SRCDIR/examples/delay-relay"
swarm_setup
port() { echo "$1" | cut -d, -f"$2" | sed 's/.*://'; }
eps=$(free_endpoints 4)
p_relay=$(port "$eps" 1) p_server=$(port "$eps" 2)

# relay_probe RELAY SERVER PINGS MIB: a server on port SERVER echoes PINGS
# single bytes, then hashes a stream; through the relay at port RELAY,
# prints the ping-pongs' round trips and sends MIB MiB of random bytes,
# which must come back as their SHA-256 (intact, in order). Prints
# "rtts R1 R2 ..." and "stream SECONDS" (seconds) for the checks.
relay_probe() {
  "$py" - "$@" <<'PY'
import hashlib, os, socket, sys, threading, time
relay, server, pings, mib = map(int, sys.argv[1:5])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", server)); ls.listen(4)
def serve():
    c, _ = ls.accept()                       # 1: echo 1 byte, `pings` times
    for _ in range(pings):
        c.sendall(c.recv(1))
    c.close()
    c, _ = ls.accept()                       # 2: hash what arrives
    h = hashlib.sha256()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
    c.sendall(h.hexdigest().encode()); c.close()
threading.Thread(target=serve, daemon=True).start()
for _ in range(100):                         # the relay may still be starting
    try:
        s = socket.create_connection(("127.0.0.1", relay)); break
    except OSError:
        time.sleep(0.05)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(pings):
    t0 = time.monotonic(); s.sendall(b"x"); assert s.recv(1) == b"x"; rtts.append(time.monotonic() - t0)
s.close()
print("rtts " + " ".join("%.4f" % r for r in rtts))
data = os.urandom(mib << 20)
s = socket.create_connection(("127.0.0.1", relay))
t0 = time.monotonic(); s.sendall(data); s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(1 << 16)
    if not b:
        break
    got += b
assert got.decode() == hashlib.sha256(data).hexdigest(), "the bytes changed or were reordered on the way"
print("stream %.3f" % (time.monotonic() - t0))
PY
}
# rtt_stats FILE: "min median max deviation" of FILE's round trips, in ms
rtt_stats() {
  sed -n 's/^rtts //p' "$1" | tr ' ' '\n' | sort -n | awk '
    { r[NR] = $1 * 1000; s += r[NR]; q += r[NR] * r[NR] }
    END { m = s / NR; printf "%.1f %.1f %.1f %.1f\n", r[1], r[int(NR / 2) + 1], r[NR], sqrt(q / NR - m * m) }'
}

"$py" "$relay" "127.0.0.1:$p_relay" "127.0.0.1:$p_server" --delay 100 --window 1048576 \
  >"$tmp/relay.log" 2>&1 &
pids="$pids $!"
relay_probe "$p_relay" "$p_server" 20 6 >"$tmp/probe.out" || fail "through the relay: $(tail -1 "$tmp/probe.out")"
set -- $(rtt_stats "$tmp/probe.out")
echo "ping-pong through the relay: median $2 ms, min $1 ms (RTT 100 ms)"
awk -v lo="$1" -v med="$2" 'BEGIN { exit !(med >= 75 && med <= 125 && lo >= 95) }' ||
  fail "ping-pongs through a 100 ms relay: min $1, median $2 ms"
dt=$(sed -n 's/^stream //p' "$tmp/probe.out")
echo "6 MiB through the relay in ${dt:-?} s (window 1 MiB over 50 ms: at least 0.25 s)"
expect_num_ge "${dt:-0}" 0.25 "6 MiB through a 1 MiB window over 50 ms"

# --jitter: one-way delays spread over [10, 50] ms around 30 (RTT 60, jitter
# 40); ping-pongs take 20-100 ms and vary, and a stream's bytes keep their
# order (a chunk never overtakes the one before)
p_jr=$(port "$eps" 3) p_js=$(port "$eps" 4)
"$py" "$relay" "127.0.0.1:$p_jr" "127.0.0.1:$p_js" --delay 60 --jitter 40 --seed 7 \
  >>"$tmp/relay.log" 2>&1 &
pj=$!
relay_probe "$p_jr" "$p_js" 40 3 >"$tmp/jitter.out" ||
  fail "through the jittering relay: $(tail -1 "$tmp/jitter.out")"
kill "$pj" 2>/dev/null; wait "$pj" 2>/dev/null
set -- $(rtt_stats "$tmp/jitter.out")
echo "ping-pong with 40 ms of jitter: $1 - $3 ms, median $2, deviation $4 ms; 3 MiB arrived in order"
awk -v lo="$1" -v hi="$3" -v sd="$4" 'BEGIN { exit !(lo >= 19 && hi <= 125 && sd >= 6 && hi - lo >= 25) }' ||
  fail "ping-pongs through 40 ms of jitter: $1 - $3 ms, deviation $4 ms"

# two peers, each one's incoming connection through a relay: 40 ms RTT
ep_a=$(port "$eps" 3) ep_b=$(port "$eps" 4)
i_a=$((ep_a + 1)) i_b=$((ep_b + 1))
ss -Htln | grep -q ":$i_a \|:$i_b " && skip "ports $i_a/$i_b in use"
for pair in "$ep_a $i_a" "$ep_b $i_b"; do
  set -- $pair
  "$py" "$relay" "127.0.0.1:$1" "127.0.0.1:$2" --delay 40 >>"$tmp/relay.log" 2>&1 &
  pids="$pids $!"
done
peers="tcp://127.0.0.1:$ep_a,tcp://127.0.0.1:$ep_b"
for r in 0 1; do
  [ $r = 0 ] && l=$i_a || l=$i_b
  timeout 120 "$RUMOR_BUILDDIR/rumor-peer" --insecure --rank $r --peers "$peers" \
    --listen "tcp://127.0.0.1:$l" --data text:/usr/share/common-licenses/GPL-3 \
    --model gpt:layers=1,dim=16,heads=2,ctx=16 --batch 4 --rounds 30 --no-average \
    --progress 0 --metrics "$tmp/d$r.jsonl" >"$tmp/d$r.log" 2>&1 &
  eval "pd$r=\$!"
done
wait "$pd0"; expect_rc 0 $? "peer 0 behind a 40 ms relay" "$tmp/d0.log"
wait "$pd1"; expect_rc 0 $? "peer 1 behind a 40 ms relay" "$tmp/d1.log"
secs=$(metrics_field "$tmp/d0.jsonl" done seconds)
echo "30 rounds over a 40 ms RTT: ${secs:-?} s"
expect_num_ge "${secs:-0}" 0.6 "30 rounds, each waiting at least the 20 ms one-way delay"

# the network-namespace harness: 3 peers, 60 ms RTT, peer 2 on a 10 Mbit/s
# line. Its 0.19 MB model goes to 2 neighbours a round: 3 Mbit, 0.3 s on
# that line, so 10 rounds take at least 2.4 s (0.8 of it) where 100 Mbit/s
# links with the delay alone would take about 0.4 s.
if [ "$(id -u)" = 0 ] && ip netns list >/dev/null 2>&1 && command -v tc >/dev/null; then
  timeout 120 bash "$RUMOR_SRCDIR/examples/netns-swarm.sh" -n 3 --delay 60 --link 2=10mbit \
    --no-follow --timeout 90 --run-dir "$tmp/netns" --bin "$RUMOR_BUILDDIR/rumor-peer" -- \
    --insecure --data text:/usr/share/common-licenses/GPL-3 --model gpt:layers=3,dim=32,heads=2,ctx=32 \
    --batch 4 --rounds 10 --no-average --progress 0 >"$tmp/netns.out" 2>&1
  expect_rc 0 $? "netns-swarm.sh --delay 60 --link 2=10mbit" "$tmp/netns.out"
  s2=$(metrics_field "$tmp/netns/peer2.jsonl" done seconds)
  s0=$(metrics_field "$tmp/netns/peer0.jsonl" done seconds)
  echo "netns, 60 ms RTT, peer 2 at 10 Mbit/s: 10 rounds in ${s0:-?} s (peer 0), ${s2:-?} s (peer 2)"
  expect_num_ge "${s2:-0}" 2.4 "10 rounds with a 10 Mbit/s line carrying 3 Mbit a round"
  grep -q "RTT 60 ms" "$tmp/netns/relay0.log" || fail "no relay in front of peer 0: $(cat "$tmp/netns/relay0.log")"
  # a lossy, jittery swarm: 2% of the packets into every peer dropped by
  # nftables, one-way delays spread by 20 ms; TCP retransmits, the rounds
  # all run
  if command -v nft >/dev/null; then
    timeout 120 bash "$RUMOR_SRCDIR/examples/netns-swarm.sh" -n 3 --delay 40 --jitter 20 --loss 2 \
      --no-follow --timeout 90 --run-dir "$tmp/lossy" --bin "$RUMOR_BUILDDIR/rumor-peer" -- \
      --insecure --data text:/usr/share/common-licenses/GPL-3 --model gpt:layers=3,dim=32,heads=2,ctx=32 \
      --batch 4 --rounds 20 --no-average --progress 0 >"$tmp/lossy.out" 2>&1
    expect_rc 0 $? "netns-swarm.sh --delay 40 --jitter 20 --loss 2" "$tmp/lossy.out"
    net=$(grep '^TCP:' "$tmp/lossy.out")
    echo "netns, 2% loss, 40 ms RTT with 20 ms of jitter: $net"
    lost=$(echo "$net" | sed -n 's/.*--loss dropped \([0-9]*\).*/\1/p')
    re=$(echo "$net" | sed -n 's/.*, \([0-9]*\) retransmitted.*/\1/p')
    expect_num_ge "${lost:-0}" 1 "packets dropped by --loss 2"
    expect_num_ge "${re:-0}" 1 "TCP segments retransmitted after the drops"
    for k in 0 1 2; do
      r=$(metrics_field "$tmp/lossy/peer$k.jsonl" done rounds)
      [ "${r:-0}" = 20 ] || fail "lossy swarm: peer $k ran ${r:-no} rounds of 20"
    done
    grep -q "jitter 20 ms" "$tmp/lossy/relay0.log" || fail "no jitter at peer 0's relay: $(cat "$tmp/lossy/relay0.log")"
  else
    echo "(nft not installed: the lossy swarm is skipped)"
  fi
else
  echo "(network namespaces need root and iproute2: the harness part is skipped)"
fi

run_expect 2 "expected HOST:PORT" "$py" "$relay" "127.0.0.1" "127.0.0.1:1" --delay 10
run_expect 2 "expected 0 to 60000 ms" "$py" "$relay" "127.0.0.1:1" "127.0.0.1:2" --delay -5
run_expect 2 "at least 65536" "$py" "$relay" "127.0.0.1:1" "127.0.0.1:2" --delay 5 --window 10
run_expect 2 "expected 0 to --delay" "$py" "$relay" "127.0.0.1:1" "127.0.0.1:2" --delay 5 --jitter 10
if [ "$(id -u)" = 0 ] && ip netns list >/dev/null 2>&1; then
  run_expect 2 "needs --delay" bash "$RUMOR_SRCDIR/examples/netns-swarm.sh" --jitter 10 --setup-only
  run_expect 2 "expected 0 to 50" bash "$RUMOR_SRCDIR/examples/netns-swarm.sh" --loss 60 --setup-only
fi
finish
