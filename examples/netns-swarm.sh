#!/usr/bin/env bash
# netns-swarm.sh: run a swarm of rumor-peer processes, one per Linux network
# namespace, over rate-limited links, on one machine.
#
#   peer namespaces  PREFIX-0 .. PREFIX-(N-1)   eth0 = 10.77.0.(k+1)/24
#   bridge namespace PREFIX-br                  br0 with ports p0 .. p(N-1)
#
# Each peer's eth0 is one end of a veth pair whose other end (pK) is a port of
# a bridge living in its own namespace, so nothing is added to the host's
# network namespace and no packet can leave the namespaces made here. Every
# link is shaped with tbf in both directions (eth0 egress = the peer's upload,
# pK egress = its download), like a switch with RATE ports.
#
# Run `netns-swarm.sh --help` for usage. Needs root (ip netns, tc).
set -eu
set -o pipefail

PROG=${0##*/}
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)

usage() {
    cat <<EOF
Usage: $PROG [OPTIONS] [--] [RUMOR-PEER ARGS...]

Creates N network namespaces joined by a bridge (in a namespace of its own),
limits every link with tbf, runs one rumor-peer per namespace, shows peer 0's
output live and prints a table of accuracies and epoch times at the end.
Namespaces are removed on exit (also on Ctrl-C and errors) unless --keep.

Options (everything not listed here is passed to every rumor-peer unchanged,
e.g. --mode allreduce --topology onepeer-exp --epochs 2):
  -n, --nodes N        number of peers / namespaces (default 8, at most 250)
  -r, --rate RATE      tbf rate of every link, each direction, in tc units
                       (default 100mbit; 0 = unlimited)
      --burst BYTES    tbf burst (default: 10 ms at RATE, at least 32k)
      --link K=RATE    peer K's link at RATE instead (repeatable), e.g. 3=10mbit
                       for one peer on a slow line
      --delay MS       round-trip time added between any two peers: each peer
                       listens on 127.0.0.1:PORT+1 of its namespace behind an
                       examples/delay-relay on its address (half of MS each
                       way, 4 MiB in flight at most; netem is not needed)
      --jitter MS      with --delay: each one-way delay varies uniformly by up
                       to MS/2 either side of half the RTT (the relay keeps a
                       connection's order, as TCP does); MS <= --delay
      --loss PCT       drop PCT% of the packets arriving at every peer (0 to
                       50, e.g. 1 or 0.5), with an nftables rule in its
                       namespace (numgen random): TCP retransmits them, as on
                       a lossy line; the summary counts the drops
      --port PORT      TCP port of every peer (default 7000)
      --prefix NAME    namespace name prefix (default rumor-\$\$, i.e. unique per
                       run); leftovers with the same prefix are removed first
      --run-dir DIR    where logs and metrics go
                       (default \${TMPDIR:-/tmp}/rumor-swarm-PREFIX-DATE)
      --bin PATH       rumor-peer binary (default \$RUMOR_PEER, then
                       ../build/rumor-peer next to this script, then \$PATH)
      --timeout SECS   kill peers still running after SECS (default 0 = never)
      --no-follow      do not show peer 0's output live
      --traces         each peer writes a Chrome trace (rumor-peer --trace) to
                       RUNDIR/peerK.trace.json; they line up by their
                       clock_origin event (one clock: one machine)
      --keep           keep the namespaces after the run (remove them later
                       with --cleanup --prefix NAME)
      --setup-only     create the namespaces, print how to use them, keep them
      --cleanup        remove the namespaces of --prefix NAME (or, without
                       --prefix, those of dead runs) and exit
  -h, --help           this help

Each peer gets --rank K --peers tcp://10.77.0.1:PORT,...
--metrics RUNDIR/peerK.jsonl; its output goes to RUNDIR/peerK.log.
RUNDIR/netK.txt keeps namespace K's TCP counters (/proc/net/snmp) and its
shaping's statistics, upload and download; the summary adds up the TCP
segments retransmitted and the packets the shaping dropped.
CurveZMQ is on: a keypair per peer is made in RUNDIR/keys (also the swarm's
allow-list) and each peer gets --keys and --allow, unless --insecure (or
--keys) is among the rumor-peer arguments.
Traffic only flows between the namespaces this script creates.

Examples:
  sudo $PROG --epochs 2
  sudo $PROG -n 16 --rate 1gbit -- --mode allreduce --epochs 1
  sudo $PROG --topology onepeer-exp --lr 0.05
  sudo $PROG --delay 50 --jitter 20 --loss 1 -- --epochs 1
EOF
}

die() { echo "$PROG: error: $*" >&2; exit 2; }
say() { echo "$PROG: $*" >&2; }

# ---------------------------------------------------------------- options
NODES=8
RATE=100mbit
BURST=
PORT=7000
PREFIX=
RUN_DIR=
BIN=${RUMOR_PEER:-}
TIMEOUT=0
FOLLOW=1
TRACES=0
KEEP=0
SETUP_ONLY=0
CLEANUP_ONLY=0
PASS=()
DELAY=0
JITTER=0
LOSS=0
declare -A LINK_RATE

need_arg() { [ $# -ge 2 ] || die "option $1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        -n|--nodes) need_arg "$@"; NODES=$2; shift 2 ;;
        --nodes=*) NODES=${1#*=}; shift ;;
        -r|--rate) need_arg "$@"; RATE=$2; shift 2 ;;
        --rate=*) RATE=${1#*=}; shift ;;
        --burst) need_arg "$@"; BURST=$2; shift 2 ;;
        --port) need_arg "$@"; PORT=$2; shift 2 ;;
        --delay) need_arg "$@"; DELAY=$2; shift 2 ;;
        --jitter) need_arg "$@"; JITTER=$2; shift 2 ;;
        --loss) need_arg "$@"; LOSS=$2; shift 2 ;;
        --link) need_arg "$@"
            case $2 in [0-9]*=?*) LINK_RATE[${2%%=*}]=${2#*=} ;; *) die "--link '$2': expected K=RATE, e.g. 3=10mbit" ;; esac
            shift 2 ;;
        --prefix) need_arg "$@"; PREFIX=$2; shift 2 ;;
        --prefix=*) PREFIX=${1#*=}; shift ;;
        --run-dir) need_arg "$@"; RUN_DIR=$2; shift 2 ;;
        --run-dir=*) RUN_DIR=${1#*=}; shift ;;
        --bin) need_arg "$@"; BIN=$2; shift 2 ;;
        --timeout) need_arg "$@"; TIMEOUT=$2; shift 2 ;;
        --no-follow) FOLLOW=0; shift ;;
        --traces) TRACES=1; shift ;;
        --keep) KEEP=1; shift ;;
        --setup-only) SETUP_ONLY=1; KEEP=1; shift ;;
        --cleanup) CLEANUP_ONLY=1; shift ;;
        --) shift; PASS+=("$@"); break ;;
        *) PASS+=("$1"); shift ;;
    esac
done

case $NODES in ''|*[!0-9]*) die "--nodes must be a number, not '$NODES'" ;; esac
if [ "$NODES" -lt 1 ] || [ "$NODES" -gt 250 ]; then die "--nodes must be 1..250"; fi
case $PORT in ''|*[!0-9]*) die "--port must be a number" ;; esac
case $DELAY in ''|*[!0-9.]*|*.*.*) die "--delay must be milliseconds, not '$DELAY'" ;; esac
case $JITTER in ''|*[!0-9.]*|*.*.*) die "--jitter must be milliseconds, not '$JITTER'" ;; esac
awk -v j="$JITTER" -v d="$DELAY" 'BEGIN { exit !(j == 0 || (d > 0 && j <= d)) }' ||
    die "--jitter $JITTER needs --delay of at least as many milliseconds (--delay $DELAY)"
case $LOSS in ''|*[!0-9.]*|*.*.*) die "--loss must be a percentage, not '$LOSS'" ;; esac
awk -v l="$LOSS" 'BEGIN { exit !(l <= 50) }' || die "--loss $LOSS: expected 0 to 50 (%)"
# drop a packet when a random number in [0, 100000) falls under this
LOSS_N=$(awk -v l="$LOSS" 'BEGIN { printf "%.0f", l * 1000 }')
for k in "${!LINK_RATE[@]}"; do
    case $k in *[!0-9]*) die "--link: '$k' is not a peer number" ;; esac
    [ "$k" -lt "$NODES" ] || die "--link $k=...: there are only $NODES peers"
done
case $TIMEOUT in ''|*[!0-9]*) die "--timeout must be whole seconds" ;; esac
if [ -n "$PREFIX" ]; then
    case $PREFIX in *[!A-Za-z0-9_.-]*|-*) die "--prefix may hold only letters, digits, _ . -" ;; esac
    [ ${#PREFIX} -le 40 ] || die "--prefix too long"
fi
for a in "${PASS[@]+"${PASS[@]}"}"; do
    case $a in
        --rank|--rank=*|--peers|--peers=*|--metrics|--metrics=*)
            die "$a is set by $PROG itself; do not pass it" ;;
        --trace|--trace=*)
            die "$a would have every peer write one file: use $PROG --traces" ;;
    esac
done

# ---------------------------------------------------------------- checks
[ "$(id -u)" -eq 0 ] || die "needs root (it creates network namespaces, veth pairs and tc qdiscs): run it with sudo"
command -v ip >/dev/null 2>&1 || die "the 'ip' command (iproute2) is not installed"
if [ "$RATE" != 0 ]; then
    command -v tc >/dev/null 2>&1 || die "the 'tc' command (iproute2) is not installed; use --rate 0 for unlimited links"
fi
if [ "$LOSS_N" != 0 ]; then
    command -v nft >/dev/null 2>&1 || die "--loss needs the 'nft' command (Debian: apt-get install nftables)"
fi
ip netns list >/dev/null 2>&1 || die "'ip netns' does not work here (no network namespace support?)"

# tc rate -> bits per second (for the default burst); empty if unparsable
rate_bps() {
    local r=${1,,} num unit
    num=${r%%[!0-9.]*}; unit=${r#"$num"}
    [ -n "$num" ] || return 0
    case $unit in
        bit|'') awk -v n="$num" 'BEGIN{printf "%.0f\n", n}' ;;
        kbit) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*1e3}' ;;
        mbit) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*1e6}' ;;
        gbit) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*1e9}' ;;
        tbit) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*1e12}' ;;
        bps)  awk -v n="$num" 'BEGIN{printf "%.0f\n", n*8}' ;;
        kbps) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*8e3}' ;;
        mbps) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*8e6}' ;;
        gbps) awk -v n="$num" 'BEGIN{printf "%.0f\n", n*8e9}' ;;
        *) ;;
    esac
}
if [ "$RATE" != 0 ] && [ -z "$BURST" ]; then
    bps=$(rate_bps "$RATE")
    [ -n "$bps" ] || die "cannot read --rate '$RATE' (use e.g. 100mbit, 1gbit, 500kbit)"
    BURST=$(awk -v b="$bps" 'BEGIN{x=b/8/100; if (x<32768) x=32768; printf "%.0f\n", x}')
fi

# ---------------------------------------------------------------- namespaces
STATE_DIR=/run/rumor-netns
NS_CREATED=()          # namespaces made by this run, deleted on exit
PIDS=()                # peer pids
RELAY_PIDS=()          # --delay relays
FOLLOW_PID=
CLEANED=0

ns_of_prefix() {       # namespaces named PREFIX-br or PREFIX-<number>
    ip netns list 2>/dev/null | awk '{print $1}' |
        grep -E "^$(printf '%s' "$1" | sed 's/[.]/\\./g')-(br|[0-9]+)\$" || true
}

delete_ns() {          # delete namespaces, killing what still runs in them
    local ns pid
    for ns in "$@"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
    done
    for ns in "$@"; do
        if [ -n "$(ip netns pids "$ns" 2>/dev/null)" ]; then
            sleep 1
            for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        fi
        ip netns del "$ns" 2>/dev/null || true
    done
}

cleanup_prefix() {
    local p=$1 list
    list=$(ns_of_prefix "$p")
    if [ -n "$list" ]; then
        # shellcheck disable=SC2086
        say "removing namespaces of prefix $p:" $list
        # shellcheck disable=SC2086
        delete_ns $list
    fi
    rm -f "$STATE_DIR/$p.keep" 2>/dev/null || true
}

cleanup_dead_runs() {  # default prefixes rumor-<pid>: remove if <pid> is gone and not kept
    local p pid
    for p in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^\(rumor-[0-9][0-9]*\)-\(br\|[0-9][0-9]*\)$/\1/p' | sort -u); do
        pid=${p#rumor-}
        [ -e "$STATE_DIR/$p.keep" ] && continue
        if [ "$pid" != "$$" ] && ! kill -0 "$pid" 2>/dev/null; then
            say "leftover namespaces of a dead run ($p)"
            cleanup_prefix "$p"
        fi
    done
}

if [ "$CLEANUP_ONLY" = 1 ]; then
    if [ -n "$PREFIX" ]; then cleanup_prefix "$PREFIX"; else cleanup_dead_runs; fi
    exit 0
fi

[ -n "$PREFIX" ] || PREFIX=rumor-$$
BR_NS=$PREFIX-br

# shellcheck disable=SC2317  # invoked by trap
on_exit() {
    local rc=$? pid alive
    [ "$CLEANED" = 1 ] && return
    CLEANED=1
    set +e
    trap '' INT TERM
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        alive=0
        for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.3
    done
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill -KILL "$pid" 2>/dev/null; done
    for pid in "${RELAY_PIDS[@]+"${RELAY_PIDS[@]}"}"; do kill -TERM "$pid" 2>/dev/null; done
    [ -n "$FOLLOW_PID" ] && kill "$FOLLOW_PID" 2>/dev/null
    if [ "$KEEP" = 1 ]; then
        mkdir -p "$STATE_DIR" && : > "$STATE_DIR/$PREFIX.keep"
        [ ${#NS_CREATED[@]} -gt 0 ] && say "kept namespaces $PREFIX-{br,0..$((NODES-1))}; remove them with: $PROG --cleanup --prefix $PREFIX"
    elif [ ${#NS_CREATED[@]} -gt 0 ]; then
        delete_ns "${NS_CREATED[@]}"
        rm -f "$STATE_DIR/$PREFIX.keep" 2>/dev/null
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM
trap 'say "hang-up"; exit 129' HUP

cleanup_dead_runs
cleanup_prefix "$PREFIX"     # leftovers of a crashed run with the same prefix

addr_of() { echo "10.77.0.$(( $1 + 1 ))"; }

say "creating $NODES namespaces $PREFIX-0..$((NODES-1)) + bridge $BR_NS, links $([ "$RATE" = 0 ] && echo unlimited || echo "$RATE each way, tbf burst $BURST")"
ip netns add "$BR_NS" || die "cannot create network namespace $BR_NS"
NS_CREATED+=("$BR_NS")
ip -n "$BR_NS" link set lo up
ip -n "$BR_NS" link add br0 type bridge
ip -n "$BR_NS" link set br0 up
for ((k = 0; k < NODES; k++)); do
    ns=$PREFIX-$k
    ip netns add "$ns" || die "cannot create network namespace $ns"
    NS_CREATED+=("$ns")
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1 || true
    # created inside the bridge namespace, peer end moved straight into $ns:
    # no interface ever appears in the host namespace
    ip -n "$BR_NS" link add "p$k" type veth peer name eth0 netns "$ns"
    ip -n "$BR_NS" link set "p$k" master br0
    ip -n "$BR_NS" link set "p$k" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(addr_of $k)/24" dev eth0
    ip -n "$ns" link set eth0 up
    rate=${LINK_RATE[$k]:-$RATE} burst=$BURST
    if [ -n "${LINK_RATE[$k]:-}" ]; then
        b=$(rate_bps "$rate"); [ -n "$b" ] || die "--link $k=$rate: unknown rate"
        burst=$(awk -v b="$b" 'BEGIN{x=b/8/100; if (x<32768) x=32768; printf "%.0f\n", x}')
    fi
    if [ "$rate" != 0 ]; then
        ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms ||
            die "tc tbf failed on $ns/eth0 (rate $rate burst $burst)"
        ip netns exec "$BR_NS" tc qdisc add dev "p$k" root tbf rate "$rate" burst "$burst" latency 50ms ||
            die "tc tbf failed on $BR_NS/p$k"
    fi
    if [ "$LOSS_N" != 0 ]; then
        # every packet crosses one peer's eth0 inwards: LOSS% of them dropped
        printf 'table inet rumor_loss {\n chain in {\n  type filter hook input priority 0; policy accept;\n  iifname "eth0" numgen random mod 100000 < %s counter drop\n }\n}\n' "$LOSS_N" |
            ip netns exec "$ns" nft -f - || die "nft failed in $ns (--loss $LOSS)"
    fi
done
nports=$(ip -n "$BR_NS" -o link show master br0 | wc -l)
[ "$nports" -eq "$NODES" ] || die "bridge has $nports ports, expected $NODES"

EPS=
for ((k = 0; k < NODES; k++)); do EPS=${EPS:+$EPS,}tcp://$(addr_of $k):$PORT; done

if [ "$SETUP_ONLY" = 1 ]; then
    say "namespaces ready: $PREFIX-0..$((NODES-1)) (10.77.0.1..$(addr_of $((NODES-1)))), bridge $BR_NS"
    say "run a peer:  ip netns exec $PREFIX-K rumor-peer --rank K --peers $EPS ..."
    say "remove:      $PROG --cleanup --prefix $PREFIX"
    exit 0
fi

# ---------------------------------------------------------------- binary
if [ -z "$BIN" ]; then
    if [ -x "$SCRIPT_DIR/../build/rumor-peer" ]; then BIN=$SCRIPT_DIR/../build/rumor-peer
    elif command -v rumor-peer >/dev/null 2>&1; then BIN=$(command -v rumor-peer)
    else die "rumor-peer not found: build it, or pass --bin PATH (or set RUMOR_PEER)"; fi
fi
case $BIN in /*) ;; */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/${BIN##*/} ;; *) BIN=$(command -v "$BIN" || echo "$BIN") ;; esac
[ -x "$BIN" ] || die "rumor-peer binary '$BIN' is not executable"

# ---------------------------------------------------------------- run
[ -n "$RUN_DIR" ] || RUN_DIR=${TMPDIR:-/tmp}/rumor-swarm-$PREFIX-$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
{
    echo "date: $(date -Is)"
    echo "nodes: $NODES  rate: $RATE  burst: ${BURST:-none}  delay: ${DELAY} ms  jitter: ${JITTER} ms  loss: ${LOSS}%  prefix: $PREFIX"
    for k in "${!LINK_RATE[@]}"; do echo "link $k: ${LINK_RATE[$k]}"; done
    echo "binary: $BIN"
    echo "peers: $EPS"
    printf 'args:'; printf ' %q' "${PASS[@]+"${PASS[@]}"}"; echo
} > "$RUN_DIR/run.txt"

STDBUF=()
command -v stdbuf >/dev/null 2>&1 && STDBUF=(stdbuf -oL -eL)
TMO=()
[ "$TIMEOUT" -gt 0 ] && TMO=(timeout --kill-after=10 "$TIMEOUT")

# Secure by default, as rumor-peer: a keypair per peer in RUN_DIR/keys,
# which is also the allow-list; --insecure (or keys of the caller's) skips it.
SECURE=1
for a in "${PASS[@]+"${PASS[@]}"}"; do
    case $a in --insecure|--keys|--keys=*) SECURE=0 ;; esac
done
if [ "$SECURE" = 1 ]; then
    mkdir -p "$RUN_DIR/keys"
    for ((k = 0; k < NODES; k++)); do
        "$BIN" keygen "$RUN_DIR/keys/peer-$k" >/dev/null || die "rumor-peer keygen failed"
    done
fi
keyargs() { [ "$SECURE" = 1 ] && echo "--keys $RUN_DIR/keys/peer-$1.key --allow $RUN_DIR/keys"; }

say "run directory $RUN_DIR"
# --delay: a relay on each peer's address, the peer behind it on loopback
LISTEN=()
if [ "$DELAY" != 0 ]; then
    PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
    for ((k = 0; k < NODES; k++)); do
        ip netns exec "$PREFIX-$k" "$PY" "$SCRIPT_DIR/delay-relay" "$(addr_of $k):$PORT" \
            "127.0.0.1:$((PORT + 1))" --delay "$DELAY" --jitter "$JITTER" \
            > "$RUN_DIR/relay$k.log" 2>&1 < /dev/null &
        RELAY_PIDS+=($!)
    done
    for ((k = 0; k < NODES; k++)); do
        for _ in $(seq 50); do grep -q '^delay-relay:' "$RUN_DIR/relay$k.log" && break; sleep 0.1; done
        grep -q "RTT" "$RUN_DIR/relay$k.log" || die "delay relay $k did not start: $(cat "$RUN_DIR/relay$k.log")"
    done
    LISTEN=(--listen "tcp://127.0.0.1:$((PORT + 1))")
    say "links add $DELAY ms of round-trip time, jitter $JITTER ms (examples/delay-relay in each namespace)"
fi
say "starting $NODES peers: $BIN ${PASS[*]-}"
T0=$(date +%s.%N)
for ((k = 0; k < NODES; k++)); do
    TARGS=()
    [ "$TRACES" = 1 ] && TARGS=(--trace "$RUN_DIR/peer$k.trace.json")
    rm -f "$RUN_DIR/peer$k.jsonl"
    ip netns exec "$PREFIX-$k" "${TMO[@]+"${TMO[@]}"}" "${STDBUF[@]+"${STDBUF[@]}"}" "$BIN" \
        --rank "$k" --peers "$EPS" --metrics "$RUN_DIR/peer$k.jsonl" $(keyargs "$k") \
        "${TARGS[@]+"${TARGS[@]}"}" \
        "${LISTEN[@]+"${LISTEN[@]}"}" \
        "${PASS[@]+"${PASS[@]}"}" > "$RUN_DIR/peer$k.log" 2>&1 < /dev/null &
    PIDS+=($!)
done
if [ "$FOLLOW" = 1 ]; then
    tail -n +1 -f --pid="${PIDS[0]}" "$RUN_DIR/peer0.log" 2>/dev/null &
    FOLLOW_PID=$!
fi

declare -A RC
FAILED=0
for ((k = 0; k < NODES; k++)); do
    rc=0; wait "${PIDS[$k]}" || rc=$?
    RC[$k]=$rc
    [ "$rc" -eq 0 ] || FAILED=$((FAILED + 1))
done
T1=$(date +%s.%N)
# each namespace's TCP counters (its own, from zero) and its shaping's
# drops, both directions: a slow run shows here whether TCP lost packets
for ((k = 0; k < NODES; k++)); do
    {
        ip netns exec "$PREFIX-$k" cat /proc/net/snmp 2>/dev/null | grep '^Tcp:'
        if [ "${LINK_RATE[$k]:-$RATE}" != 0 ]; then
            echo "upload:"; ip netns exec "$PREFIX-$k" tc -s qdisc show dev eth0 2>/dev/null
            echo "download:"; ip netns exec "$BR_NS" tc -s qdisc show dev "p$k" 2>/dev/null
        fi
        if [ "$LOSS_N" != 0 ]; then
            echo "loss:"; ip netns exec "$PREFIX-$k" nft list table inet rumor_loss 2>/dev/null
        fi
    } > "$RUN_DIR/net$k.txt"
done
NET_LOST=$(cat "$RUN_DIR"/net*.txt 2>/dev/null | awk '
    /^Tcp:/ { if (!h) { for (i = 2; i <= NF; i++) col[$i] = i; h = 1; next }
              out += $col["OutSegs"]; re += $col["RetransSegs"]; h = 0 }
    /dropped/ { s = $0; sub(/.*dropped /, "", s); sub(/,.*/, "", s); dr += s }
    /counter packets/ { s = $0; sub(/.*counter packets /, "", s); sub(/ .*/, "", s); lost += s; nft = 1 }
    END { if (out) printf "TCP: %d segments sent, %d retransmitted (%.3f%%); the links'"'"' shaping dropped %d packets%s\n", out, re, 100 * re / out, dr, nft ? sprintf("; --loss dropped %d", lost) : "" }')
if [ -n "$FOLLOW_PID" ]; then
    sleep 0.3; kill "$FOLLOW_PID" 2>/dev/null || true
    wait "$FOLLOW_PID" 2>/dev/null || true; FOLLOW_PID=
fi

# ---------------------------------------------------------------- report
# field NAME of the last JSON line whose "event" is EV (flat objects only)
json_last() {   # file event field
    [ -f "$1" ] || return 0
    awk -v ev="$2" -v f="$3" '
        index($0, "\"event\":\"" ev "\"") || index($0, "\"event\": \"" ev "\"") {
            s = $0; k = "\"" f "\":"; i = index(s, k); if (!i) next
            s = substr(s, i + length(k)); sub(/^ */, "", s); sub(/[,}].*/, "", s); v = s
        }
        END { if (v != "") print v }' "$1"
}
epoch_times() { # file -> "e1 e2 ..." epoch_seconds of every epoch event
    [ -f "$1" ] || return 0
    awk '
        index($0, "\"event\":\"epoch\"") || index($0, "\"event\": \"epoch\"") {
            s = $0; k = "\"epoch_seconds\":"; i = index(s, k); if (!i) next
            s = substr(s, i + length(k)); sub(/^ */, "", s); sub(/[,}].*/, "", s)
            printf "%s%.2f", (n++ ? " " : ""), s
        }
        END { if (n) print "" }' "$1"
}
from_log() {    # file pattern -> number before % on the last matching line
    [ -f "$1" ] || return 0
    { grep -E "$2" "$1" 2>/dev/null || true; } | tail -n 1 | sed -n 's/.* \([0-9.][0-9.]*\)%.*/\1/p'
}

SUMMARY=$RUN_DIR/summary.tsv
printf 'rank\texit\tlocal_acc\tavg_acc\trounds\tseconds\tepoch_seconds\n' > "$SUMMARY"
echo
printf '%-5s %-5s %9s %9s %8s %9s  %s\n' peer exit local% average% rounds wall_s "seconds per epoch"
for ((k = 0; k < NODES; k++)); do
    m=$RUN_DIR/peer$k.jsonl; l=$RUN_DIR/peer$k.log
    la=$(json_last "$m" "done" local_accuracy); aa=$(json_last "$m" "done" average_accuracy)
    # (fractions in the metrics, -1 = not measured): print percent
    [ -n "$la" ] && la=$(awk -v x="$la" 'BEGIN{if (x >= 0) printf "%.2f", (x <= 1 ? 100*x : x)}')
    [ -n "$aa" ] && aa=$(awk -v x="$aa" 'BEGIN{if (x >= 0) printf "%.2f", (x <= 1 ? 100*x : x)}')
    [ -n "$la" ] || la=$(from_log "$l" 'local test accuracy')
    [ -n "$aa" ] || aa=$(from_log "$l" 'average test accuracy')
    rounds=$(json_last "$m" "done" rounds); secs=$(json_last "$m" "done" seconds)
    [ -n "$secs" ] && secs=$(awk -v x="$secs" 'BEGIN{printf "%.2f", x}')
    ep=$(epoch_times "$m")
    printf '%-5s %-5s %9s %9s %8s %9s  %s\n' "$k" "${RC[$k]}" "${la:--}" "${aa:--}" "${rounds:--}" "${secs:--}" "${ep:--}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$k" "${RC[$k]}" "${la:-}" "${aa:-}" "${rounds:-}" "${secs:-}" "${ep:-}" >> "$SUMMARY"
done
# per-epoch mean / max over peers
awk -F'\t' 'NR > 1 && $7 != "" {
        n = split($7, e, " "); for (i = 1; i <= n; i++) { s[i] += e[i]; c[i]++; if (e[i] > mx[i]) mx[i] = e[i] }
        if (n > ne) ne = n }
    END { for (i = 1; i <= ne; i++) printf "epoch %d: %.2f s mean over %d peers, %.2f s slowest\n", i, s[i]/c[i], c[i], mx[i] }' "$SUMMARY"
awk -v a="$T0" -v b="$T1" 'BEGIN{printf "swarm wall time %.1f s (including start-up)\n", b - a}'
[ -n "$NET_LOST" ] && echo "$NET_LOST"
echo "logs and metrics: $RUN_DIR"
if [ "$FAILED" -gt 0 ]; then
    say "$FAILED of $NODES peers failed (exit 124: killed by --timeout); see $RUN_DIR/peerK.log"
    exit 1
fi
exit 0
