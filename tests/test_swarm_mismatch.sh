#!/bin/sh
# Swarms that are wrong say so, naming the setting and the peer:
#  - peers with different settings every peer must share (the codec, the
#    model, local steps) exchange them in their HELLOs: each says which
#    setting differs, with both values and the neighbour, and does not mix
#    with it; a peer left with no neighbour to mix with stops (exit 1) at
#    once instead of training alone to the end, and the others go on (also
#    when it starts late and they finish before it has heard them);
#  - a neighbour whose training diverged (--lr 1000: huge but finite
#    parameters) is named and left out of the mix, and the healthy peers
#    train on to a sane accuracy instead of diverging with it.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

base="--insecure --data $FASHION --train-limit 960 --epochs 1 --batch 32 --lr 0.05 --progress 0
      --no-average --start-timeout 30"
# run NAME PEERS TOPOLOGY "OPTS0" "OPTS1" ...: one peer per OPTS, waited for;
# logs $tmp/NAME-R.log, metrics $tmp/NAME-R.jsonl, exit statuses $tmp/NAME-R.rc
run() {
  _name=$1 _n=$2 _topo=$3; shift 3
  _eps=$(free_endpoints "$_n")
  _r=0 pids=
  for _o in "$@"; do
    # shellcheck disable=SC2086
    ( timeout 120 "$RUMOR_PEER" $base --rank $_r --peers "$_eps" --topology "$_topo" \
        --metrics "$tmp/$_name-$_r.jsonl" $_o >"$tmp/$_name-$_r.log" 2>&1
      echo $? >"$tmp/$_name-$_r.rc"; date +%s >"$tmp/$_name-$_r.end" ) &
    pids="$pids $!"
    _r=$((_r + 1))
  done
  for _p in $pids; do wait "$_p"; done
  pids=
}
rc_of() { cat "$tmp/$1.rc" 2>/dev/null || echo none; }
expect_log() { # NAME-R TEXT WHAT
  grep -qF -- "$2" "$tmp/$1.log" || fail "$3: $1's log lacks '$2': $(grep -v WARNING "$tmp/$1.log" | tail -3)"
}

# ---- 1. two peers, two codecs: both stop at once, each naming both
t0=$(date +%s)
run codec 2 ring "" "--compress int8"
t1=$(date +%s)
expect_rc 1 "$(rc_of codec-0)" "peer 0 (no codec) beside an int8 peer" "$tmp/codec-0.log"
expect_rc 1 "$(rc_of codec-1)" "peer 1 (int8) beside a peer without a codec" "$tmp/codec-1.log"
expect_log codec-0 "peer 1 (tcp://" "peer 0 names its neighbour"
expect_log codec-0 "runs --compress int8, this peer --compress none: every peer of a swarm must use the same --compress" "peer 0"
expect_log codec-1 "runs --compress none, this peer --compress int8" "peer 1"
expect_log codec-1 "no neighbour is left to mix with" "peer 1"
[ $((t1 - t0)) -le 20 ] || fail "the mismatched pair took $((t1 - t0)) s to stop (the start timeout is 30)"
grep -q '"event":"round"' "$tmp/codec-0.jsonl" 2>/dev/null && fail "peer 0 trained rounds beside an int8 peer"

# ---- 2. local steps differ: the same, for --local-steps
run steps 2 ring "--local-steps 4" ""
expect_rc 1 "$(rc_of steps-0)" "peer 0 (4 local steps) beside a peer of 1" "$tmp/steps-0.log"
expect_rc 1 "$(rc_of steps-1)" "peer 1 (1 local step) beside a peer of 4" "$tmp/steps-1.log"
expect_log steps-1 "runs --local-steps 4, this peer --local-steps 1" "peer 1"

# ---- 3. three peers, one of another model: it stops, the two others go on
# without it (their HELLOs are of another model size: still judged, named)
t2=$(date +%s)
run model 3 complete "" "" "--model mlp:784-100-10"
# the two do not wait out their start timeout (30 s) for the odd one (which
# may: if both finish before its connections are up, it hears nothing)
for r in 0 1; do
  t3=$(cat "$tmp/model-$r.end" 2>/dev/null || echo 0)
  [ $((t3 - t2)) -le 20 ] || fail "peer $r beside a peer of another model took $((t3 - t2)) s"
done
expect_rc 1 "$(rc_of model-2)" "the peer of another model" "$tmp/model-2.log"
expect_log model-2 "runs --model mlp:784-256-256-10, this peer --model mlp:784-100-10" "peer 2"
for r in 0 1; do
  expect_rc 0 "$(rc_of model-$r)" "peer $r beside a peer of another model" "$tmp/model-$r.log"
  expect_log model-$r "peer 2 (tcp://" "peer $r names the odd peer"
  expect_log model-$r "runs --model mlp:784-100-10, this peer --model mlp:784-256-256-10" "peer $r"
  expect_log model-$r "peer $r: done:" "peer $r trained to the end"
  inc=$(metrics_field "$tmp/model-$r.jsonl" done incompatible_neighbours)
  [ "${inc:-0}" -eq 1 ] || fail "peer $r's done event counts ${inc:-no} incompatible neighbours, expected 1"
done

# ---- 3b. the odd one starts when the two are already waiting for it: they
# finish in a moment, and it still hears from both (the peer that has gone
# told it its terms before it left), names them and stops
eps3=$(free_endpoints 3)
pids=
for r in 0 1; do
  # shellcheck disable=SC2086
  timeout 120 "$RUMOR_PEER" $base --rank $r --peers "$eps3" --topology complete \
    >"$tmp/late-$r.log" 2>&1 &
  pids="$pids $!"
done
sleep 3
t4=$(date +%s)
# shellcheck disable=SC2086
timeout 120 "$RUMOR_PEER" $base --rank 2 --peers "$eps3" --topology complete \
  --model mlp:784-100-10 >"$tmp/late-2.log" 2>&1
rc=$?
t5=$(date +%s)
for p in $pids; do wait "$p"; done
pids=
expect_rc 1 $rc "the late peer of another model" "$tmp/late-2.log"
[ $((t5 - t4)) -le 15 ] || fail "the late peer of another model took $((t5 - t4)) s (its start timeout is 30)"
for r in 0 1; do
  expect_log late-2 "peer $r (tcp://" "the late peer names peer $r"
done
expect_log late-2 "no neighbour is left to mix with" "the late peer"

# ---- 4. a neighbour diverges (--lr 1000): named, left out; the others live
run diverged 3 complete "" "" "--lr 1000"
expect_rc 1 "$(rc_of diverged-2)" "the diverging peer itself" "$tmp/diverged-2.log"
expect_log diverged-2 "training diverged" "the diverging peer blames its own --lr"
for r in 0 1; do
  expect_rc 0 "$(rc_of diverged-$r)" "healthy peer $r beside a diverging one" "$tmp/diverged-$r.log"
  expect_log diverged-$r "peer 2 (tcp://" "peer $r names the diverging neighbour"
  expect_log diverged-$r "times this peer's norm away from them" "peer $r"
  expect_log diverged-$r "left out of the mix" "peer $r"
  grep -q "rumor-peer $r: training diverged" "$tmp/diverged-$r.log" && fail "healthy peer $r diverged"
  acc=$(sed -n "s/^peer $r: local test accuracy \([0-9.]*\)%/\1/p" "$tmp/diverged-$r.log")
  expect_num_ge "${acc:-0}" 70 "healthy peer $r's test accuracy beside a diverging peer"
  out=$(metrics_field "$tmp/diverged-$r.jsonl" done outlier_rounds)
  [ "${out:-0}" -ge 1 ] || fail "peer $r's done event counts ${out:-no} outlier rounds"
done
echo "mismatch: pair stopped in $((t1 - t0)) s; beside a diverging peer: $(grep -h 'local test accuracy' "$tmp"/diverged-[01].log | tr '\n' ' ')"
finish
