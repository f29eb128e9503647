#!/bin/sh
# One model, many cuts, trained: a swarm of 4 peers cut into 1, 2, 3 and 2
# pipeline stages (examples/local-swarm.sh -s) trains a GPT on the GPL's
# text with D-PSGD and reaches the validation loss of the same swarm with
# every peer unpipelined, same seeds, within 0.05 nats (the swarm
# average's, as every peer reports it).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
text_peer_test_setup
opts="--insecure --data text:$text --model gpt:layers=3,dim=32,heads=2,ctx=32 --batch 8
  --rounds 200 --optimizer adamw --lr 3e-3 --progress 0 --round-timeout 20"
# shellcheck disable=SC2086
timeout 300 sh "$RUMOR_SRCDIR/examples/local-swarm.sh" -n 4 -q -d "$tmp/flat" -- $opts \
  >"$tmp/flat.out" 2>&1 || fail "the unpipelined swarm failed: $(tail -n 6 "$tmp/flat.out")"
# shellcheck disable=SC2086
timeout 300 sh "$RUMOR_SRCDIR/examples/local-swarm.sh" -n 4 -q -s 1,2,3,2 -d "$tmp/mixed" -- $opts \
  >"$tmp/mixed.out" 2>&1 || fail "the mixed swarm failed: $(tail -n 6 "$tmp/mixed.out")"
for r in 1 2; do
  n=$(sed -n "s/^rumor-peer $r\/4:   stage \([0-9]\) on .*/\1/p" "$tmp/mixed/peer-$r.log" | tail -1)
  [ "${n:-0}" = "$r" ] || fail "peer $r ran $((${n:-0} + 1)) stages, not $((r + 1))"
done
a=$(sed -n 's/^peer 0: swarm average validation loss \(.*\)/\1/p' "$tmp/flat/peer-0.log")
b=$(sed -n 's/^peer 0: swarm average validation loss \(.*\)/\1/p' "$tmp/mixed/peer-0.log")
echo "swarm average validation loss: unpipelined ${a:-?}, cut 1,2,3,2 ${b:-?}"
cat "$tmp/mixed.out" | tail -n 6
expect_num_close "${b:-99}" "${a:-0}" 0.05 "the mixed swarm's validation loss against the unpipelined one's"
expect_num_lt "${b:-99}" 3.5 "the mixed swarm's validation loss (ln 256 = 5.55 untrained)"
finish
