#!/bin/sh
# A swarm of rumor-peer processes on this machine training one GPT on
# English text with D-PSGD, against one process trained on the same tokens.
#
# Usage: examples/gpt-swarm.sh [-n PEERS] [-t TOPOLOGY] [-r ROUNDS] [-c CORPUS]
#                              [-p BASEPORT] [-- rumor-peer options...]
#   -n PEERS     peers (default 8)
#   -t TOPOLOGY  the gossip graph (default ring)
#   -r ROUNDS    training rounds: one batch per peer each (default 300)
#   -c CORPUS    a text file (default build/corpus/kjv.txt, written by
#                ./bootstrap; the King James Bible)
#   -p BASEPORT  peers listen on BASEPORT, BASEPORT+1, ... over loopback
#                (default: a free range; as examples/local-swarm.sh -p)
# Everything after -- goes to every rumor-peer; e.g. the swarm that trains as
# one process with PEERS times the batch (docs/outer.md):
#   examples/gpt-swarm.sh -t onepeer-exp -- --outer optim --outer-rounds period
# Every peer trains on its own contiguous slice of the text, windows of 64
# tokens, batch 8, AdamW; then the same model is trained by one rumor-train
# process for the same number of steps with a batch PEERS times larger, so
# both see the same number of tokens. Both validation losses are printed,
# over the same first 16 x BATCH validation windows.
# Model and hyperparameters: MODEL, BATCH, LR in the environment.
set -eu
usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p;}' "$0"; }
n=8 topo=ring rounds=300 corpus= base= pgiven=
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-t|-r|-c|-p) [ $# -ge 2 ] || { echo "gpt-swarm: option '$1' needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    -n) n=$2; shift 2 ;;
    -t) topo=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -c) corpus=$2; shift 2 ;;
    -p) base=$2; pgiven=1; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "gpt-swarm: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
corpus=${corpus:-$top/build/corpus/kjv.txt}
case "$rounds" in ''|*[!0-9]*) echo "gpt-swarm: -r '$rounds': expected a number" >&2; exit 2 ;; esac
# (local-swarm.sh checks that the range fits in 1-65535)
[ -z "$pgiven" ] || case "$base" in
  ''|*[!0-9]*) echo "gpt-swarm: -p '$base': expected a port number" >&2; exit 2 ;;
esac
[ -f "$corpus" ] || { echo "gpt-swarm: no corpus at $corpus (run ./bootstrap build, or give -c FILE)" >&2; exit 1; }
model=${MODEL:-gpt:layers=2,dim=64,heads=4,ctx=64}
batch=${BATCH:-8}
lr=${LR:-3e-3}
train=${RUMOR_TRAIN:-$top/build/rumor-train}
rundir=$(mktemp -d /tmp/rumor-gpt-swarm-XXXXXX)

# rumor-peer's epochs are passes over a peer's slice: pick the epoch count
# that gives at least ROUNDS rounds (the peers print how many they run)
bytes=$(stat -c %s "$corpus")
per_epoch=$(( bytes * 9 / 10 / n / (batch * 64) ))
[ "$per_epoch" -ge 1 ] || per_epoch=1
epochs=$(( (rounds + per_epoch - 1) / per_epoch ))
total=$(( per_epoch * epochs ))
echo "gpt-swarm: $n peers on $topo, $model, $total steps of batch $batch a peer; logs in $rundir"
st=0
"$here/local-swarm.sh" -n "$n" -t "$topo" ${pgiven:+-p "$base"} -d "$rundir/swarm" -q -- \
  --model "$model" --data "text:$corpus" --batch "$batch" --epochs "$epochs" \
  --optimizer adamw --lr "$lr" --progress 10 "$@" || st=$?
[ "$st" != 2 ] || exit 2  # a usage error of local-swarm.sh's: said already

echo
echo "gpt-swarm: one process, $total steps of batch $((batch * n)) (the same tokens)"
"$train" --model "$model" --data "text:$corpus" --batch $((batch * n)) --steps "$total" \
  --optimizer adamw --lr "$lr" --eval-every "$total" --eval-batches $(( n < 16 ? 16 / n : 1 )) \
  --progress 10 \
  | tee "$rundir/one.log" | tail -n 1
swarm=$(sed -n 's/^peer 0: swarm average validation loss \(.*\)/\1/p' "$rundir/swarm/peer-0.log")
one=$(sed -n 's/^validation loss \([0-9.]*\) .*/\1/p' "$rundir/one.log")
echo
echo "validation loss: swarm average ${swarm:-?}, one process ${one:-?} (nats per byte)"
