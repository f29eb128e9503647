#!/bin/sh
# Churn: 8 rumor-peer processes on a ring over loopback, Fashion-MNIST, with
# checkpoints every 20 rounds. First a fault-free run, then the same run
# (same seed) where
#   - peer 2 and peer 5 are killed with SIGKILL at random rounds and
#     restarted a second later from their checkpoint directories,
#   - peer 7 starts late, when the others are past round 60, and fetches
#     the swarm's state from its neighbours.
# Asserted: every process of the churn run finishes (exit 0); the final
# swarm-average accuracy is within 1 point of the fault-free run; no round
# of any peer took longer than 2x its deadline; every committed checkpoint
# left in the directories is whole (its BLAKE2b-256 digest recomputed here
# by Python's hashlib, a second implementation); no message from an old
# incarnation or a stale round was mixed (stale_applied = 0), while such
# messages did arrive and were dropped and counted.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v python3 >/dev/null || skip "python3 not found (checkpoint verification)"

PEER="$RUMOR_BUILDDIR/rumor-peer"
swarm_setup

EPOCHS=4
common="--insecure --epochs $EPOCHS --data $FASHION --seed 7 --round-timeout 5 --start-timeout 3 --progress 0.05"

start_peer() { # RUN RANK LIFE [extra args]: starts one peer in the background
  run=$1 r=$2 life=$3; shift 3
  mkdir -p "$tmp/$run/ckpt-$r"
  "$PEER" --rank "$r" --peers "$ports" $common --checkpoint-dir "$tmp/$run/ckpt-$r" \
    --checkpoint-every 20 --metrics "$tmp/$run/m-$r-$life.jsonl" "$@" \
    >"$tmp/$run/p-$r-$life.log" 2>&1 &
  eval "pid_${r}=\$!"
  pids="$pids $!"
}

# ---- 1. fault-free
ports=$(free_endpoints 8)
mkdir -p "$tmp/ref"
t0=$(date +%s)
for r in 0 1 2 3 4 5 6 7; do start_peer ref $r 0; done
for r in 0 1 2 3 4 5 6 7; do eval "wait \$pid_$r"; expect_rc 0 $? "fault-free peer $r" "$tmp/ref/p-$r-0.log"; done
pids=
ref=$(metrics_field "$tmp/ref/m-0-0.jsonl" done average_accuracy)
echo "churn: fault-free swarm average $ref after $EPOCHS epochs ($(( $(date +%s) - t0 )) s)"

# ---- 2. churn
ports=$(free_endpoints 8)
mkdir -p "$tmp/churn"
total=$(metrics_field "$tmp/ref/m-0-0.jsonl" start rounds)
k2=$(awk -v s="$$" 'BEGIN{srand(s); print 100 + int(rand() * 80)}')
k5=$(awk -v s="$$" 'BEGIN{srand(s + 1); print 220 + int(rand() * 100)}')
t0=$(date +%s)
for r in 0 1 2 3 4 5 6; do start_peer churn $r 0; done
# the late joiner
wait_round "$tmp/churn/m-0-0.jsonl" 60
start_peer churn 7 0
echo "churn: peer 7 started at round $(metrics_round "$tmp/churn/m-0-0.jsonl")"
# kill and restart peer 2, then peer 5
for victim in 2:$k2 5:$k5; do
  v=${victim%:*} at=${victim#*:}
  wait_round "$tmp/churn/m-$v-0.jsonl" "$at"
  eval "kill -KILL \$pid_$v" || fail "peer $v was gone before its kill"
  echo "churn: peer $v killed at round $(metrics_round "$tmp/churn/m-$v-0.jsonl")"
  sleep 1
  start_peer churn "$v" 1
done
for r in 0 1 3 4 6 7; do eval "wait \$pid_$r"; expect_rc 0 $? "churn peer $r" "$tmp/churn/p-$r-0.log"; done
for r in 2 5; do eval "wait \$pid_$r"; expect_rc 0 $? "restarted peer $r" "$tmp/churn/p-$r-1.log"; done
pids=
echo "churn: churn run $(( $(date +%s) - t0 )) s"

# the restarted peers resumed from a checkpoint; the late one fetched state
for r in 2 5; do
  grep -q "resumed from .* at round" "$tmp/churn/p-$r-1.log" || fail "peer $r did not resume from its checkpoint"
  grep "resumed from" "$tmp/churn/p-$r-1.log" | sed "s/^/churn: /"
done
c7=$(metrics_field "$tmp/churn/m-7-0.jsonl" done catch_ups)
expect_num_ge "${c7:-0}" 1 "late peer 7 state fetches"
grep "joined at round" "$tmp/churn/p-7-0.log" | sed 's/^/churn: /'

avg=$(metrics_field "$tmp/churn/m-0-0.jsonl" done average_accuracy)
echo "churn: churn swarm average $avg (fault-free $ref)"
expect_num_close "${avg:-0}" "${ref:-1}" 0.01 "churn swarm average vs fault-free"

stall=0 stale=0 dropped=0
for f in "$tmp"/churn/m-*.jsonl; do
  grep -q '"event":"done"' "$f" || continue
  s=$(metrics_field "$f" done max_stall); a=$(metrics_field "$f" done stale_applied)
  d=$(sed -n 's/.*"stale_round":\([0-9]*\).*"old_incarnation":\([0-9]*\).*/\1 \2/p' "$f" | tail -1)
  stall=$(awk -v a="$stall" -v b="$s" 'BEGIN{print (b > a) ? b : a}')
  stale=$((stale + a))
  dropped=$((dropped + $(echo "$d" | awk '{print $1 + $2}')))
done
echo "churn: longest round / its deadline: $stall; stale or old-incarnation messages dropped: $dropped; mixed: $stale"
expect_num_lt "$stall" 2.0 "longest round relative to its deadline"
[ "$stale" -eq 0 ] || fail "$stale stale contributions were mixed"

# every checkpoint left behind is whole: digest recomputed independently
python3 - "$tmp/churn" "$tmp/ref" <<'EOF' || fail "corrupt checkpoints"
import glob, hashlib, json, struct, sys
bad = good = 0
for d in sys.argv[1:]:
    for p in sorted(glob.glob(d + "/ckpt-*/*.safetensors")):
        try:
            raw = open(p, "rb").read()
            (n,) = struct.unpack("<Q", raw[:8])
            hdr = json.loads(raw[8:8 + n])
            data = raw[8 + n:]
            meta = hdr.pop("__metadata__")
            end = max(t["data_offsets"][1] for t in hdr.values())
            assert end == len(data), "size"
            assert hashlib.blake2b(data, digest_size=32).hexdigest() == meta["blake2b"], "digest"
            good += 1
        except Exception as e:
            bad += 1
            print("corrupt checkpoint %s: %r" % (p, e))
print("churn: %d checkpoints verified, %d corrupt" % (good, bad))
sys.exit(1 if bad or not good else 0)
EOF
finish
