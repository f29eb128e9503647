#!/bin/sh
# A peer's start and end, where results must not be lost and a plain stop
# must not look like a failure:
#  - SIGTERM while the peer loads or waits for its neighbours: it leaves at
#    once with exit 0 (systemd and compose take a plain stop for one);
#  - a checkpoint that fails to write after a good start (its directory
#    went away) is an error: named on stderr, counted on the final line,
#    exit 1, and the run still ends with its results;
#  - a --save-average directory that went away by the end: the swarm
#    average goes to the checkpoint directory instead, named on stderr, the
#    results are printed, exit 1; the saved file is the average (rumor-train
#    eval gives the accuracy the peer printed).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
export RUMOR_BLAS_AUTOTUNE=0 # no restart with other kernels: a signal must meet rumor-peer itself

# ---- 1. SIGTERM while waiting for a neighbour that never comes
eps=$(free_endpoints 2)
"$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --train-limit 640 \
  --start-timeout 60 -q >"$tmp/wait.log" 2>&1 &
p=$!
pids=$p
i=0 # until it listens (it waits for peer 1 from then on)
port=${eps%%,*}; port=${port##*:}
while ! listening_ports | grep -qx "$port" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.5
t0=$(date +%s%N)
kill -TERM $p
wait $p
rc=$?
t1=$(date +%s%N)
pids=
expect_rc 0 $rc "SIGTERM while waiting for the neighbours" "$tmp/wait.log"
ms=$(( (t1 - t0) / 1000000 ))
[ $ms -lt 3000 ] || fail "leaving before training took $ms ms"
grep -q "peer 0: left before training began, on signal 15" "$tmp/wait.log" ||
  fail "no line says the peer left before training: $(tail -2 "$tmp/wait.log")"
echo "start-stop: SIGTERM while waiting: exit $rc after $ms ms"

# ---- 2. SIGTERM while it loads its data: its training images are a FIFO
# that the test opens for writing (so the peer is reading it) and never fills
if command -v python3 >/dev/null; then
  data="$tmp/data"
  mkdir "$data"
  for f in "$FASHION"/*; do ln -s "$f" "$data/"; done
  rm "$data/train-images-idx3-ubyte.gz"
  mkfifo "$data/train-images-idx3-ubyte.gz"
  eps=$(free_endpoints 2)
  "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$data" -q >"$tmp/load.log" 2>&1 &
  p=$!
  pids=$p
  python3 - "$data/train-images-idx3-ubyte.gz" "$p" <<'EOF' || fail "the peer never opened its training images"
import os, signal, sys, time
fifo, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):  # until the peer opens it to read (ENXIO before)
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(1)
time.sleep(0.2)  # in its read, with nothing to read
os.kill(pid, signal.SIGTERM)
time.sleep(1)
os.close(fd)
EOF
  wait $p
  rc=$?
  pids=
  expect_rc 0 $rc "SIGTERM while loading" "$tmp/load.log"
  grep -q "stopped by a signal before joining the swarm" "$tmp/load.log" ||
    fail "no line says the peer stopped before training: $(tail -2 "$tmp/load.log")"
else
  echo "start-stop: no python3: SIGTERM while loading not tried"
fi

# ---- 3 and 4: two peers, peer 0's checkpoint directory and --save-average
# directory taken away while it trains
eps=$(free_endpoints 2)
mkdir -p "$tmp/avg" "$tmp/ck1"
common="--insecure --peers $eps --data $FASHION --train-limit 1280 --batch 32 --epochs 3
        --throttle 4 --checkpoint-every 5 -q"
# shellcheck disable=SC2086
"$RUMOR_PEER" $common --rank 0 --checkpoint-dir "$tmp/ck0" --save-average "$tmp/avg" \
  >"$tmp/p0.log" 2>&1 &
p0=$!
# shellcheck disable=SC2086
"$RUMOR_PEER" $common --rank 1 --checkpoint-dir "$tmp/ck1" >"$tmp/p1.log" 2>&1 &
p1=$!
pids="$p0 $p1"
i=0
while ! ls "$tmp/ck0"/*.safetensors >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
ls "$tmp/ck0"/*.safetensors >/dev/null 2>&1 || fail "peer 0 wrote no first checkpoint"
# the directories go away (a volume unmounted, a cleanup job): files instead.
# The peer makes its checkpoint directory again when it is missing, so one
# may come back between the move and the file: move it away until a file
# stands in its place.
n=0
while [ ! -f "$tmp/ck0" ] && [ $n -lt 100 ]; do
  [ -d "$tmp/ck0" ] && mv "$tmp/ck0" "$tmp/ck0.gone.$n"
  # in a subshell: a redirection that fails on a special builtin (':')
  # ends a POSIX shell, and the peer may have made the directory again
  (: >"$tmp/ck0") 2>/dev/null
  n=$((n + 1))
done
[ -f "$tmp/ck0" ] || fail "could not put a file in place of peer 0's checkpoint directory"
rmdir "$tmp/avg" && touch "$tmp/avg"
wait $p0
rc0=$?
wait $p1
rc1=$?
pids=
expect_rc 1 $rc0 "peer 0, whose checkpoints and average could not be written" "$tmp/p0.log"
expect_rc 0 $rc1 "peer 1" "$tmp/p1.log"
grep -q "error: checkpoint at round [0-9]* failed" "$tmp/p0.log" ||
  fail "a failed checkpoint was not said as an error: $(grep -i checkpoint "$tmp/p0.log" | head -2)"
grep -q "^peer 0: done: .*CHECKPOINTS FAILED: [0-9]* of [0-9]*" "$tmp/p0.log" ||
  fail "the final line does not count the failed checkpoints: $(grep 'done:' "$tmp/p0.log")"
grep -q "checkpoints failed to write (the last at round [0-9]*: .*): this run was not protected" "$tmp/p0.log" ||
  fail "no closing error about the checkpoints: $(tail -2 "$tmp/p0.log")"
# the average: saved in the checkpoint directory? It is a file now: in a
# temporary directory named on stderr; the result is printed all the same
acc=$(sed -n 's/^peer 0: swarm average test accuracy \([0-9.]*\)%/\1/p' "$tmp/p0.log")
[ -n "$acc" ] || fail "peer 0 printed no swarm average: $(tail -3 "$tmp/p0.log")"
saved=$(sed -n "s/.*--save-average $(echo "$tmp" | sed 's/[/.]/\\&/g')\/avg: .*; the swarm average is saved to \(.*\.safetensors\) instead/\1/p" "$tmp/p0.log")
if [ -z "$saved" ] || [ ! -f "$saved" ]; then
  fail "the average was not saved elsewhere and named: $(grep -- '--save-average' "$tmp/p0.log")"
else
  eacc=$("$RUMOR_BUILDDIR/rumor-train" eval "$saved" --data "$FASHION" --batch 256 2>&1 |
    sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p')
  expect_num_close "${eacc:-0}" "$acc" 0.011 "rumor-train eval of the saved average ($saved) against what the peer printed"
  echo "start-stop: the average went to $saved: ${eacc:-?}% (printed $acc%)"
  rm -rf "$(dirname "$saved")"
fi
finish
