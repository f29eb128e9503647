#!/bin/sh
# bench_robust.sh: a swarm of 8 with one lying peer, robust mixing against
# none. Eight peers on loopback train the Fashion-MNIST MLP (784-32-10,
# 6000 examples, 2 epochs) on a ring and on the exponential graph; rank 7 is
# tests/rumor-attacker, which trains honestly and sends its out-neighbours
# its parameters sign-flipped, as Gaussian noise of their norm, 100 times
# their size, or moved back against its own progress, 4 times its last
# round's step ("a little is enough", alie:4: within the honest spread).
# Each attack runs with --robust none and --robust clip;
# each graph also runs without a liar, both ways.
#
# Prints "bench: NAME = VALUE UNIT" lines, GRAPH ring or exp:
#   robust_GRAPH_clean_none, robust_GRAPH_clean_clip   the 7 honest ranks'
#                            mean local test accuracy without a liar (%)
#   robust_GRAPH_clip_cost   clean_none - clean_clip (points; the target is
#                            below 0.3)
#   robust_GRAPH_ATTACK_none, robust_GRAPH_ATTACK_clip   the honest ranks'
#                            mean accuracy with that liar (%)
#   robust_GRAPH_ATTACK_gap  clean_clip - ATTACK_clip (points; the target
#                            is within 1)
# and a table of them. Then the small GPT (gpt:layers=2,dim=48,heads=4,
# ctx=64, AdamW, 300 rounds of 8 windows, byte-level, on a Debian text) on a
# ring of 5, rank 4 the liar (sign, noise), the 4 honest ranks' mean
# validation loss at the end:
#   robust_gpt_clean_none, robust_gpt_clean_clip, robust_gpt_ATTACK_none,
#   robust_gpt_ATTACK_clip (nats); robust_gpt_clip_cost and
#   robust_gpt_ATTACK_gap (nats; the target is within 0.03)
# Environment: RUMOR_BUILDDIR, RUMOR_SRCDIR (make bench); RUMOR_DATA.
set -u
SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
peer=$BUILDDIR/rumor-peer
attacker=$BUILDDIR/tests/rumor-attacker
FASHION=${RUMOR_DATA:-/usr/share/datasets/fashion-mnist}
[ -x "$peer" ] || { echo "bench_robust: no $peer"; exit 77; }
[ -x "$attacker" ] || { echo "bench_robust: no $attacker (make tests/rumor-attacker)"; exit 77; }
[ -r "$FASHION/train-images-idx3-ubyte.gz" ] || { echo "bench_robust: no Fashion-MNIST"; exit 77; }
command -v ss >/dev/null || [ -r /proc/net/tcp ] || { echo "bench_robust: cannot find free ports"; exit 77; }
. "$SRCDIR/tests/shutil.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
N=8

run() { # NAME GRAPH ATTACK ROBUST
  eps=$(free_endpoints $N)
  pids=
  r=0
  while [ $r -lt $N ]; do
    bin=$peer
    [ $r = $((N - 1)) ] && [ "$3" != none ] && bin=$attacker
    RUMOR_ATTACK=$3 timeout 600 "$bin" --insecure --rank $r --peers "$eps" --data "$FASHION" \
      --model mlp:784-32-10 --train-limit 6000 --epochs 2 --batch 32 --lr 0.05 --progress 0 \
      --no-average --topology "$2" --robust "$4" >"$tmp/$1-$r.log" 2>&1 &
    pids="$pids $!"
    r=$((r + 1))
  done
  for p in $pids; do wait "$p" || { echo "bench_robust: $1: a peer failed"; tail -n 3 "$tmp/$1-0.log"; exit 1; }; done
}
honest() { # NAME: the honest ranks' mean local test accuracy
  r=0
  while [ $r -lt $((N - 1)) ]; do
    sed -n 's/^peer [0-9]*: local test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/$1-$r.log"
    r=$((r + 1))
  done | awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n; else print "nan" }'
}
fig() { echo "bench: $1 = $2 $3"; }

table="| graph | liar | --robust none | --robust clip | clip's gap to no liar |
| --- | --- | --- | --- | --- |"
for g in ring exp; do
  run $g-clean-none $g none none
  run $g-clean-clip $g none clip
  cn=$(honest $g-clean-none) cc=$(honest $g-clean-clip)
  fig robust_${g}_clean_none "$cn" %
  fig robust_${g}_clean_clip "$cc" %
  fig robust_${g}_clip_cost "$(echo "$cn $cc" | awk '{ printf "%.2f", $1 - $2 }')" points
  table="$table
| $g | none | $cn% | $cc% | |"
  for a in sign noise scale:100 alie:4; do
    run "$g-$a-none" $g $a none
    run "$g-$a-clip" $g $a clip
    an=$(honest "$g-$a-none") ac=$(honest "$g-$a-clip")
    k=$(echo "$a" | sed 's/:/_/')
    fig robust_${g}_${k}_none "$an" %
    fig robust_${g}_${k}_clip "$ac" %
    gap=$(echo "$cc $ac" | awk '{ printf "%.2f", $1 - $2 }')
    fig robust_${g}_${k}_gap "$gap" points
    q=$(grep -l "peer $((N - 1)) (.*quarantined" "$tmp/$g-$a-clip-"*.log 2>/dev/null | wc -l)
    table="$table
| $g | $a | $an% | $ac% ($q peers quarantined it) | $gap points |"
  done
done
echo "$table"

# ---- the GPT: validation loss
corpus=$BUILDDIR/corpus/kjv.txt
[ -f "$corpus" ] || corpus=/usr/share/common-licenses/GPL-3
[ -f "$corpus" ] || { echo "bench_robust: no text for the GPT part"; exit 0; }
gpt() { # NAME ATTACK ROBUST
  eps=$(free_endpoints 5)
  pids=
  for r in 0 1 2 3 4; do
    bin=$peer
    [ $r = 4 ] && [ "$2" != none ] && bin=$attacker
    RUMOR_ATTACK=$2 timeout 600 "$bin" --insecure --rank $r --peers "$eps" --data "text:$corpus" \
      --model gpt:layers=2,dim=48,heads=4,ctx=64 --batch 8 --train-limit 200 --rounds 300 \
      --optimizer adamw --lr 3e-3 --no-average --progress 0 --round-timeout 30 --topology ring \
      --robust "$3" --metrics "$tmp/$1-$r.jsonl" >"$tmp/$1-$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || { echo "bench_robust: $1: a peer failed"; tail -n 3 "$tmp/$1-0.log"; exit 1; }; done
  for r in 0 1 2 3; do
    sed -n 's/.*"event":"done".*"local_eval_loss":\([0-9.e+-]*\).*/\1/p' "$tmp/$1-$r.jsonl" | tail -1
  done | awk '{ s += $1; n++ } END { if (n == 4) printf "%.4f", s / n; else print "nan" }'
}
cn=$(gpt gpt-clean-none none none) cc=$(gpt gpt-clean-clip none clip)
fig robust_gpt_clean_none "$cn" nats
fig robust_gpt_clean_clip "$cc" nats
fig robust_gpt_clip_cost "$(echo "$cn $cc" | awk '{ printf "%.4f", $2 - $1 }')" nats
table="| liar | --robust none | --robust clip | clip's gap to no liar |
| --- | --- | --- | --- |
| none | $cn | $cc | |"
for a in sign noise; do
  an=$(gpt "gpt-$a-none" $a none) ac=$(gpt "gpt-$a-clip" $a clip)
  gap=$(echo "$cc $ac" | awk '{ printf "%.4f", $2 - $1 }')
  fig robust_gpt_${a}_none "$an" nats
  fig robust_gpt_${a}_clip "$ac" nats
  fig robust_gpt_${a}_gap "$gap" nats
  table="$table
| $a | $an | $ac | $gap nats |"
done
echo "$table"
