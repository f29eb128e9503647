#!/bin/sh
# bench_netns.sh: wall-clock per epoch of D-PSGD (ring, onepeer-exp) against the
# ring all-reduce baseline, 8 rumor-peer processes in network namespaces whose
# links are limited to 100 Mbit/s each way with tbf (examples/netns-swarm.sh).
# With Debian's python3-torch present it also runs PyTorch DDP (gloo) on the
# same links (examples/ddp_baseline.py).
#
# Prints "bench: NAME = VALUE UNIT" lines. Exits 77 (skip) when not root, when
# `ip netns` or tbf does not work, or when rumor-peer is not built.
#
# Environment: RUMOR_BUILDDIR, RUMOR_SRCDIR (set by make bench);
#   RUMOR_BENCH_NETNS_EPOCHS (default 2), RUMOR_BENCH_NETNS_PEERS (default 8),
#   RUMOR_BENCH_NETNS_RATE (default 100mbit), RUMOR_BENCH_NETNS_BATCH (default
#   128 per peer), RUMOR_BENCH_NETNS_DDP=0 to skip
#   DDP, RUMOR_BENCH_NETNS_KEEP=1 to keep the run directory,
#   RUMOR_BENCH_NETNS_ONLY="NAME ..." to run only the swarms named (dpsgd_ring,
#   dpsgd_onepeer, dpsgd_onepeer_whole, allreduce, ddp_gloo, and the WAN
#   runs' names), RUMOR_BENCH_NETNS_ARGS="..." rumor-peer options added to
#   the runs without delay (an A/B: "--send-ahead no", "--chunk-mb 0.25"),
#   RUMOR_BENCH_NETNS_SLOWOPT="..." the options of the runs with a 10 Mbit/s
#   peer (default "--min-round-timeout 2.5"; "" for an A/B),
#   RUMOR_BENCH_NETNS_RUN_TIMEOUT seconds before a swarm is killed
#   (default 60 + 45 per epoch). A swarm that fails or times out is reported
#   and the bench exits 1 after the other runs.
#
# What to expect (MLP 784-256-256-10: 269,322 parameters, 1.08 MB; a shard of
# 7,500 examples = 58 rounds of batch 128 per epoch; a link carries ~95.5 Mbit/s
# of TCP payload):
#   D-PSGD ring    sends its 1.08 MB to 2 neighbours a round: 2.16 MB up per
#                  peer, ~0.18 s a round on the wire, ~10.5 s an epoch.
#   onepeer-exp    sends to 1 peer a round: 1.08 MB, ~0.09 s, ~5.3 s an epoch.
#   ring all-reduce  2(N-1)/N x 1.08 MB = 1.89 MB up per peer (~0.16 s a round,
#                  ~9.2 s an epoch) but in 2(N-1) = 14 dependent steps, each
#                  paying a latency and the slowest peer.
# So on bandwidth alone the ring all-reduce beats ring D-PSGD by a little and
# onepeer-exp beats both by ~2x; D-PSGD's gains are elsewhere (no global
# barrier: slow or missing peers, and overlapping the send with the gradient).
# On a 2-vCPU machine the 8 peers also share 2 cores, which adds compute time.
if [ -z "${BASH_VERSION:-}" ]; then
    command -v bash >/dev/null 2>&1 || { echo "bench_netns: needs bash"; exit 77; }
    exec bash "$0" "$@"
fi
set -eu
set -o pipefail

SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
EPOCHS=${RUMOR_BENCH_NETNS_EPOCHS:-2}
NODES=${RUMOR_BENCH_NETNS_PEERS:-8}
RATE=${RUMOR_BENCH_NETNS_RATE:-100mbit}
TAG=netns_$RATE
# each swarm is killed after this long (a run takes ~45 s here with 2 epochs)
RUN_TIMEOUT=${RUMOR_BENCH_NETNS_RUN_TIMEOUT:-$(( 60 + 45 * EPOCHS ))}
SWARM=$SRCDIR/examples/netns-swarm.sh
BIN=$BUILDDIR/rumor-peer

skip() { echo "bench_netns: skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces (run make bench as root)"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
command -v tc >/dev/null 2>&1 || skip "the tc command (iproute2) is not installed"
[ -f "$SWARM" ] || skip "$SWARM not found (set RUMOR_SRCDIR)"
[ -x "$BIN" ] || skip "$BIN not built (set RUMOR_BUILDDIR)"
probe=rumor-benchprobe-$$
if ! ip netns add "$probe" 2>/dev/null; then skip "'ip netns add' does not work here"; fi
if ! ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null ||
   ! ip netns exec "$probe" tc qdisc add dev v0 root tbf rate "$RATE" burst 128k latency 50ms 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null || true
    skip "veth pairs or tbf shaping do not work in a network namespace here"
fi
ip netns del "$probe"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rumor-bench-netns.XXXXXX")
PREFIX=rumor-$$
SWARM_PID=
cleanup() {
    if [ -n "$SWARM_PID" ]; then    # it removes its namespaces on TERM
        kill -TERM "$SWARM_PID" 2>/dev/null || true
        wait "$SWARM_PID" 2>/dev/null || true
    fi
    bash "$SWARM" --cleanup --prefix "$PREFIX-link" >/dev/null 2>&1 || true
    if [ "${RUMOR_BENCH_NETNS_KEEP:-0}" = 1 ]; then echo "bench_netns: run directory kept: $WORK"
    else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench() { printf 'bench: %s = %s %s\n' "$1" "$2" "$3"; }

# ---- the link itself: TCP payload rate through the tbf shaping, if python3 is here
PY=$(command -v python3 || true)
if [ -n "$PY" ]; then
    cat > "$WORK/tput.py" <<'EOF'
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(20); c, _ = s.accept(); c.settimeout(20)
    n, t0 = 0, None
    while True:
        b = c.recv(1 << 20)
        if not b: break
        if t0 is None: t0 = time.time()
        n += len(b)
    print("%.1f" % (n * 8 / (time.time() - t0) / 1e6))
else:
    for _ in range(50):
        try: c = socket.create_connection((host, port)); break
        except OSError: time.sleep(0.1)
    buf, end = b"x" * (1 << 20), time.time() + float(sys.argv[4])
    while time.time() < end: c.sendall(buf)
    c.close()
EOF
    if bash "$SWARM" -n 2 --rate "$RATE" --prefix "$PREFIX-link" --setup-only >/dev/null 2>&1; then
        ip netns exec "$PREFIX-link-1" "$PY" "$WORK/tput.py" server 10.77.0.2 5201 > "$WORK/tput.out" 2>&1 &
        sp=$!
        ip netns exec "$PREFIX-link-0" "$PY" "$WORK/tput.py" client 10.77.0.2 5201 4 >/dev/null 2>&1 || true
        wait "$sp" || true
        LINK=$(tail -n 1 "$WORK/tput.out")
        case $LINK in *[!0-9.]*|'') echo "bench_netns: link test failed: $(cat "$WORK/tput.out")"; LINK= ;; esac
        [ -n "$LINK" ] && bench "${TAG}_link_tcp" "$LINK" "Mbit/s"
        bash "$SWARM" --cleanup --prefix "$PREFIX-link" >/dev/null 2>&1 || true
    fi
fi
LINK_MBIT=${LINK:-95.5}

# ---- one swarm run: NAME BIN ARGS...  (logs and metrics in $WORK/NAME)
run_swarm() {
    local name=$1 bin=$2 rc=0
    shift 2
    echo "-- $name: $NODES peers, $RATE links: $*"
    # in the background, so that a signal reaches our trap (and the swarm) at once
    bash "$SWARM" -n "$NODES" --rate "$RATE" --prefix "$PREFIX" --bin "$bin" \
        --run-dir "$WORK/$name" --no-follow --timeout "$RUN_TIMEOUT" \
        "${NETNS_EXTRA[@]+"${NETNS_EXTRA[@]}"}" -- "$@" \
        > "$WORK/$name.out" 2>&1 &
    SWARM_PID=$!
    wait "$SWARM_PID" || rc=$?
    SWARM_PID=
    # the table and the per-epoch summary
    sed -n '/^peer  exit/,$p' "$WORK/$name.out"
    if [ "$rc" -ne 0 ]; then
        echo "bench_netns: the $name swarm failed (exit $rc); the end of each peer's log:"
        grep -E 'error|netns-swarm' "$WORK/$name.out" | grep -v '^netns-swarm.sh: \(creating\|run directory\|starting\)' || true
        for f in "$WORK/$name"/peer*.log; do echo "== $f"; tail -n 3 "$f"; done
        return 1
    fi
}

# per-epoch wall time of a run: for each epoch the slowest peer's
# epoch_seconds (the swarm finishes an epoch when its last peer does), then
# the mean over the epochs
epoch_s() {
    cat "$WORK/$1"/peer*.jsonl 2>/dev/null | awk '
        /"event": *"epoch"/ {
            e = $0; sub(/.*"epoch": */, "", e); sub(/[,}].*/, "", e)
            s = $0; sub(/.*"epoch_seconds": */, "", s); sub(/[,}].*/, "", s)
            if (!(e in mx) || s + 0 > mx[e]) mx[e] = s + 0
        }
        END { for (e in mx) { t += mx[e]; n++ } if (n) printf "%.2f\n", t / n }'
}
# the CPU time an epoch needs at least: for each epoch, all peers'
# epoch_cpu_seconds over the machine's cores (the swarm's processes share
# them), then the mean over the epochs. Where it is above the link bound,
# the machine and not the links sets the pace
epoch_cpu_s() {
    cat "$WORK/$1"/peer*.jsonl 2>/dev/null | awk -v cores="$(getconf _NPROCESSORS_ONLN)" '
        /"event": *"epoch"/ && /"epoch_cpu_seconds":/ {
            e = $0; sub(/.*"epoch": */, "", e); sub(/[,}].*/, "", e)
            c = $0; sub(/.*"epoch_cpu_seconds": */, "", c); sub(/[,}].*/, "", c)
            cpu[e] += c
        }
        END { for (e in cpu) { t += cpu[e] / cores; n++ } if (n) printf "%.2f\n", t / n }'
}
# mean over peers of a number in the done events
done_mean() {
    cat "$WORK/$1"/peer*.jsonl 2>/dev/null | awk -v f="$2" '
        /"event": *"done"/ {
            k = "\"" f "\":"; i = index($0, k); if (!i) next
            s = substr($0, i + length(k)); sub(/^ */, "", s); sub(/[,}].*/, "", s)
            if (s + 0 < 0) next  # -1: not measured (a swarm average that failed)
            t += s; n++
        }
        END { if (n) printf "%.6f\n", t / n }'
}
# mean over peers of bytes_sent / rounds, in MB
sent_per_round() {
    cat "$WORK/$1"/peer*.jsonl 2>/dev/null | awk '
        /"event": *"done"/ && /"bytes_sent":/ {
            b = $0; sub(/.*"bytes_sent": */, "", b); sub(/[,}].*/, "", b)
            r = $0; sub(/.*"rounds": */, "", r); sub(/[,}].*/, "", r)
            if (r > 0 && b > 0) { t += b / r; n++ }
        }
        END { if (n) printf "%.3f\n", t / n / 1e6 }'
}
rounds_per_epoch() {
    awk '/"event": *"epoch"/ && /"epoch": *1[,}]/ { r = $0; sub(/.*"round": */, "", r); sub(/[,}].*/, "", r); print r; exit }' \
        "$WORK/$1/peer0.jsonl"
}
pct() { awk -v x="$1" 'BEGIN { if (x != "" && x >= 0) printf "%.2f", 100 * x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b }'; }
# the same to 4 significant digits (small ratios: bytes)
ratio4() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.4g", a / b }'; }

report() {  # NAME LABEL
    local e acc mb r bound cpu re cu
    e=$(epoch_s "$1"); acc=$(pct "$(done_mean "$1" average_accuracy)")
    [ -n "$e" ] && bench "${TAG}_$2_epoch_s" "$e" s
    [ -n "$acc" ] && bench "${TAG}_$2_accuracy" "$acc" %
    mb=$(sent_per_round "$1"); r=$(rounds_per_epoch "$1")
    if [ -n "$mb" ] && [ -n "$r" ]; then
        bench "${TAG}_$2_sent_per_round" "$mb" "MB/peer"
        # the time the payload alone needs on one link (the slowest: every
        # mode here sends as much from each peer), per epoch
        bound=$(awk -v mb="$mb" -v r="$r" -v l="${BOUND_MBIT:-$LINK_MBIT}" 'BEGIN { printf "%.2f", mb * 8 * r / l }')
        bench "${TAG}_$2_link_bound_epoch_s" "$bound" s
        [ -n "$e" ] && bench "${TAG}_$2_link_bound_share" "$(ratio "$bound" "$e")" x
        cpu=$(epoch_cpu_s "$1")
        if [ -n "$cpu" ]; then
            bench "${TAG}_$2_cpu_bound_epoch_s" "$cpu" s
            # the nearer bound of the two: links or cores
            [ -n "$e" ] && bench "${TAG}_$2_bound_share" \
                "$(ratio "$(awk -v a="$bound" -v b="$cpu" 'BEGIN { print (a > b ? a : b) }')" "$e")" x
        fi
    fi
    # TCP segments retransmitted, all namespaces (netns-swarm.sh's summary):
    # whether a run's links lost packets
    re=$(sed -n "s/^TCP: .* retransmitted (\([0-9.]*\)%).*/\1/p" "$WORK/$1.out" 2>/dev/null | tail -n 1)
    [ -n "$re" ] && bench "${TAG}_$2_tcp_retransmitted" "$re" %
    # the share of its time a peer computed rather than waited (peers' mean)
    cu=$(done_mean "$1" compute_utilization)
    [ -n "$cu" ] && bench "${TAG}_$2_compute_utilization" "$(awk -v x="$cu" 'BEGIN { printf "%.3f", x }')" x
    LAST_E=$e
}

NETNS_EXTRA=()
LAST_E=
# RUMOR_BENCH_NETNS_ONLY="dpsgd_onepeer allreduce": only the runs named
wanted() { [ -z "${RUMOR_BENCH_NETNS_ONLY:-}" ] || case " $RUMOR_BENCH_NETNS_ONLY " in *" $1 "*) true ;; *) false ;; esac; }
# the batch is pinned so that the figures do not move with rumor-peer's default
BATCH=${RUMOR_BENCH_NETNS_BATCH:-128}
COMMON=(--epochs "$EPOCHS" --batch "$BATCH" --seed 1 ${RUMOR_BENCH_NETNS_ARGS:-})
T_START=$(date +%s)
FAILED=
EPOCH_dpsgd_ring="" EPOCH_dpsgd_onepeer="" EPOCH_allreduce="" EPOCH_ddp_gloo=""
if [ "${RUMOR_BENCH_NETNS_LAN:-1}" != 0 ]; then
if ! wanted dpsgd_ring; then :; elif run_swarm dpsgd_ring "$BIN" --mode dpsgd --topology ring "${COMMON[@]}" --progress 5; then
    report dpsgd_ring dpsgd_ring; EPOCH_dpsgd_ring=$LAST_E
else FAILED="$FAILED dpsgd_ring"; fi
if ! wanted dpsgd_onepeer; then :; elif run_swarm dpsgd_onepeer "$BIN" --mode dpsgd --topology onepeer-exp "${COMMON[@]}" --progress 5; then
    report dpsgd_onepeer dpsgd_onepeer; EPOCH_dpsgd_onepeer=$LAST_E
else FAILED="$FAILED dpsgd_onepeer"; fi
# the same without --send-ahead (each round sent whole at its start), back to back
if ! wanted dpsgd_onepeer_whole; then :; elif run_swarm dpsgd_onepeer_whole "$BIN" --mode dpsgd --topology onepeer-exp --send-ahead no "${COMMON[@]}" --progress 5; then
    report dpsgd_onepeer_whole dpsgd_onepeer_whole
    r=$(ratio "$LAST_E" "$EPOCH_dpsgd_onepeer"); [ -n "$r" ] && bench "${TAG}_send_ahead_speedup_onepeer" "$r" x
else FAILED="$FAILED dpsgd_onepeer_whole"; fi
if ! wanted allreduce; then :; elif run_swarm allreduce "$BIN" --mode allreduce "${COMMON[@]}" --progress 5; then
    report allreduce allreduce; EPOCH_allreduce=$LAST_E
else FAILED="$FAILED allreduce"; fi

if [ "${RUMOR_BENCH_NETNS_DDP:-1}" != 0 ]; then
    TPY=
    for p in /usr/bin/python3 "$PY"; do
        [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import torch, numpy, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null && { TPY=$p; break; }
    done
    if [ -z "$TPY" ]; then
        echo "bench_netns: PyTorch DDP baseline skipped: no python3 with torch (gloo) and numpy (apt-get install python3-torch)"
    else
        printf '#!/bin/sh\nexec %s %s "$@"\n' "$TPY" "$SRCDIR/examples/ddp_baseline.py" > "$WORK/ddp-peer"
        chmod +x "$WORK/ddp-peer"
        # --insecure: gloo's traffic is plaintext, so no CurveZMQ keys are
        # made for it (netns-swarm.sh would ask the wrapper for them)
        if ! wanted ddp_gloo; then :; elif run_swarm ddp_gloo "$WORK/ddp-peer" "${COMMON[@]}" --insecure; then
            report ddp_gloo ddp_gloo; EPOCH_ddp_gloo=$LAST_E
        else
            echo "bench_netns: the DDP baseline failed; its figures are left out"
        fi
    fi
fi

fi

r=$(ratio "$EPOCH_allreduce" "$EPOCH_dpsgd_ring"); [ -n "$r" ] && bench "${TAG}_allreduce_vs_dpsgd_ring" "$r" x
r=$(ratio "$EPOCH_allreduce" "$EPOCH_dpsgd_onepeer"); [ -n "$r" ] && bench "${TAG}_allreduce_vs_dpsgd_onepeer" "$r" x
if [ -n "$EPOCH_ddp_gloo" ]; then
    r=$(ratio "$EPOCH_ddp_gloo" "$EPOCH_dpsgd_ring"); [ -n "$r" ] && bench "${TAG}_ddp_gloo_vs_dpsgd_ring" "$r" x
    r=$(ratio "$EPOCH_ddp_gloo" "$EPOCH_dpsgd_onepeer"); [ -n "$r" ] && bench "${TAG}_ddp_gloo_vs_dpsgd_onepeer" "$r" x
    r=$(ratio "$EPOCH_ddp_gloo" "$EPOCH_allreduce"); [ -n "$r" ] && bench "${TAG}_ddp_gloo_vs_allreduce" "$r" x
fi

# ---- where gossip must win: slow, distant links (issue: 100 Mbit/s and
# 50 ms RTT per link, then one peer on 10 Mbit/s). Time to a target test
# accuracy (the mean over peers of their local model's, at the end of an
# epoch; the time is the slowest peer's since its start) for the ring
# all-reduce and for gossip plain, int8-compressed, with local steps, and
# both; the final swarm average's accuracy beside it.
WAN_EPOCHS=${RUMOR_BENCH_NETNS_WAN_EPOCHS:-3}
# with the 10 Mbit/s peer a round of the all-reduce or of plain D-PSGD takes
# ~1.7 s (its upload): one epoch there, ~100 s a run
WANSLOW_EPOCHS=${RUMOR_BENCH_NETNS_WANSLOW_EPOCHS:-1}
WAN_DELAY=${RUMOR_BENCH_NETNS_WAN_DELAY:-50}
TARGET=${RUMOR_BENCH_NETNS_TARGET:-0.80}
# time_to RUN FIELD TARGET SIGN: the slowest peer's time at the first epoch
# whose peers' mean FIELD (test_accuracy, eval_loss) reaches TARGET: SIGN 1
# for at least it, -1 for at most it
time_to() {
    cat "$WORK/$1"/peer*.jsonl 2>/dev/null | awk -v f="$2" -v tgt="$3" -v sign="$4" '
        /"event": *"epoch"/ && index($0, "\"" f "\":") {
            e = $0; sub(/.*"epoch": */, "", e); sub(/[,}].*/, "", e)
            v = substr($0, index($0, "\"" f "\":") + length(f) + 3); sub(/^ */, "", v); sub(/[,}].*/, "", v)
            s = $0; sub(/.*"seconds": */, "", s); sub(/[,}].*/, "", s)
            if (v + 0 < 0) next
            sum[e] += v; n[e]++
            if (!(e in t) || s + 0 > t[e]) t[e] = s + 0
        }
        END {
            best = -1
            for (e in sum) if (sign * (sum[e] / n[e] - tgt) >= 0 && (best < 0 || e + 0 < best + 0)) best = e
            if (best >= 0) printf "%.2f\n", t[best]
        }'
}
run_wan() {  # SCENARIO NAME ARGS...
    local sc=$1 name=$2 tt acc
    shift 2
    wanted "${sc}_$name" || return 0
    if ! run_swarm "${sc}_$name" "$BIN" "$@" --progress 5; then
        FAILED="$FAILED ${sc}_$name"; return 0
    fi
    report "${sc}_$name" "${name}"
    tt=$(time_to "${sc}_$name" test_accuracy "$TARGET" 1); acc=$(pct "$(done_mean "${sc}_$name" average_accuracy)")
    if [ -n "$tt" ]; then bench "${TAG}_${name}_time_to_target" "$tt" s
    else echo "bench_netns: ${sc} $name did not reach $TARGET in $WAN_EPOCHS epochs"; fi
    eval "TT_${sc}_$name=\${tt:-}; ACC_${sc}_$name=\${acc:-}"
    predict "$sc" "$name" "$@"
}
# rumor-topo's cost model against the run: the round time it predicts for
# the ring on these links (the measured TCP rate, half the RTT each way,
# the run's codec; compute not given, so only communication-bound runs)
# over the measured one (an epoch's time / its rounds)
predict() {  # SCENARIO NAME ARGS...
    local sc=$1 name=$2 codec=none e r pred meas
    shift 2
    case " $* " in *" --local-steps "*|*" --mode allreduce "*) return 0 ;; esac
    case " $* " in *" --compress int8 "*) codec=int8 ;; esac
    [ -x "$BUILDDIR/rumor-topo" ] || return 0
    # every peer's link is one shaped interface, shared by its messages: a NIC
    printf 'default 10Gbit %sms\nnic all %sMbit\n' "$(awk -v d="$WAN_DELAY" 'BEGIN{print d / 2}')" \
        "$LINK_MBIT" > "$WORK/$sc.links"
    [ "$sc" = wanslow ] && echo 'nic 3 10Mbit' >> "$WORK/$sc.links"
    pred=$("$BUILDDIR/rumor-topo" analyze "ring:$NODES" --model-bytes 1077288 --links "$WORK/$sc.links" \
        --compress "$codec" --no-sim --json 2>/dev/null | tr -d ' \t\n' |
        sed -n 's/.*"round_seconds":\([0-9.eE+-]*\).*/\1/p')
    e=$(epoch_s "${sc}_$name"); r=$(rounds_per_epoch "${sc}_$name")
    meas=$(awk -v e="$e" -v r="$r" 'BEGIN { if (e > 0 && r > 0) printf "%.4f", e / r }')
    if [ -n "$pred" ] && [ -n "$meas" ]; then
        bench "${TAG}_${name}_round_s" "$meas" s
        bench "${TAG}_${name}_round_s_predicted" "$(awk -v p="$pred" 'BEGIN{printf "%.4f", p}')" s
        bench "${TAG}_${name}_measured_vs_predicted" "$(ratio "$meas" "$pred")" x
    fi
}
for sc in wan wanslow; do
    NETNS_EXTRA=(--delay "$WAN_DELAY")
    ep=$WAN_EPOCHS
    # behind 10 Mbit/s a round's first megabyte takes most of a second: the
    # first rounds' deadline is 4 x --min-round-timeout until the pace is
    # known (docs/compression.md, "Slow links"; measured without the option:
    # the same times, the round's data counts as flowing)
    SLOWOPT=()
    BOUND_MBIT=$LINK_MBIT
    if [ "$sc" = wanslow ]; then
        NETNS_EXTRA+=(--link 3=10mbit); ep=$WANSLOW_EPOCHS; SLOWOPT=(${RUMOR_BENCH_NETNS_SLOWOPT---min-round-timeout 2.5})
        # the 10 Mbit/s link at the measured link's efficiency
        BOUND_MBIT=$(awk -v l="$LINK_MBIT" 'BEGIN { print l / 10 }')
    fi
    RUN_TIMEOUT=$(( 120 + 200 * ep ))
    WAN_COMMON=(--epochs "$ep" --batch "$BATCH" --seed 1 --round-timeout 30 "${SLOWOPT[@]+"${SLOWOPT[@]}"}")
    TAG=netns_${sc}_${RATE}_${WAN_DELAY}ms
    run_wan "$sc" allreduce --mode allreduce "${WAN_COMMON[@]}"
    run_wan "$sc" allreduce_int8 --mode allreduce --compress int8 "${WAN_COMMON[@]}"
    run_wan "$sc" dpsgd --mode dpsgd --topology ring "${WAN_COMMON[@]}"
    run_wan "$sc" int8 --mode dpsgd --topology ring --compress int8 "${WAN_COMMON[@]}"
    run_wan "$sc" local8 --mode dpsgd --topology ring --local-steps 8 "${WAN_COMMON[@]}"
    run_wan "$sc" int8_local4 --mode dpsgd --topology ring --compress int8 --local-steps 4 \
        "${WAN_COMMON[@]}"
    run_wan "$sc" int8_local8 --mode dpsgd --topology ring --compress int8 --local-steps 8 \
        "${WAN_COMMON[@]}"
    # the top 1.56% of each chunk of 4096 in 2 bits (141x fewer bytes a
    # coded round), 8 local steps
    run_wan "$sc" topk2_local8 --mode dpsgd --topology ring --compress topk:0.015625:bits=2 \
        --local-steps 8 "${WAN_COMMON[@]}"
    # bytes a peer sent over the run (as many examples each) over plain
    # D-PSGD's in f32, every step
    for n in int8 local8 int8_local8 topk2_local8; do
        b=$(done_mean "${sc}_$n" bytes_sent || true); b0=$(done_mean "${sc}_dpsgd" bytes_sent || true)
        if [ -n "$b" ] && [ -n "$b0" ]; then bench "${TAG}_${n}_bytes_vs_dpsgd" "$(ratio4 "$b" "$b0")" x; fi
    done
    printf '%-14s %16s %14s\n' "$sc run" "time to $TARGET" "final average"
    best= bestn=
    for n in allreduce allreduce_int8 dpsgd int8 local8 int8_local4 int8_local8 topk2_local8; do
        eval "tt=\${TT_${sc}_$n:-}; acc=\${ACC_${sc}_$n:-}"
        printf '%-14s %14s s %12s %%\n' "$n" "${tt:--}" "${acc:--}"
        case $n in allreduce*) continue ;; esac
        if [ -n "$tt" ] && { [ -z "$best" ] || awk -v a="$tt" -v b="$best" 'BEGIN{exit !(a < b)}'; }; then
            best=$tt bestn=$n
        fi
    done
    # the rival: the faster of the all-reduces (f32 or int8)
    eval "ar=\${TT_${sc}_allreduce:-}; ar8=\${TT_${sc}_allreduce_int8:-}"
    if [ -n "$ar8" ] && { [ -z "$ar" ] || awk -v a="$ar8" -v b="$ar" 'BEGIN{exit !(a < b)}'; }; then
        ar=$ar8
    fi
    if [ -n "$best" ] && [ -n "$ar" ]; then
        echo "bench_netns: $sc: the best gossip run is $bestn"
        bench "${TAG}_allreduce_vs_best_gossip_time_to_target" "$(ratio "$ar" "$best")" x
    fi
    # the final quality: the combination run twice as many epochs still
    # ends well before the all-reduce's run does
    if [ "$sc" = wan ] && wanted "${sc}_int8_local4_x2"; then
        WAN_COMMON=(--epochs $(( 2 * ep )) --batch "$BATCH" --seed 1 --round-timeout 30)
        run_wan "$sc" int8_local4_x2 --mode dpsgd --topology ring --compress int8 \
            --local-steps 4 "${WAN_COMMON[@]}"
        a=$(done_mean "${sc}_int8_local4_x2" seconds); b=$(done_mean "${sc}_allreduce" seconds)
        eval "acc=\${ACC_${sc}_int8_local4_x2:-}; acc0=\${ACC_${sc}_allreduce:-}"
        echo "bench_netns: $sc: int8 + 4 local steps for $(( 2 * ep )) epochs: ${a:-?} s," \
             "average ${acc:-?}%; the all-reduce for $ep epochs: ${b:-?} s, ${acc0:-?}%"
        [ -n "$a" ] && [ -n "$b" ] && bench "${TAG}_allreduce_vs_int8_local4_x2_run_s" "$(ratio "$b" "$a")" x
    fi
done
BOUND_MBIT=$LINK_MBIT
# ---- the small GPT on the same slow, distant links: time to a target
# validation loss (the mean over peers of their local model's, at the end of
# an epoch; by default the loss the all-reduce run ends at) for the ring
# all-reduce and gossip plain, int8, int8 with local steps, and int8 for
# twice the epochs (its learning-rate schedule spans them); the final swarm
# average's validation loss beside it. The
# corpus is the first 400 kB of the default one (kjv.txt), so that an epoch
# (a peer's slice once) is ~90 rounds of batch 8 x 64 bytes and the time to
# the target is read often enough.
GPT_MODEL=${RUMOR_BENCH_NETNS_GPT_MODEL:-gpt:layers=2,dim=64,heads=4,ctx=64}
# the target: the all-reduce run's final validation loss (its peers' mean at
# its last epoch) + 0.01 nats, unless given
GPT_TARGET=${RUMOR_BENCH_NETNS_GPT_TARGET:-auto}
GPT_EPOCHS=${RUMOR_BENCH_NETNS_GPT_EPOCHS:-4}
KJV=
for f in "$BUILDDIR/corpus/kjv.txt" "$SRCDIR/build/corpus/kjv.txt"; do [ -f "$f" ] && { KJV=$f; break; }; done
run_gpt() {  # NAME ARGS...
    local name=$1 tt l
    shift
    wanted "gpt_$name" || return 0
    if ! run_swarm "gpt_$name" "$BIN" "${GPT_COMMON[@]}" "$@" --progress 5; then
        FAILED="$FAILED gpt_$name"; return 0
    fi
    report "gpt_$name" "gpt_${name}"
    if [ "$name" = allreduce ] && [ "$GPT_TARGET" = auto ]; then
        GPT_TARGET=$(cat "$WORK/gpt_$name"/peer*.jsonl 2>/dev/null | awk '
            /"event": *"epoch"/ && /"eval_loss"/ {
                e = $0; sub(/.*"epoch": */, "", e); sub(/[,}].*/, "", e)
                l = $0; sub(/.*"eval_loss": */, "", l); sub(/[,}].*/, "", l)
                if (l + 0 >= 0) { loss[e] += l; n[e]++ }
            }
            END { for (e in loss) if (e + 0 > last + 0) last = e
                  if (last != "") printf "%.3f\n", loss[last] / n[last] + 0.01 }') || true
        [ -n "$GPT_TARGET" ] || GPT_TARGET=2.25
        bench "${TAG}_gpt_target_val_loss" "$GPT_TARGET" nats
    fi
    tt=$(time_to "gpt_$name" eval_loss "$GPT_TARGET" -1)
    l=$(done_mean "gpt_$name" average_eval_loss)
    [ -n "$l" ] && l=$(awk -v x="$l" 'BEGIN { printf "%.4f", x }') && bench "${TAG}_gpt_${name}_average_val_loss" "$l" nats
    if [ -n "$tt" ]; then bench "${TAG}_gpt_${name}_time_to_target" "$tt" s
    else echo "bench_netns: gpt $name did not reach $GPT_TARGET nats in $GPT_EPOCHS epochs"; fi
    eval "TT_gpt_$name=\${tt:-}; LOSS_gpt_$name=\${l:-}"
}
if [ "${RUMOR_BENCH_NETNS_GPT:-1}" = 0 ]; then :
elif [ -z "$KJV" ]; then echo "bench_netns: GPT runs skipped: no corpus/kjv.txt (./bootstrap build makes it)"
else
    head -c 400000 "$KJV" > "$WORK/wan-text.txt"
    NETNS_EXTRA=(--delay "$WAN_DELAY")
    RUN_TIMEOUT=$(( 120 + 120 * GPT_EPOCHS ))
    TAG=netns_wan_${RATE}_${WAN_DELAY}ms
    GPT_COMMON=(--model "$GPT_MODEL" --data "text:$WORK/wan-text.txt" --batch 8 --optimizer adamw
                --lr 3e-3 --epochs "$GPT_EPOCHS" --seed 1 --round-timeout 30)
    run_gpt allreduce --mode allreduce
    [ "$GPT_TARGET" != auto ] || GPT_TARGET=2.10 # (the all-reduce did not run)
    run_gpt dpsgd --mode dpsgd --topology ring
    run_gpt int8 --mode dpsgd --topology ring --compress int8
    run_gpt int8_local4 --mode dpsgd --topology ring --compress int8 --local-steps 4
    run_gpt topk2_local4 --mode dpsgd --topology ring --compress topk:0.015625:bits=2 \
        --local-steps 4
    # the peers' own AdamW on the mean gradient, averaged exactly over
    # onepeer-exp's period (log2 n rounds of one neighbour): one process with
    # n times the batch, without an all-reduce (docs/outer.md)
    run_gpt optim_exact --mode dpsgd --topology onepeer-exp --outer optim --outer-rounds period
    # streaming outer steps: a quarter of the model a step, sent while the
    # step computes, each quarter averaged every 4 steps (docs/outer.md)
    run_gpt stream4 --mode dpsgd --topology onepeer-exp --local-steps 4 --outer sgd:lr=1 \
        --fragments 4 --overlap 1
    for n in int8 int8_local4 topk2_local4 optim_exact stream4; do
        b=$(done_mean "gpt_$n" bytes_sent || true); b0=$(done_mean gpt_dpsgd bytes_sent || true)
        if [ -n "$b" ] && [ -n "$b0" ]; then bench "${TAG}_gpt_${n}_bytes_vs_dpsgd" "$(ratio4 "$b" "$b0")" x; fi
    done
    # gossip with each peer's own AdamW ends higher than the all-reduce's one
    # AdamW on the averaged gradient: twice the epochs, still sooner
    RUN_TIMEOUT=$(( 120 + 240 * GPT_EPOCHS ))
    run_gpt int8_x2 --mode dpsgd --topology ring --compress int8 --epochs $(( 2 * GPT_EPOCHS ))
    # at equal tokens: each run's final average minus the all-reduce's (one
    # AdamW on the mean gradient: one process with n times the batch)
    for n in dpsgd int8 int8_local4 topk2_local4 optim_exact stream4; do
        eval "l=\${LOSS_gpt_$n:-}"
        if [ -n "$l" ] && [ -n "${LOSS_gpt_allreduce:-}" ]; then
            bench "${TAG}_gpt_${n}_minus_allreduce" \
                "$(awk -v a="$l" -v b="$LOSS_gpt_allreduce" 'BEGIN { printf "%+.4f", a - b }')" nats
        fi
    done
    printf '%-14s %16s %18s\n' "gpt run" "time to $GPT_TARGET" "final average"
    best= bestn=
    for n in allreduce dpsgd int8 int8_local4 topk2_local4 optim_exact stream4 int8_x2; do
        eval "tt=\${TT_gpt_$n:-}; l=\${LOSS_gpt_$n:-}"
        printf '%-14s %14s s %12s nats\n' "$n" "${tt:--}" "${l:--}"
        [ "$n" = allreduce ] && continue
        if [ -n "$tt" ] && { [ -z "$best" ] || awk -v a="$tt" -v b="$best" 'BEGIN{exit !(a < b)}'; }; then
            best=$tt bestn=$n
        fi
    done
    if [ -n "$best" ] && [ -n "${TT_gpt_allreduce:-}" ]; then
        echo "bench_netns: gpt: the best gossip run is $bestn"
        bench "${TAG}_gpt_allreduce_vs_best_gossip_time_to_target" "$(ratio "$TT_gpt_allreduce" "$best")" x
    fi
fi

echo "bench_netns: $NODES peers, $EPOCHS epochs a run, $(( $(date +%s) - T_START )) s in all;" \
     "epoch_s = mean over epochs of the slowest peer's epoch (training only, no evaluation);" \
     "ratios > 1 mean the second one is faster"
if [ -n "$FAILED" ]; then
    echo "bench_netns: FAILED runs (no figures for them):$FAILED"
    exit 1
fi
