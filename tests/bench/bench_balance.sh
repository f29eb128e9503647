#!/bin/sh
# bench_balance.sh: a swarm with one slow peer. Four rumor-peer processes on
# loopback (ring) train a small GPT on English text; peer 3 runs 3x slower
# (--throttle 3). Three runs of the same rounds: synchronous D-PSGD as is,
# with --balance batch (the fast peers take more batches in the time they
# would have waited), and --mode async (nobody waits).
#
# Prints "bench: NAME = VALUE UNIT" lines:
#   balance_examples_ratio   the swarm's examples/s with --balance batch over
#                            without (the sum of the peers' own rates)
#   *_time_to_loss           seconds until peer 0's validation loss (every 25
#                            rounds) first reaches the target: the worst of
#                            the three runs' final losses, so all reach it
#   balance_time_ratio, async_time_ratio   those times over plain D-PSGD's
# Environment: RUMOR_BUILDDIR, RUMOR_SRCDIR (set by make bench);
#   RUMOR_BENCH_BALANCE_ROUNDS (default 300).
set -u
SRCDIR=${RUMOR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILDDIR=${RUMOR_BUILDDIR:-$SRCDIR/build}
peer=$BUILDDIR/rumor-peer
[ -x "$peer" ] || { echo "bench_balance: no $peer"; exit 77; }
command -v ss >/dev/null || { echo "bench_balance: ss (iproute2) not found"; exit 77; }
corpus=$BUILDDIR/corpus/kjv.txt
[ -f "$corpus" ] || corpus=/usr/share/common-licenses/GPL-3
[ -f "$corpus" ] || { echo "bench_balance: no text corpus"; exit 77; }
. "$SRCDIR/tests/shutil.sh"
rounds=${RUMOR_BENCH_BALANCE_ROUNDS:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 8 windows a batch, 25 rounds an epoch (a peer's shard: 200 windows), an
# evaluation at each epoch's end
run() { # NAME OPTIONS...
  name=$1; shift
  eps=$(free_endpoints 4)
  pids=
  for r in 0 1 2 3; do
    slow=; [ $r = 3 ] && slow="--throttle 3"
    # shellcheck disable=SC2086
    timeout 600 "$peer" --insecure --rank $r --peers "$eps" --data "text:$corpus" \
      --model gpt:layers=2,dim=48,heads=4,ctx=64 --batch 8 --train-limit 200 --rounds "$rounds" \
      --optimizer adamw --lr 3e-3 --no-average --progress 0 --round-timeout 30 $slow "$@" \
      --metrics "$tmp/$name-$r.jsonl" >"$tmp/$name-$r.log" 2>&1 &
    pids="$pids $!"
  done
  ok=1
  for p in $pids; do wait "$p" || ok=0; done
  [ $ok = 1 ] || { echo "bench_balance: the $name swarm failed:"; tail -n 3 "$tmp/$name"-*.log; exit 1; }
}
rate() { # NAME: the swarm's examples/s, the sum of its peers'
  cat "$tmp/$1"-[0-3].log | sed -n 's/^peer [0-9]*: done: .* s, \([0-9.]*\) examples\/s.*/\1/p' |
    awk '{s += $1} END {printf "%.1f", s}'
}
final() { sed -n 's/.*"event":"done".*"local_eval_loss":\([0-9.e+-]*\).*/\1/p' "$tmp/$1-0.jsonl" | tail -1; }
reach() { # NAME TARGET: seconds until peer 0's validation loss <= TARGET
  sed -n 's/.*"event":"epoch".*"eval_loss":\([0-9.e+-]*\).*"seconds":\([0-9.]*\).*/\1 \2/p' \
    "$tmp/$1-0.jsonl" | awk -v t="$2" '$1 <= t + 1e-9 {print $2; exit}'
}

run plain
run balance --balance batch --balance-max 4
run async --mode async
for v in plain balance async; do
  secs=$(sed -n 's/.*"event":"done".*"seconds":\([0-9.]*\).*/\1/p' "$tmp/$v-0.jsonl" | tail -1)
  echo "# $v: swarm $(rate $v) examples/s, peer 0 done in ${secs:-?} s, its final validation loss $(final $v)"
done
target=$(printf '%s\n%s\n%s\n' "$(final plain)" "$(final balance)" "$(final async)" | sort -g | tail -1)
echo "# target validation loss: $target (the worst run's final)"
echo "bench: balance_examples_ratio = $(awk "BEGIN{printf \"%.3f\", $(rate balance) / $(rate plain)}") x"
tp=$(reach plain "$target") tb=$(reach balance "$target") ta=$(reach async "$target")
echo "bench: plain_time_to_loss = ${tp:-nan} s"
echo "bench: balance_time_to_loss = ${tb:-nan} s"
echo "bench: async_time_to_loss = ${ta:-nan} s"
[ -n "$tp" ] && [ -n "$tb" ] && echo "bench: balance_time_ratio = $(awk "BEGIN{printf \"%.3f\", $tb / $tp}") x"
[ -n "$tp" ] && [ -n "$ta" ] && echo "bench: async_time_ratio = $(awk "BEGIN{printf \"%.3f\", $ta / $tp}") x"
exit 0
