#!/bin/sh
# Runs a swarm of rumor-peer processes on this machine, over loopback, and
# prints each peer's accuracy (a language model's validation loss) and the
# swarm average's at the end.
#
# Usage: examples/local-swarm.sh [-n PEERS] [-t TOPOLOGY] [-p BASEPORT]
#                                [-s STAGES] [-g DEVICES] [-m METRICSPORT]
#                                [-d RUNDIR] [-q]
#                                [-- rumor-peer options...]
#   -n PEERS      number of peers (default 8)
#   -t TOPOLOGY   ring, torus:2x4, exp, onepeer-exp, complete, ... (default ring)
#   -s STAGES     pipeline stages by rank, e.g. 1,2,3: peer r cuts its model
#                 into entry r (the list repeats) on CPU devices of 1 thread;
#                 1 is no pipeline (default: rumor-peer's own --stages)
#   -g DEVICES    devices by rank, the list repeating: entry r is peer r's
#                 --devices, its devices joined by +, or - for rumor-peer's
#                 default; e.g. cuda:0+cuda:0,- puts peer 0's model on the GPU
#                 in two stages and leaves the others on the CPU
#   -p BASEPORT   peers listen on BASEPORT, BASEPORT+1, ... (BASEPORT+PEERS-1
#                 at most 65535; default: a free range)
#   -m PORT       serve Prometheus metrics: peer r on 127.0.0.1:PORT+r
#                 (examples/deploy/monitoring/prometheus.yml scrapes 9400-9403)
#   -d RUNDIR     where logs and metrics go (default: a new directory in /tmp)
#   -q            do not show peer 0's progress live
# Everything after -- goes to every rumor-peer, e.g.
#   examples/local-swarm.sh -n 4 -t complete -- --epochs 3 --mode allreduce
# The rumor-peer binary: $RUMOR_PEER, else build/rumor-peer next to this
# script's checkout, else rumor-peer on the PATH.
# A peer that fails before it starts training (a bad option, a device that
# does not open) stops the swarm at once: the script names the peer, shows
# its last lines and exits 1, instead of the others waiting for it.
# Exit status: 0 when every peer finished, 1 when one failed, 2 on bad usage.
set -eu

usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p;}' "$0"; }
# A usage error: the message, the usage, exit status 2.
usage_error() { echo "local-swarm: $*" >&2; usage >&2; exit 2; }
n=8 topo=ring base= rundir= quiet= pgiven= stages= mport= gdevs=
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-t|-p|-d|-s|-m|-g) [ $# -ge 2 ] || usage_error "option '$1' needs a value" ;;
  esac
  case "$1" in
    -n) n=$2; shift 2 ;;
    -t) topo=$2; shift 2 ;;
    -p) base=$2; pgiven=1; shift 2 ;;
    -d) rundir=$2; shift 2 ;;
    -s) stages=$2; shift 2 ;;
    -g) gdevs=$2; shift 2 ;;
    -m) mport=$2; shift 2 ;;
    -q) quiet=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) usage_error "unknown option '$1' (rumor-peer's options go after --)" ;;
    *) usage_error "unexpected argument '$1' (rumor-peer's options go after --)" ;;
  esac
done
case "$n" in ''|*[!0-9]*) echo "local-swarm: -n '$n': expected a number of peers" >&2; exit 2 ;; esac
[ "$n" -ge 1 ] || { echo "local-swarm: -n must be at least 1" >&2; exit 2; }
# Ports are 16 bits: a larger one would wrap around to another port.
if [ -n "$pgiven" ]; then
  case "$base" in ''|*[!0-9]*) echo "local-swarm: -p '$base': expected a port number" >&2; exit 2 ;; esac
  b=$(echo "$base" | sed 's/^0*//')  # no octal, no overflow: at most 5 digits
  if [ ${#b} -gt 5 ] || [ "${b:-0}" -lt 1 ] || [ $((b + n - 1)) -gt 65535 ]; then
    echo "local-swarm: -p $base: the $n ports from BASEPORT on must lie in 1-65535" \
      "(BASEPORT from 1 to $((65536 - n)))" >&2
    exit 2
  fi
  base=$b
fi

case "$stages" in
  '') ;;
  *[!0-9,]*|,*|*,|*,,*) echo "local-swarm: -s '$stages': expected stage counts like 1,2,3" >&2; exit 2 ;;
esac
case "$mport" in
  '') ;;
  *[!0-9]*) echo "local-swarm: -m '$mport': expected a port number" >&2; exit 2 ;;
  *) [ "$mport" -ge 1 ] && [ $((mport + n - 1)) -le 65535 ] ||
       { echo "local-swarm: -m $mport: the $n ports from it on must lie in 1-65535" >&2; exit 2; } ;;
esac
case "$gdevs" in
  '') ;;
  ,*|*,|*,,*|*[!A-Za-z0-9:.=+,-]*) echo "local-swarm: -g '$gdevs': expected device lists by rank like cuda:0+cuda:0,-" >&2; exit 2 ;;
esac
# peer r's --devices (-g): entry r of the list, which repeats; - is none
device_args() {
  [ -n "$gdevs" ] || return 0
  k=$(echo "$gdevs" | tr ',' '\n' | wc -l)
  d=$(echo "$gdevs" | cut -d, -f$(( $1 % k + 1 )))
  [ "$d" = - ] || echo "--devices $(echo "$d" | tr '+' ',')"
}
# peer r's --metrics-listen (-m)
metrics_args() { [ -z "$mport" ] || echo "--metrics-listen 127.0.0.1:$((mport + $1))"; }
# peer r's --stages: entry r of the -s list, which repeats
stage_args() {
  [ -n "$stages" ] || return 0
  k=$(echo "$stages" | tr ',' '\n' | wc -l)
  echo "--stages $(echo "$stages" | cut -d, -f$(( $1 % k + 1 )))"
}

here=$(cd "$(dirname "$0")" && pwd)
peer=${RUMOR_PEER:-}
if [ -z "$peer" ]; then
  if [ -x "$here/../build/rumor-peer" ]; then peer="$here/../build/rumor-peer"
  else peer=$(command -v rumor-peer || true); fi
fi
[ -n "$peer" ] && [ -x "$peer" ] || { echo "local-swarm: rumor-peer not found (build it, or set RUMOR_PEER)" >&2; exit 1; }

# A free range of ports below Linux's ephemeral range (32768-60999, where
# outgoing connections take theirs): random bases until every port is unused.
# (what listens, from /proc/net: no iproute2 needed)
busy=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
  awk '$4 == "0A" { n = split($2, a, ":"); print a[n] }' |
  while read -r h; do printf '%d ' "0x$h"; done)
port_free() { case " $busy " in *" $1 "*) return 1 ;; esac; }
if [ -z "$base" ]; then
  tries=0
  while :; do
    base=$(( 10000 + ($(od -An -N2 -tu2 /dev/urandom) % (22000 - n)) ))
    ok=1; i=0
    while [ $i -lt "$n" ]; do port_free $((base + i)) || { ok=0; break; }; i=$((i + 1)); done
    [ $ok = 1 ] && break
    tries=$((tries + 1)); [ $tries -lt 50 ] || { echo "local-swarm: no free port range" >&2; exit 1; }
  done
fi
peers=
i=0
while [ $i -lt "$n" ]; do
  peers="${peers:+$peers,}tcp://127.0.0.1:$((base + i))"
  i=$((i + 1))
done
[ -n "$rundir" ] || rundir=$(mktemp -d "${TMPDIR:-/tmp}/rumor-swarm-XXXXXX")
mkdir -p "$rundir"

pids=
# On Ctrl-C or SIGTERM: every peer leaves as rumor-peer does on SIGTERM
# (within its --leave-timeout); wait for that. (The peers run in the
# background, where a shell without job control has them ignore SIGINT.)
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'cleanup; exit 130' INT TERM
# Secure by default: a CurveZMQ keypair per peer in $rundir/keys, which is
# also the swarm's allow-list (its .pub files); --insecure skips this.
secure=1
for a in "$@"; do [ "$a" = "--insecure" ] && secure=0; done
if [ $secure = 1 ]; then
  mkdir -p "$rundir/keys"
  i=0
  while [ $i -lt "$n" ]; do
    [ -f "$rundir/keys/peer-$i.key" ] || "$peer" keygen "$rundir/keys/peer-$i" >/dev/null || exit 1
    i=$((i + 1))
  done
fi
keyargs() { [ $secure = 1 ] && echo "--keys $rundir/keys/peer-$1.key --allow $rundir/keys"; }
echo "local-swarm: $n peers on $topo over loopback (ports $base-$((base + n - 1))), logs in $rundir"
[ $secure = 1 ] && echo "local-swarm: CurveZMQ on: keys and allow-list in $rundir/keys"

# Every peer in the background, its output in its log; peer 0's shown live.
r=0
while [ $r -lt "$n" ]; do
  : >"$rundir/peer-$r.log"  # there before tail -f looks for it
  "$peer" --rank $r --peers "$peers" --topology "$topo" --metrics "$rundir/peer-$r.jsonl" \
    $(keyargs $r) $(stage_args $r) $(device_args $r) $(metrics_args $r) "$@" >"$rundir/peer-$r.log" 2>&1 &
  eval "pid_$r=\$!"
  pids="$pids $!"
  r=$((r + 1))
done
follow=
if [ -z "$quiet" ]; then
  # ends by itself once peer 0 has exited and its last lines are out
  tail -n +1 -s 0.2 --pid="$pid_0" -f "$rundir/peer-0.log" | grep --line-buffered -v '^peer 0:' &
  follow=$!
fi

# alive PID: still running (a zombie that the shell has not reaped yet is not)
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# started R: peer R got past its start (its neighbours answered or timed out)
started() { grep -q '"event":"start"' "$rundir/peer-$1.jsonl" 2>/dev/null; }
# stop_others: asks every running peer to leave (SIGTERM). One that has
# started gets 5 s to leave in order (end its round, checkpoint, tell its
# neighbours); one that has not has nothing to keep and gets 1 s. Then SIGKILL.
stop_others() {
  q=0
  while [ $q -lt "$n" ]; do
    eval "pq=\$pid_$q"
    [ -z "$pq" ] || ! alive "$pq" || { kill -TERM "$pq" 2>/dev/null || true; eval "stopped_$q=1"; }
    q=$((q + 1))
  done
  tick=0
  while [ $tick -lt 25 ]; do
    sleep 0.2; tick=$((tick + 1)) left=0 q=0
    while [ $q -lt "$n" ]; do
      eval "pq=\$pid_$q"
      if [ -n "$pq" ] && alive "$pq"; then
        if [ $tick -ge 5 ] && ! started $q; then kill -KILL "$pq" 2>/dev/null || true; else left=1; fi
      fi
      q=$((q + 1))
    done
    [ $left = 1 ] || break
  done
  for pq in $pids; do kill -KILL "$pq" 2>/dev/null || true; done
}
# Watch the peers until all have exited. A peer that fails before its start
# leaves a swarm that cannot start as asked: the others would wait for it
# up to --start-timeout and then train without it. Stop them at once instead,
# and say which peer failed and why.
status=0 running=$n failed_at_start=
while [ "$running" -gt 0 ]; do
  r=0
  while [ $r -lt "$n" ]; do
    eval "p=\$pid_$r"
    if [ -n "$p" ] && ! alive "$p"; then
      rc=0; wait "$p" 2>/dev/null || rc=$?  # (dash says "Killed" otherwise)
      eval "pid_$r= rc_$r=$rc"
      running=$((running - 1))
      [ $rc = 0 ] || status=1
      if [ $rc != 0 ] && [ -z "$failed_at_start" ] && ! started $r; then
        failed_at_start=$r
        {
          echo "local-swarm: peer $r failed at start (exit status $rc); stopping the other peers." \
            "Its last lines ($rundir/peer-$r.log):"
          tail -n 5 "$rundir/peer-$r.log" | sed 's/^/  | /'
        } >&2
        stop_others
      fi
    fi
    r=$((r + 1))
  done
  [ "$running" -eq 0 ] || sleep 0.2
done
[ -z "$follow" ] || wait "$follow" || true
trap - INT TERM

# The table: each peer's own model and the swarm average.
echo
printf '%-6s %6s %-14s %10s %10s %10s %s\n' peer stages devices local average seconds note
r=0
while [ $r -lt "$n" ]; do
  log="$rundir/peer-$r.log"
  local_acc=$(sed -n "s/^peer $r: local test accuracy \(.*\)%/\1/p" "$log")
  avg_acc=$(sed -n "s/^peer $r: swarm average test accuracy \(.*\)%/\1/p" "$log")
  unit=%
  if [ -z "$local_acc" ]; then # a language model: validation losses
    local_acc=$(sed -n "s/^peer $r: local validation loss \(.*\)/\1/p" "$log")
    avg_acc=$(sed -n "s/^peer $r: swarm average validation loss \(.*\)/\1/p" "$log")
    unit=" "
  fi
  secs=$(sed -n "s/^peer $r: done: [0-9]* rounds ([0-9]* run here) in \([0-9.]*\) s.*/\1/p" "$log")
  note=
  eval "stopped=\${stopped_$r:-}"
  # a failed peer's reason: its last "rumor-peer R: ..." line, whole
  [ -n "$local_acc" ] || {
    why=$(grep '^rumor-peer\( [0-9][0-9]*\)\{0,1\}: ' "$log" | grep -v ': WARNING: ' | tail -n 1 |
      sed 's/^rumor-peer\( [0-9][0-9]*\)\{0,1\}: //')
    [ -n "$why" ] || why=$(tail -n 1 "$log")
    note="failed: $why"
    [ -z "$stopped" ] || note="stopped: peer $failed_at_start failed at start"
    status=1; }
  ns=$(stage_args $r | sed 's/--stages //')
  nd=$(device_args $r | sed 's/--devices //')
  [ -n "$ns" ] || [ -z "$nd" ] || ns=$(echo "$nd" | tr ',' '\n' | wc -l)
  printf '%-6s %6s %-14s %9s%s %9s%s %10s %s\n' "$r" "${ns:--}" "${nd:-cpu}" "${local_acc:--}" \
    "$unit" "${avg_acc:--}" "$unit" "${secs:--}" "$note"
  r=$((r + 1))
done
exit $status
