#!/bin/sh
# The layers' dependencies point one way (README, "Source layout"):
#   src/base   errors, logging, random numbers, BLAS set-up: includes no
#              other layer
#   kernels    devices and ops tables: base
#   topo       the topology analyzer: base only
#   src        the core: base, kernels
#   gossip     transport, mixer, membership: base, topo, src, kernels
#   swarm      the peer object: base, topo, src, kernels, gossip
#   peers      the binaries: anything
#   sim        rumor-sim, a binary: anything
# Every `#include "X.h"` of a project header in a layer's sources is looked
# up in the tree; a header of a layer it may not use fails the test, naming
# the file, the line and both layers.
. "$(dirname "$0")/shutil.sh"
top=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
[ -d "$top/src/base" ] || skip "no source tree at $top"

# layer_of FILE: the layer a source file belongs to.
layer_of() {
  case $1 in
    src/base/*) echo base ;;
    src/*) echo src ;;
    kernels/*) echo kernels ;;
    topo/*) echo topo ;;
    gossip/*) echo gossip ;;
    swarm/*) echo swarm ;;
    peers/*) echo peers ;;
    sim/*) echo sim ;;
    *) echo other ;;
  esac
}

allowed() { # allowed FROM TO
  [ "$1" = "$2" ] && return 0
  case "$1:$2" in
    *:base) return 0 ;;
    src:kernels) return 0 ;;
    gossip:topo | gossip:src | gossip:kernels) return 0 ;;
    swarm:topo | swarm:src | swarm:kernels | swarm:gossip) return 0 ;;
    peers:* | sim:*) return 0 ;;
  esac
  return 1
}

cd "$top" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# where each project header lives (a name must be unique across layers)
find src kernels topo gossip swarm peers sim -name '*.h' | sort |
  awk '{ n = $0; sub(/.*\//, "", n); print n, $0 }' >"$tmp/headers"
dups=$(awk '{ print $1 }' "$tmp/headers" | sort | uniq -d | tr '\n' ' ')
[ -z "$dups" ] || fail "header names used in two places: $dups"

# every "name.h" include (system headers use <>): FILE LINE HEADER
find src kernels topo gossip swarm peers sim \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort |
  xargs grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  sed 's/^\([^:]*\):\([0-9]*\):.*"\(.*\)".*/\1 \2 \3/' >"$tmp/includes"

checked=0
while read -r f line inc; do
  [ "$inc" = config.h ] && continue
  # the CUDA sources' CPU emulation (tests/cuda-emu), built only with
  # configure --with-cuda-emu by developers without a GPU
  [ "$f:$inc" = kernels/cuda/cuda_compat.h:cuda_emu.h ] && continue
  name=${inc##*/}
  path=$(awk -v n="$name" '$1 == n { print $2; exit }' "$tmp/headers")
  if [ -z "$path" ]; then
    fail "$f:$line includes \"$inc\", which is no header of the tree"
    continue
  fi
  from=$(layer_of "$f")
  to=$(layer_of "$path")
  checked=$((checked + 1))
  allowed "$from" "$to" || fail "$f:$line: $from includes $path ($to)"
done <"$tmp/includes"
[ "$checked" -gt 100 ] || fail "only $checked includes checked: the scan found too little"
echo "$checked includes checked"
finish
