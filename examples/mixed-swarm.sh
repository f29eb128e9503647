#!/bin/sh
# A mixed swarm on this machine: rumor-peer processes that each cut one GPT
# their own way (a pipeline of 2 stages here, 3 there, on CPU devices of one
# thread each) train it together on English text with D-PSGD over loopback.
# At the end: every peer's validation loss, the swarm average's, and text
# sampled from the swarm average.
#
# Usage: examples/mixed-swarm.sh [-n PEERS] [-s STAGES] [-g DEVICES]
#                                [-t TOPOLOGY] [-r ROUNDS] [-c CORPUS]
#                                [-p BASEPORT] [-d RUNDIR]
#   -n PEERS     peers (default 4)
#   -s STAGES    pipeline stages by rank, the list repeating (default 2,3);
#                1 is an unpipelined peer
#   -g DEVICES   devices by rank as examples/local-swarm.sh takes them
#                (default: where rumor-train devices finds a GPU, peer 0
#                runs its 2 stages on it, cuda:0+cuda:0; else CPU devices)
#   -t TOPOLOGY  the gossip graph (default ring)
#   -r ROUNDS    training rounds, one batch of 8 windows a peer each
#                (default 2000: about 2 minutes on 2 cores)
#   -c CORPUS    a text file (default build/corpus/kjv.txt, written by
#                ./bootstrap: the King James Bible)
#   -p BASEPORT  peers listen on BASEPORT, BASEPORT+1, ... over loopback
#                (default: a free range; as examples/local-swarm.sh -p)
#   -d RUNDIR    logs, checkpoints and the swarm average (default: a new
#                directory in /tmp)
# The peers' cuts differ, the model, its parameter space and the wire do
# not: a peer mixes what arrives by (offset, length) whatever cut its
# neighbour made. Model and rate: MODEL and LR in the environment.
set -eu
usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p;}' "$0"; }
n=4 stages=2,3 topo=ring rounds=2000 corpus= rundir= gdevs= base= pgiven=
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-s|-t|-r|-c|-d|-g|-p) [ $# -ge 2 ] || { echo "mixed-swarm: option '$1' needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    -n) n=$2; shift 2 ;;
    -s) stages=$2; shift 2 ;;
    -g) gdevs=$2; shift 2 ;;
    -t) topo=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -c) corpus=$2; shift 2 ;;
    -d) rundir=$2; shift 2 ;;
    -p) base=$2; pgiven=1; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "mixed-swarm: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
corpus=${corpus:-$top/build/corpus/kjv.txt}
case "$rounds" in ''|*[!0-9]*|0) echo "mixed-swarm: -r '$rounds': expected a number of rounds" >&2; exit 2 ;; esac
# (local-swarm.sh checks that the range fits in 1-65535)
[ -z "$pgiven" ] || case "$base" in
  ''|*[!0-9]*) echo "mixed-swarm: -p '$base': expected a port number" >&2; exit 2 ;;
esac
[ -f "$corpus" ] || { echo "mixed-swarm: no corpus at $corpus (run ./bootstrap build, or give -c FILE)" >&2; exit 1; }
model=${MODEL:-gpt:layers=4,dim=64,heads=4,ctx=64}
lr=${LR:-3e-3}
train=${RUMOR_TRAIN:-$top/build/rumor-train}
[ -x "$train" ] || train=$(command -v rumor-train || true)
[ -n "$train" ] || { echo "mixed-swarm: rumor-train not found (build it, or set RUMOR_TRAIN)" >&2; exit 1; }
[ -n "$rundir" ] || rundir=$(mktemp -d "${TMPDIR:-/tmp}/rumor-mixed-swarm-XXXXXX")
mkdir -p "$rundir"

# a GPU where there is one: peer 0 cuts its model into 2 stages on it
if [ -z "$gdevs" ] && "$train" devices --json 2>/dev/null | grep -q '"spec":"cuda:0"'; then
  gdevs=cuda:0+cuda:0 i=1
  while [ $i -lt "$n" ]; do gdevs="$gdevs,-"; i=$((i + 1)); done
fi
echo "mixed-swarm: $n peers on $topo, stages by rank $stages${gdevs:+, devices by rank $gdevs}, $model, $rounds rounds"
# every peer evaluates at its end (its own model and the swarm average)
status=0
"$here/local-swarm.sh" -n "$n" -t "$topo" -s "$stages" ${gdevs:+-g "$gdevs"} ${pgiven:+-p "$base"} \
  -d "$rundir/swarm" -- \
  --model "$model" --data "text:$corpus" --batch 8 --rounds "$rounds" \
  --optimizer adamw --lr "$lr" --progress 10 --save-average "$rundir/average" || status=$?
[ "$status" != 2 ] || exit 2  # a usage error of local-swarm.sh's: said already

avg=$(ls "$rundir"/average/*-average-r0-*.safetensors 2>/dev/null | tail -n 1)
if [ -n "$avg" ]; then
  echo
  echo "mixed-swarm: text from the swarm average ($avg):"
  "$train" sample "$avg" --prompt 'And God said' --tokens 240 --temperature 0.7
  echo
else
  echo "mixed-swarm: no swarm average was saved (see $rundir/swarm/peer-0.log)" >&2
  status=1
fi
exit $status
