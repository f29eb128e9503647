#!/bin/sh
# Partition: 8 rumor-peer processes on a ring, one per network namespace
# (joined by a bridge in a namespace of its own, as examples/netns-swarm.sh
# builds them). Once every peer is past round $PART_ROUND, nft tables drop
# all traffic between peers 0-3 and peers 4-7 (cutting ring edges 3-4 and
# 7-0) for $PART_S s; then the tables are deleted (heal). Checks:
#  1. all 8 peers exit 0 and print their done line;
#  2. both halves progress during the partition: each peer's round counter
#     advances by at least 25% of what its pre-partition round rate predicts;
#  3. the peers at the cut (3, 4, 7, 0) are back under their pre-partition
#     consensus distance (|mix - x|, median over the 2 s before the
#     partition) within 20 rounds of the heal, once their cut edge carries
#     parameters again (reconnected, both ends in the same round);
#  4. no peer waits unboundedly: consecutive progress lines of a peer are
#     never further apart than its deadline + the heartbeat timeout (2 s) +
#     slack.
# Prints the figures as "partition: ..." lines. Needs root, ip and nft.
# PARTITION_KEEP=1 keeps the run directory; PARTITION_TRACE=N prints the
# consensus of the cut peers (round:value) from 10 rounds before to N rounds
# after the cut edge is back in step.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, nft)"
command -v ip >/dev/null || skip "ip (iproute2) not found"
command -v nft >/dev/null || skip "nft (nftables) not found"
command -v ss >/dev/null || skip "ss (iproute2) not found"
need_fashion
ip netns list >/dev/null 2>&1 || skip "ip netns does not work here"

peer="$RUMOR_BUILDDIR/rumor-peer"
N=8
PORT=7000
PART_ROUND=${PART_ROUND:-60}   # partition once every peer is past this round
PART_S=${PART_S:-10}           # partition length, seconds
RECOVER_ROUNDS=20              # consensus back to its pre-partition level within
ROUND_TIMEOUT=2
HEARTBEAT_S=2                  # the transport's heartbeat timeout
GAP_SLACK=1                    # scheduling slack on a loaded machine
# 8 peers share the machine: each sleeps after each gradient (--throttle 80,
# about 100 ms rounds, a realistic round for a model that takes a while to
# compute) so that rounds are paced by the peers, not by CPU contention.
# Healing costs about a second whatever the round time (the cut links are
# redialled every 0.25 s once silent for 3 s (every sixteenth of the silence
# past 10 s; gossip/mixer_state.c), then ZMTP and the round counters
# get back in step): at 40 ms rounds that was 11-48 rounds, at 100 ms it fits
# in 20. 2 epochs (234 rounds) leave time for the swarm to settle after the
# heal (round ~100; the checks look 40 rounds past it). Rounds take ~0.3 s
# on 2 loaded cores (the throttle multiplies a gradient slowed by 8 peers'
# contention), so 4 epochs ran into the peers' 160 s timeout.
EPOCHS=${EPOCHS:-2}
THROTTLE=${THROTTLE:-80}
PREFIX=rp$$
tmp=$(mktemp -d)
pids=

cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  netns_remove "$PREFIX"
  if [ -n "${PARTITION_KEEP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

addr() { echo "10.77.0.$(($1 + 1))"; }
now() { date +%s.%N; }

# --- namespaces: PREFIX-0..7 (eth0 = 10.77.0.k+1/24), bridge br0 in PREFIX-br
ip netns add "$PREFIX-br" || skip "cannot create a network namespace"
ip -n "$PREFIX-br" link set lo up
ip -n "$PREFIX-br" link add br0 type bridge || skip "cannot create a bridge"
ip -n "$PREFIX-br" link set br0 up
eps=
k=0
while [ $k -lt $N ]; do
  ns=$PREFIX-$k
  ip netns add "$ns" || { fail "cannot create namespace $ns"; finish; }
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
  ip -n "$PREFIX-br" link add "p$k" type veth peer name eth0 netns "$ns" &&
    ip -n "$PREFIX-br" link set "p$k" master br0 &&
    ip -n "$PREFIX-br" link set "p$k" up &&
    ip -n "$ns" link set lo up &&
    ip -n "$ns" addr add "$(addr $k)/24" dev eth0 &&
    ip -n "$ns" link set eth0 up || { fail "cannot wire namespace $ns"; finish; }
  eps=${eps:+$eps,}tcp://$(addr $k):$PORT
  k=$((k + 1))
done
ip netns exec "$PREFIX-0" nft add table inet rpprobe 2>/dev/null || skip "nft does not work in a namespace"
ip netns exec "$PREFIX-0" nft delete table inet rpprobe

# --- the swarm (timeout: never outlive the test)
k=0
while [ $k -lt $N ]; do
  ip netns exec "$PREFIX-$k" timeout -k 5 160 "$peer" --insecure --rank $k --peers "$eps" \
    --epochs "$EPOCHS" --throttle "$THROTTLE" --eval-every 100 --no-average \
    --data "$FASHION" --round-timeout $ROUND_TIMEOUT --progress 0.05 --log-level info \
    --metrics "$tmp/p$k.jsonl" >"$tmp/p$k.log" 2>&1 </dev/null &
  pids="$pids $!"
  k=$((k + 1))
done

last_round() { sed -n 's/.*"event":"round","round":\([0-9]*\).*/\1/p' "$tmp/p$1.jsonl" 2>/dev/null | tail -1; }
i=0
while :; do
  min=
  k=0
  while [ $k -lt $N ]; do
    r=$(last_round $k); r=${r:-0}
    if [ -z "$min" ] || [ "$r" -lt "$min" ]; then min=$r; fi
    k=$((k + 1))
  done
  [ "$min" -gt "$PART_ROUND" ] && break
  i=$((i + 1))
  [ $i -lt 450 ] || { fail "the swarm never got past round $PART_ROUND (slowest at $min)"; finish; }
  sleep 0.2
done

# --- partition: each peer's namespace drops everything to and from the
# other half
partition_rules() {
  if [ "$1" -lt 4 ]; then other="$(addr 4), $(addr 5), $(addr 6), $(addr 7)"
  else other="$(addr 0), $(addr 1), $(addr 2), $(addr 3)"; fi
  cat <<EOF
table inet rpart {
  chain in { type filter hook input priority 0; policy accept; ip saddr { $other } drop; }
  chain out { type filter hook output priority 0; policy accept; ip daddr { $other } drop; }
}
EOF
}
t_part=$(now)
k=0
while [ $k -lt $N ]; do
  partition_rules $k | ip netns exec "$PREFIX-$k" nft -f - || fail "nft failed in namespace $k"
  k=$((k + 1))
done
sleep "$PART_S"
k=0
while [ $k -lt $N ]; do
  ip netns exec "$PREFIX-$k" nft delete table inet rpart || fail "could not heal namespace $k"
  k=$((k + 1))
done
t_heal=$(now)

# the cut links are up again once both TCP connections of each cut edge
# (3 -> 4, 4 -> 3, 7 -> 0, 0 -> 7) are established again
link_up() {   # NS-OF-A B: both directions between A and B established
  a=$(ip netns exec "$PREFIX-$1" ss -Htn state established "( dst $(addr $2) and dport = :$PORT )" | wc -l)
  b=$(ip netns exec "$PREFIX-$1" ss -Htn state established "( dst $(addr $2) and sport = :$PORT )" | wc -l)
  [ "$a" -gt 0 ] && [ "$b" -gt 0 ]
}
t_link34=; t_link70=
i=0
while [ -z "$t_link34" ] || [ -z "$t_link70" ]; do
  [ -z "$t_link34" ] && link_up 3 4 && t_link34=$(now)
  [ -z "$t_link70" ] && link_up 0 7 && t_link70=$(now)
  i=$((i + 1))
  [ $i -lt 300 ] || break
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 1 ] || break
  sleep 0.1
done

# --- 1. everyone finishes
k=0
for p in $pids; do
  wait "$p"
  expect_rc 0 $? "peer $k" "$tmp/p$k.log"
  grep -q "^peer $k: done" "$tmp/p$k.log" || fail "peer $k printed no done line"
  k=$((k + 1))
done
pids=

# "round" events of peer K: wall-time round consensus monotonic-time deadline
# (the first "time" of a line is the wall clock, common to all peers and to
# this script; the last is the peer's monotonic clock)
rounds_of() {
  awk '
    function num(key, last,   s, i, v) {
      s = $0; v = ""
      while ((i = index(s, "\"" key "\":")) > 0) {
        s = substr(s, i + length(key) + 3); v = s; sub(/[,}].*/, "", v)
        if (!last) break
      }
      return v
    }
    index($0, "\"event\":\"round\"") {
      print num("time", 0), num("round", 0), num("consensus", 0), num("time", 1), num("deadline_s", 0)
    }' "$tmp/p$1.jsonl"
}
round_at() { awk -v t="$2" '$1 <= t {r = $2} END {print r + 0}' "$tmp/r$1.txt"; }
front_at() {   # T: the highest round any peer had reached at wall time T
  cat "$tmp"/r[0-7].txt | awk -v t="$1" '$1 <= t && $2 > f {f = $2} END {print f + 0}'
}
since() { awk "BEGIN{printf \"%.2f\", $1 - $2}"; }

# the swarm's front at the heal: the highest round any peer had reached
front=0
k=0
while [ $k -lt $N ]; do
  rounds_of $k >"$tmp/r$k.txt"
  r=$(round_at $k "$t_heal")
  [ "$r" -gt "$front" ] && front=$r
  k=$((k + 1))
done
echo "partition: $PART_S s, $(since "$t_heal" "$t_part") s from the first nft table to the last deletion; swarm front at the heal: round $front"

k=0
while [ $k -lt $N ]; do
  # --- 2. progress during the partition vs. the rate before it
  # (the rate before: over the last 3 s before the partition, start-up left out)
  # shellcheck disable=SC2046  # split into fields on purpose
  set -- $(awk -v p="$t_part" -v h="$t_heal" '
    $1 <= p - 3 || NR == 1 {r0 = $2; t0 = $4}
    $1 <= p {rp = $2; tp = $4}
    $1 <= h {rh = $2; th = $4}
    END {printf "%d %d %d %.1f %.1f\n", rp, rh, rh - rp, (rp - r0) / (tp - t0 + 1e-9), (rh - rp) / (th - tp + 1e-9)}' \
    "$tmp/r$k.txt")
  rp=$1; rh=$2; adv=$3; rate=$4; prate=$5
  want=$(awk "BEGIN{printf \"%d\", 0.25 * $rate * $PART_S}")
  half=$([ $k -lt 4 ] && echo 0-3 || echo 4-7)
  echo "partition: peer $k (half $half) rounds $rp -> $rh during the partition: +$adv ($prate rounds/s; before: $rate rounds/s; need >= $want)"
  expect_num_ge "$adv" "$want" "peer $k progress during the partition"

  # --- 4. no unbounded wait: gaps between consecutive progress lines
  # shellcheck disable=SC2046  # split into fields on purpose
  set -- $(awk -v slack=$GAP_SLACK -v hb=$HEARTBEAT_S '
    NR > 1 {g = $4 - t; lim = d + hb + slack; if (NR == 2 || g - lim > worst - wlim) {worst = g; wlim = lim; wr = $2; w0 = w; w1 = $1}}
    {t = $4; d = $5; w = $1}
    END {printf "%.2f %.2f %d %s %s\n", worst, wlim, wr, w0, w1}' "$tmp/r$k.txt")
  echo "partition: peer $k longest gap between progress lines $1 s (limit $2 s), before round $3"
  if ! awk "BEGIN{exit !($1 < $2)}"; then
    fail "peer $k: $1 s between progress lines (before round $3), over the deadline + heartbeat timeout + slack ($2 s)"
    # what the peer logged meanwhile (log times are local wall-clock times)
    from=$(date -d "@$4" +%H:%M:%S.%3N); to=$(date -d "@$5" +%H:%M:%S.%3N)
    awk -v a="$from" -v b="$to" '$3 >= a && $3 <= b' "$tmp/p$k.log" | cut -c1-160 | sed 's/^/  | /' | tail -8 >&2
  fi
  k=$((k + 1))
done

# --- 3. recovery at the cut.
# Rounds are counted as the rounds the swarm advanced: the round of the
# first progress line whose consensus is back under the pre-partition level,
# minus the swarm's front at the heal (the highest round any peer had
# reached). A peer of the slower half skips ahead when it hears the faster
# half again; counting from its own round at the heal would count that leap
# as rounds although the swarm did not advance.
# Until a cut edge carries parameters again, its two peers mix only with
# their own half and stay close to their mix: a low consensus then proves
# nothing. So the line must come after the edge is back: both TCP
# connections established (ss, polled above) and both ends in the same
# round again (within 2; the slower one has skipped ahead or fetched
# state), by the wall clock of the progress lines.
sync_time() {   # A B T_LINK: first wall time >= T_LINK with A and B within 2 rounds
  { awk '{print $1, "a", $2}' "$tmp/r$1.txt"; awk '{print $1, "b", $2}' "$tmp/r$2.txt"; } | sort -n -k1,1 |
    awk -v tl="$3" '
      $2 == "a" {ra = $3} $2 == "b" {rb = $3}
      $1 >= tl && ra != "" && rb != "" && ra - rb <= 2 && rb - ra <= 2 {print $1; found = 1; exit}
      END {if (!found) print ""}'
}
for edge in "3 4 $t_link34" "7 0 $t_link70"; do
  set -- $edge
  a=$1; b=$2; tl=${3:-}
  if [ -z "$tl" ]; then
    fail "edge $a-$b: the TCP connections were not established again within 30 s of the heal"
    continue
  fi
  ts=$(sync_time $a $b "$tl")
  if [ -z "$ts" ]; then
    fail "edge $a-$b: peers $a and $b never ran the same round again after the heal"
    continue
  fi
  fl=$(front_at "$tl"); fs=$(front_at "$ts")
  echo "partition: edge $a-$b connected again $(since "$tl" "$t_heal") s after the heal (swarm front +$((fl - front)) rounds), both ends in the same round after $(since "$ts" "$t_heal") s (+$((fs - front)) rounds)"
  for k in $a $b; do
    # the level before: the median over the last 2 s before the partition
    # (at least the last 20 lines); a 0 is a round in which no neighbour's
    # parameters arrived (the peer mixed with itself alone), not a distance:
    # left out here and below
    pre=$(awk -v p="$t_part" '$1 <= p && $3 + 0 > 0 {t[++n] = $1; c[n] = $3}
      END {for (i = n; i >= 1 && (t[i] > t[n] - 2 || n - i < 20); i--) v[++m] = c[i]
           for (i = 2; i <= m; i++) {x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x}
           printf "%g %d\n", m ? (m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2) : 0, m}' "$tmp/r$k.txt")
    npre=${pre#* }; pre=${pre% *}
    # shellcheck disable=SC2046  # split into fields on purpose
    set -- $(awk -v h="$t_heal" -v ts="$ts" -v pre="$pre" '
      $1 <= h {rh = $2; ch = $3}
      $1 >= ts && r0 == "" {r0 = $2}
      $1 >= ts && $2 <= r0 + 40 && $3 + 0 > peak {peak = $3 + 0; rpk = $2}
      $1 >= ts && !found && $3 + 0 > 0 && $3 + 0 <= pre {found = 1; rr = $2; cr = $3; tr = $1}
      END {printf "%d %g %g %d %d %s %.2f\n", rh, ch, peak, rpk, found ? rr : -1, found ? cr : "-", found ? tr - h : 0}' \
      "$tmp/r$k.txt")
    rh=$1; ch=$2; peak=$3; rpk=$4; rr=$5; cr=$6; trec=$7
    jumps=$(sed -n 's/.*"event":"done".*"jumps":\([0-9]*\).*/\1/p' "$tmp/p$k.jsonl")
    catch=$(sed -n 's/.*"event":"done".*"catch_ups":\([0-9]*\).*/\1/p' "$tmp/p$k.jsonl")
    echo "partition: peer $k consensus before $pre (median of $npre), at the heal $ch (round $rh), peak in the 40 rounds after the edge is back $peak (round $rpk); jumps $jumps, catch-ups $catch"
    if [ -n "${PARTITION_TRACE:-}" ]; then
      awk -v n="$PARTITION_TRACE" -v f="$fs" '$2 >= f - 10 && $2 <= f + n {printf " %s:%.3g", $2, $3} END {print ""}' \
        "$tmp/r$k.txt" | fold -w 150 | sed 's/^/  /'
    fi
    if [ "$rr" -lt 0 ]; then
      fail "peer $k: consensus never back under its pre-partition level $pre after the heal"
      continue
    fi
    rec=$((rr - front))
    echo "partition: peer $k back under at round $rr ($cr, $trec s after the heal): $rec rounds after the swarm's front at the heal, $((rr - fs)) after the edge was back in step"
    expect_num_lt "$rec" $((RECOVER_ROUNDS + 1)) "peer $k: rounds from the heal until the consensus is back under its pre-partition level"
  done
done

finish
