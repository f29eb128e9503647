#!/bin/sh
# bench_scale.sh: real rumor-peer processes in one open swarm on loopback,
# at 8, 32 and 128 peers (RUMOR_SCALE_SIZES to choose). Each peer trains
# mlp:784-16-10 on one thread over the exponential graph. The founder
# waits for half of them (--min-peers); the others join through it, one
# every JOIN_GAP seconds (a quarter of a second: 128 join over 32 s). Once
# all train, a steady window of STEADY seconds is measured; then a tenth of
# the peers (at least one) is killed with SIGKILL and as many newcomers
# join, and after another STEADY seconds every peer is stopped (SIGTERM:
# it leaves).
#
# Prints "bench: NAME = VALUE UNIT" lines for each size N:
#   scale_N_trained          peers that trained within 120 s of the last join
#   scale_N_rss_mb, scale_N_anon_mb   a peer's resident and anonymous memory
#                            (mean over the peers, steady window)
#   scale_N_fds, scale_N_threads      its open descriptors and threads (mean)
#   scale_N_cpu_ms_per_round          CPU time (user + system) a round
#   scale_N_rounds_per_s     rounds a second a peer runs (mean)
#   scale_N_mixed_share      of the round events in the steady window (a
#                            peer writes one every 2 s, --progress 2), the
#                            share in which a neighbour's parameters covered
#                            the space (complete > 0)
#   scale_N_swim_msgs_per_s SWIM messages a peer sends a second (mean)
#   scale_N_consensus        the survivors' last consensus distance (mean)
#   scale_N_consensus_max    the largest survivor's
#   scale_N_max_round_wait_s the longest wait of a round (survivors' and
#                            newcomers' round events, steady window to the
#                            end; --round-timeout is 10 s)
#   scale_N_rounds_past_deadline  of the same round events, how many waited
#                            more than 0.1 s past their own deadline
#                            (deadline_s): none should
#   scale_N_late_rounds_share  of their round events from 10 s after the
#                            kill (past SWIM's detection) to the end, the
#                            share that ran into their deadline (timed_out);
#                            an event is the round in progress at a progress
#                            line (every 2 s), so this is about the share of
#                            the time spent in such rounds
#   scale_N_detect_first_s, scale_N_detect_median_s   after the kill, when
#                            the first survivor held a killed peer dead (its
#                            own declaration, or one it learned from another
#                            member), and the median over the killed peers
#                            of when half of the survivors that held it dead
#                            (by the end of the run) did (SWIM's log lines;
#                            lines from before the kill, of a peer wrongly
#                            held dead, are left out)
#   scale_N_admit_s          a newcomer's start to its first round (mean)
#   scale_N_false_deaths_per_s   SWIM's declarations of death, summed over the
#                            peers, of members that were not killed, a second
#                            of the run (false positives, refuted later)
#   scale_N_sim_rounds_ratio, scale_N_sim_swim_ratio, scale_N_sim_detect_ratio
#                            rumor-sim's rounds a second, SWIM messages a
#                            second (steady window) and detection median
#                            (half of the views) for the same swarm, joins,
#                            kill and CPU a round, divided by the measured
#   scale_N_sim_late_rounds_share, scale_N_sim_max_round_wait_s,
#   scale_N_sim_consensus_rms   its late rounds, longest wait and consensus
#                            distance (RMS, in units of a peer's step)
# and a table of them.
# Environment: RUMOR_BUILDDIR, RUMOR_SRCDIR (make bench); RUMOR_DATA;
# RUMOR_SCALE_SIZES (default "8 32 128"), RUMOR_SCALE_STEADY (default 20),
# RUMOR_SCALE_TOPOLOGY (the peers' --topology, default exp), RUMOR_SCALE_ARGS
# (more rumor-peer options for every peer, e.g. "--local-steps 8").
set -u
SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
peer=$BUILDDIR/rumor-peer
FASHION=${RUMOR_DATA:-/usr/share/datasets/fashion-mnist}
[ -x "$peer" ] || { echo "bench_scale: no $peer"; exit 77; }
[ -r "$FASHION/train-images-idx3-ubyte.gz" ] || { echo "bench_scale: no Fashion-MNIST"; exit 77; }
command -v ss >/dev/null || { echo "bench_scale: ss (iproute2) is needed to find free ports"; exit 77; }
SIZES=${RUMOR_SCALE_SIZES:-8 32 128}
STEADY=${RUMOR_SCALE_STEADY:-20}
TOPOLOGY=${RUMOR_SCALE_TOPOLOGY:-exp}
JOIN_GAP=0.25
tmp=$(mktemp -d)
all_pids() { cat "$tmp"/*.pid 2>/dev/null; }
cleanup() {
  for p in $(all_pids); do kill -KILL "$p" 2>/dev/null; done
  if [ -n "${RUMOR_SCALE_KEEP:-}" ]; then echo "bench_scale: logs in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fig() { echo "bench: $1 = $2 $3"; }
now() { date '+%s.%N'; }

# N free loopback ports below the ephemeral range (so that no peer's own
# outgoing connection takes a port another peer is to listen on)
ports() {
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  used=$(ss -Htan | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u)
  p=$((lo > 21000 ? lo - 20000 : 1024)) k=0
  while [ $k -lt "$1" ] && [ $p -lt "$lo" ]; do
    echo "$used" | grep -qx "$p" || { echo $p; k=$((k + 1)); }
    p=$((p + 1))
  done
}

# start NAME PORT [OPTIONS]: a peer of the open swarm
start() {
  _n=$1 _p=$2; shift 2
  "$peer" --insecure --listen "127.0.0.1:$_p" --data "$FASHION" --model mlp:784-16-10 \
    --threads 1 --batch 32 --lr 0.05 --rounds 1000000 --progress 2 --topology "$TOPOLOGY" \
    --round-timeout 10 --start-timeout 300 --leave-timeout 30 --metrics "$tmp/$_n.jsonl" \
    ${RUMOR_SCALE_ARGS:-} "$@" >"$tmp/$_n.log" 2>&1 &
  echo $! >"$tmp/$_n.pid"
  now >"$tmp/$_n.t0"
}

# stats NAMES...: "rss anon threads fds cpu_ticks" of each live peer
stats() {
  for n in "$@"; do
    p=$(cat "$tmp/$n.pid")
    [ -d "/proc/$p" ] || continue
    st=$(awk '/^VmRSS|^RssAnon|^Threads/ { printf "%s ", $2 }' "/proc/$p/status" 2>/dev/null)
    fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
    cpu=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null)
    echo "$n $st $fds ${cpu:-0}"
  done
}

# window NAME T0 T1: "rounds_per_s sampled mixed swim_per_s" from a peer's
# round events between T0 and T1 (one every --progress seconds): its rate
# from the first and last of them, how many there were, in how many a
# neighbour's parameters covered the space (complete > 0), and the SWIM
# messages it sent a second
window() {
  awk -v t0="$2" -v t1="$3" '/"event":"round"/ {
      match($0, /"time":[0-9.]+/); t = substr($0, RSTART + 7, RLENGTH - 7) + 0
      if (t < t0 || t > t1) next
      match($0, /"round":[0-9]+/); r = substr($0, RSTART + 8, RLENGTH - 8) + 0
      match($0, /"complete":[0-9]+/); c = substr($0, RSTART + 11, RLENGTH - 11) + 0
      match($0, /"swim_messages":[0-9]+/); w = substr($0, RSTART + 16, RLENGTH - 16) + 0
      if (!n) { fr = r; ft = t; fw = w }
      lr = r; lt = t; lw = w; n++; m += c > 0 }
    END { d = lt - ft
          printf "%.3f %d %d %.2f\n", (d > 0 ? (lr - fr) / d : 0), n, m, (d > 0 ? (lw - fw) / d : 0) }' \
    "$tmp/$1.jsonl" 2>/dev/null
}

# the seconds of the day a log line's "HH:MM:SS.mmm" says, and now's
sod() { echo "$1" | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }'; }

tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
table="| peers | trained | RSS MB | anon MB | fds | threads | CPU ms/round | rounds/s | mixed | SWIM msgs/s | consensus (mean, max) | longest wait s | past deadline | late rounds | detect (first, median) s | admit s | false deaths/s |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for N in $SIZES; do
  rm -f "$tmp"/*
  K=$((N / 10)); [ $K -ge 1 ] || K=1
  set -- $(ports $((N + K)))
  [ $# -eq $((N + K)) ] || { echo "bench_scale: not $((N + K)) free ports"; exit 1; }
  founder=$1
  names=
  i=0
  for p in "$@"; do
    [ $i -ge $N ] && break
    if [ $i = 0 ]; then
      start p$i "$p" --min-peers $((N / 2 > 2 ? N / 2 : 2))
    else
      start p$i "$p" --join "127.0.0.1:$founder" --min-peers 2
      sleep $JOIN_GAP
    fi
    names="$names p$i"
    i=$((i + 1))
  done
  shift $N
  newports="$*"
  # every peer trains (or 120 s pass: those that do not are counted)
  w=0
  for n in $names; do
    until grep -q '"event":"round"' "$tmp/$n.jsonl" 2>/dev/null || [ $w -ge 240 ]; do
      sleep 0.5; w=$((w + 1))
    done
  done
  trained=0
  for n in $names; do grep -q '"event":"round"' "$tmp/$n.jsonl" 2>/dev/null && trained=$((trained + 1)); done
  [ $trained = $N ] || echo "bench_scale: $N peers: $((N - trained)) never trained"
  sleep 5
  # the steady window
  t0=$(now); stats $names | sort >"$tmp/s0"
  sleep "$STEADY"
  t1=$(now); stats $names | sort >"$tmp/s1"
  dt=$(echo "$t0 $t1" | awk '{ print $2 - $1 }')
  # per peer: its two samples and its round events' rate in the window
  join "$tmp/s0" "$tmp/s1" | while read -r n r0 a0 h0 f0 c0 r1 a1 h1 f1 c1; do
    echo "$r1 $a1 $h1 $f1 $((c1 - c0)) $(window "$n" "$t0" "$t1")"
  done >"$tmp/s01"
  set -- $(awk -v dt="$dt" -v tick="$tick" '
    NF == 9 { rss += $1; anon += $2; thr += $3; fds += $4; n++
              rate += $6; sampled += $7; mixed += $8; swim += $9
              if ($6 > 0) { cpu += 1000 * $5 / tick / ($6 * dt); nc++ } }
    END { if (!n) n = 1; if (!nc) nc = 1
          printf "%.1f %.1f %.0f %.1f %.2f %.2f %s %.1f", rss / n / 1024, anon / n / 1024, fds / n,
                 thr / n, cpu / nc, rate / n, sampled ? sprintf("%.2f", mixed / sampled) : "nan",
                 swim / n }' "$tmp/s01")
  rss=$1 anon=$2 fds=$3 thr=$4 cpr=$5 rps=$6 mixed=$7 swim=$8
  # churn: a tenth killed, as many join
  victims=$(echo $names | tr ' ' '\n' | tail -n $K)
  ids=
  for v in $victims; do
    ids="$ids $(sed -n 's/.*open membership: id \([0-9a-f]*\) .*/\1/p' "$tmp/$v.log" | head -n 1)"
  done
  tk=$(sod "$(date '+%H:%M:%S.%N')")
  tkill=$(now)
  for v in $victims; do kill -KILL "$(cat "$tmp/$v.pid")"; done
  survivors=$(echo $names | tr ' ' '\n' | head -n $((N - K)))
  fresh=
  i=0
  for p in $newports; do
    start q$i "$p" --join "127.0.0.1:$founder" --min-peers 2
    fresh="$fresh q$i"
    i=$((i + 1))
  done
  sleep "$STEADY"
  # detection: when survivors held each killed peer dead
  for id in $ids; do
    for n in $survivors; do
      sed -n "s/^rumor\[peer [0-9a-f]*\] \([0-9:.]*\) info: swim: $id .*\(declared dead\|dead, as another\).*/\1/p" \
        "$tmp/$n.log" | head -n 1
    done | while read -r t; do echo "$(sod "$t") $tk" | awk '{ d = $1 - $2; if (d < -43200) d += 86400; if (d >= 0) print d }'; done |
      sort -n >"$tmp/det-$id"
  done
  det_first=$(cat "$tmp"/det-* 2>/dev/null | sort -n | head -n 1)
  det_med=$(for f in "$tmp"/det-*; do
              c=$(wc -l <"$f"); [ "$c" -gt 0 ] && sed -n "$(((c + 1) / 2))p" "$f"
            done | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }')
  # admission: a newcomer's start to its first round
  admit=$(for n in $fresh; do
            a=$(cat "$tmp/$n.t0")
            b=$(grep -m1 '"event":"round"' "$tmp/$n.jsonl" 2>/dev/null | sed -n 's/^{"time":\([0-9.]*\),.*/\1/p')
            [ -n "$b" ] && echo "$a $b" | awk '{ print $2 - $1 }'
          done | awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n; else print "nan" }')
  # the survivors' consensus distance (last nonzero)
  cons=$(for n in $survivors; do
           grep '"event":"round"' "$tmp/$n.jsonl" | sed -n 's/.*"consensus":\([0-9.e+-]*\),.*/\1/p' |
             awk '$1 > 0' | tail -n 1
         done | awk '{ s += $1; n++ } END { if (n) printf "%.4f", s / n; else print "nan" }')
  # rounds: the longest wait of any round event from the steady window on,
  # and the share that ran into their deadline from 10 s after the kill
  # (past SWIM's detection) to the end; the survivors' largest consensus
  set -- $(for n in $survivors $fresh; do cat "$tmp/$n.jsonl" 2>/dev/null; done |
           sed -n 's/^{"time":\([0-9.]*\),.*"event":"round".*"deadline_s":\([0-9.e+-]*\),.*"round_wait_s":\([0-9.e+-]*\),"timed_out":\([01]\).*/\1 \3 \4 \2/p' |
           awk -v t0="$t0" -v tb="$(echo "$tkill" | awk '{ printf "%.3f", $1 + 10 }')" '
             $1 >= t0 && $2 > w { w = $2 }
             $1 >= t0 && $2 > $4 + 0.1 { past++ }
             $1 >= tb { n++; late += $3 }
             END { printf "%.2f %s %d\n", w, n ? sprintf("%.3f", late / n) : "nan", past }')
  maxwait=$1 late=$2 past=$3
  consmax=$(for n in $survivors; do
              grep '"event":"round"' "$tmp/$n.jsonl" | sed -n 's/.*"consensus":\([0-9.e+-]*\),.*/\1/p' |
                awk '$1 > 0' | tail -n 1
            done | awk '$1 > m { m = $1 } END { printf "%.4f", m }')
  # false positives: deaths declared of members that were not killed, over
  # the run (from the founder's start to now)
  run_s=$(echo "$(cat "$tmp/p0.t0") $(now)" | awk '{ print $2 - $1 }')
  fdeaths=$(cat "$tmp"/p*.log "$tmp"/q*.log 2>/dev/null |
            sed -n 's/.*info: swim: \([0-9a-f]*\) .*declared dead.*/\1/p' |
            grep -v -x -F "$(echo $ids | tr ' ' '\n')" | wc -l)
  fdps=$(echo "$fdeaths $run_s" | awk '{ printf "%.2f", ($2 > 0 ? $1 / $2 : 0) }')
  live="$survivors $fresh"
  for n in $live; do kill -TERM "$(cat "$tmp/$n.pid")" 2>/dev/null; done
  for n in $live; do wait "$(cat "$tmp/$n.pid")" 2>/dev/null; done
  fig scale_${N}_trained "$trained" "of $N"
  fig scale_${N}_rss_mb "$rss" MB
  fig scale_${N}_anon_mb "$anon" MB
  fig scale_${N}_fds "$fds" fds
  fig scale_${N}_threads "$thr" threads
  fig scale_${N}_cpu_ms_per_round "$cpr" ms
  fig scale_${N}_rounds_per_s "$rps" rounds/s
  fig scale_${N}_mixed_share "$mixed" x
  fig scale_${N}_swim_msgs_per_s "$swim" msgs/s
  fig scale_${N}_consensus "$cons" distance
  fig scale_${N}_consensus_max "$consmax" distance
  fig scale_${N}_max_round_wait_s "$maxwait" s
  fig scale_${N}_late_rounds_share "$late" x
  fig scale_${N}_rounds_past_deadline "$past" rounds
  fig scale_${N}_detect_first_s "${det_first:-nan}" s
  fig scale_${N}_detect_median_s "${det_med:-nan}" s
  fig scale_${N}_admit_s "$admit" s
  fig scale_${N}_false_deaths_per_s "$fdps" deaths/s
  # the same swarm in rumor-sim (docs/sim.md "Against real peers"): joins
  # over as long, the steady window, the kill of K with K newcomers; each
  # round's compute is the CPU a round measured above on this machine's
  # cores, so the ratio says how much the rounds' waiting (graph, views,
  # deadlines), not the CPU, costs against the real peers
  if [ -x "$BUILDDIR/rumor-sim" ] && [ "$cpr" != "0.00" ]; then
    J=$(awk -v n="$N" -v g="$JOIN_GAP" 'BEGIN { print (n - 1) * g }')
    "$BUILDDIR/rumor-sim" --peers "$N" --join-over "$J" --duration $((5 + 2 * STEADY)) \
      --kill-rate 0 --burst "$(awk -v j="$J" -v s="$STEADY" 'BEGIN { print j + 5 + s }'):$K" \
      --rounds --topology "$TOPOLOGY" --round-cpu-ms "$cpr" --cores "$(nproc)" \
      --latency 0.05 --jitter 0 --rate-mbit 0 --json -q >"$tmp/sim.json" 2>"$tmp/sim.err" ||
      echo "bench_scale: rumor-sim: $(cat "$tmp/sim.err")"
    sj() { tr -d ' \t\n' <"$tmp/sim.json" | grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "nan" }'; }
    fig scale_${N}_sim_rounds_ratio "$(ratio "$(sj rounds_per_s)" "$rps")" x
    fig scale_${N}_sim_swim_ratio "$(ratio "$(sj msgs_per_s_steady)" "$swim")" x
    fig scale_${N}_sim_detect_ratio "$(ratio "$(sj gone_half_p50_s)" "${det_med:-0}")" x
    fig scale_${N}_sim_late_rounds_share "$(sj late_share)" x
    fig scale_${N}_sim_max_round_wait_s "$(sj max_wait_s)" s
    fig scale_${N}_sim_consensus_rms "$(sj consensus_rms)" steps
  fi
  table="$table
| $N | $trained of $N | $rss | $anon | $fds | $thr | $cpr | $rps | $mixed | $swim | $cons, $consmax | $maxwait | $past | $late | ${det_first:-nan}, ${det_med:-nan} | $admit | $fdps |"
done
echo "$table"
