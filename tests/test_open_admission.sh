#!/bin/sh
# Who gets into an open swarm (CurveZMQ on), and what a peer says when it
# cannot get in:
#   - a founder and two joiners with keys on the allow-list: one names the
#     seed's key (peer-a@HOST:PORT), the other gives the bare address and
#     finds the key by trying the allow-list's; all three train together
#     (views of 3, a swarm average over 3);
#   - an intruder whose key is on no peer's allow-list, pointed at the
#     founder, exits 1 within --start-timeout (+ a margin) saying nobody
#     answered and naming its allow-list key as a cause; the founder counts
#     it as not_listed;
#   - a join address where nobody listens: exit 1, the address named;
#   - bad command lines exit 2 before joining anyone: a malformed --join, a
#     --join with --rank, --mode allreduce in an open swarm, a --listen that
#     binds every interface without --advertise, a seed key not on the list.
# Nothing hangs: every process runs under timeout(1).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

mkdir -p "$tmp/keys" "$tmp/other"
for k in a b c; do "$RUMOR_PEER" keygen "$tmp/keys/peer-$k" >/dev/null || fail "keygen"; done
"$RUMOR_PEER" keygen "$tmp/other/intruder" >/dev/null || fail "keygen"
set -- $(free_endpoints 5 | tr ',' ' ')
A=$1 B=$2 C=$3 D=$4 E=$5
common="--data $FASHION --train-limit 3000 --rounds 300 --throttle 4 --progress 0 --allow $tmp/keys --log-level info --start-timeout 20"
run() { # NAME LISTEN KEY [OPTIONS]
  _n=$1 _l=$2 _k=$3; shift 3
  timeout 120 "$RUMOR_PEER" --listen "$_l" --keys "$_k" $common --metrics "$tmp/$_n.jsonl" "$@" \
    >"$tmp/$_n.log" 2>&1 &
  eval "pid_$_n=\$!"
}
run a "$A" "$tmp/keys/peer-a.key" --min-peers 3
sleep 0.3
run b "$B" "$tmp/keys/peer-b.key" --join "peer-a@${A#tcp://}"
run c "$C" "$tmp/keys/peer-c.key" --join "${A#tcp://}"

# the intruder: its own allow-list holds the swarm's keys and its own; the
# swarm's does not hold its key
cp "$tmp/keys/"*.pub "$tmp/other/"
t0=$(date +%s)
timeout 60 "$RUMOR_PEER" --listen "$D" --keys "$tmp/other/intruder.key" $common --allow "$tmp/other" \
  --join "${A#tcp://}" --start-timeout 5 >"$tmp/intruder.log" 2>&1
rc=$?; t1=$(date +%s)
expect_rc 1 $rc "the intruder" "$tmp/intruder.log"
grep -q "no peer answered at $A within 5.0 s.*key is on its allow-list" "$tmp/intruder.log" ||
  fail "the intruder's message: $(tail -n 2 "$tmp/intruder.log")"
expect_num_lt "$((t1 - t0))" 30 "seconds the intruder took to give up"
# nobody at the address
timeout 60 "$RUMOR_PEER" --listen "$E" --keys "$tmp/keys/peer-c.key" $common --join "127.0.0.1:1" \
  --start-timeout 3 >"$tmp/nobody.log" 2>&1
expect_rc 1 $? "a join address where nobody listens" "$tmp/nobody.log"
grep -q "no peer answered at tcp://127.0.0.1:1 within 3.0 s" "$tmp/nobody.log" ||
  fail "the message for a silent address: $(tail -n 2 "$tmp/nobody.log")"

for n in a b c; do eval "wait \$pid_$n"; expect_rc 0 $? "peer $n" "$tmp/$n.log"; done
grep -q "holds key" "$tmp/c.log" || fail "c did not find the seed's key by trying: $(grep -i key "$tmp/c.log" | head -3)"
for n in a b c; do
  grep -q "swarm average test accuracy .* (3 peers alive)" "$tmp/$n.log" ||
    fail "$n: no average over 3: $(grep 'swarm average' "$tmp/$n.log")"
done
nl=$(sed -n 's/.*"connections":{[^}]*"not_listed":\([0-9]*\).*/\1/p' "$tmp/a.jsonl" | tail -1)
echo "admission: the founder refused the intruder's key ${nl:-?} times (not_listed); c found the seed's key by trying"
expect_num_ge "${nl:-0}" 1 "the founder's not_listed count"

# bad command lines: exit 2, before joining anyone
k="--keys $tmp/keys/peer-a.key --allow $tmp/keys"
run_expect 2 "join address 0: endpoint 'tcp://h:0'" "$RUMOR_PEER" --listen "$E" $k --join h:0
run_expect 2 "join addresses 0 and 1 are both" "$RUMOR_PEER" --listen "$E" $k --join h:1,tcp://h:1
run_expect 2 "--join, --advertise, --min-peers and --relay-via are open membership's" \
  "$RUMOR_PEER" --rank 0 --peers "$A" $k --join h:1
run_expect 2 "open membership runs --mode dpsgd" "$RUMOR_PEER" --listen "$E" $k --mode allreduce
run_expect 2 "binds every interface: say which address" \
  "$RUMOR_PEER" --listen tcp://0.0.0.0:7 $k --join h:1
run_expect 2 "is not on the allow-list" "$RUMOR_PEER" --listen "$E" $k \
  --join "$tmp/other/intruder.pub@h:1"
run_expect 2 "give --rank R and --peers LIST" "$RUMOR_PEER" $k
# relays: their options, named
run_expect 2 "--relay-via and --advertise both say" "$RUMOR_PEER" --listen "$E" $k --join h:1 \
  --relay-via peer-a@h:2 --advertise h:3
run_expect 2 "--relay-max-peers and --relay-mbit limit the relay of --relay" \
  "$RUMOR_PEER" --listen "$E" $k --relay-mbit 10
run_expect 2 "--no-hole-punch is for a peer reached through a relay" \
  "$RUMOR_PEER" --listen "$E" $k --join h:1 --no-hole-punch
run_expect 2 "--relay-via address 0 (tcp://h:2): name the relay's key" \
  "$RUMOR_PEER" --listen "$E" $k --join h:1 --relay-via h:2
run_expect 2 "--relay-via address 0: key '$tmp/other/intruder.pub' is not on the allow-list" \
  "$RUMOR_PEER" --listen "$E" $k --join h:1 --relay-via "$tmp/other/intruder.pub@h:2"
run_expect 2 "--relay 70000: a port is 1 to 65535" "$RUMOR_PEER" --listen "$E" $k --relay 70000
run_expect 2 "--relay x:y: give PORT" "$RUMOR_PEER" --listen "$E" $k --relay x:y
run_expect 2 "--listen ADDR is required" "$RUMOR_PEER" relay --insecure
run_expect 2 "give --keys and --allow" "$RUMOR_PEER" relay --listen tcp://127.0.0.1:7
run_expect 2 "--advertise HOST: a host name or address, no port" \
  "$RUMOR_PEER" relay --listen tcp://127.0.0.1:7 --insecure --advertise h:1
run_expect 2 "--mbit 0: unknown option or a value out of range" \
  "$RUMOR_PEER" relay --listen tcp://127.0.0.1:7 --insecure --mbit 0
finish
