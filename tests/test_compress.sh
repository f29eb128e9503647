#!/bin/sh
# --compress (CHOCO-SGD, compressed gossip with error feedback): three peers
# train the MLP on Fashion-MNIST uncompressed, with int8 and with topk:0.05.
# With int8 the swarm average's test accuracy is within 0.5 points of the
# uncompressed run's, every round took its consensus step (none skipped on
# loopback), and a peer sent the share of the bytes the codec's model says
# (int8 in 15 rounds of 16, f32 keyframes in the 16th). With topk:0.05 it
# still learns, and so it does with the top 1.56% of each chunk of 4096 in 2
# bits, which sends what the codec's layout says: 141x fewer bytes than f32
# in a coded round, f32 keyframes every 141st. The all-reduce baseline with int8 gradients reaches the f32
# all-reduce's accuracy within 0.5 points. Bad --compress values and modes
# are refused before any peer joins.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup

fashion_swarm none
fashion_swarm int8 --compress int8
fashion_swarm topk --compress topk:0.05
fashion_swarm topk2 --compress topk:0.015625:bits=2
fashion_swarm ar --mode allreduce
fashion_swarm ar8 --mode allreduce --compress int8
a0=$(swarm_accuracy none) a8=$(swarm_accuracy int8) ak=$(swarm_accuracy topk)
b0=$(metrics_field "$tmp/none-0.jsonl" done bytes_sent)
b8=$(metrics_field "$tmp/int8-0.jsonl" done bytes_sent)
bk=$(metrics_field "$tmp/topk-0.jsonl" done bytes_sent)
s8=$(metrics_field "$tmp/int8-0.jsonl" done consensus_skipped)
echo "none:       ${b0:-?} bytes sent, swarm average ${a0:-?}%"
echo "int8:       ${b8:-?} bytes sent, swarm average ${a8:-?}%, ${s8:-?} rounds skipped"
echo "topk:0.05:  ${bk:-?} bytes sent, swarm average ${ak:-?}%"
grep -q "compressed gossip (CHOCO-SGD): int8, 3.94x smaller" "$tmp/int8-0.log" ||
  fail "peer 0 did not say it compresses: $(sed -n 1,6p "$tmp/int8-0.log")"
expect_num_close "${a8:-0}" "${a0:-99}" 0.5 "the swarm average's test accuracy, int8 against none"
[ "${s8:-x}" = 0 ] || fail "int8: $s8 rounds skipped their consensus step on loopback"
# 269,322 parameters in chunks of 262,144: per round 2 ranges; int8 payload
# = 4 bytes a 256-element block + 1 a byte an element
model=$(awk 'BEGIN{n=269322; c=262144; f32=4*n; q=4*int((c+255)/256)+c + 4*int((n-c+255)/256)+(n-c);
  print (15*q + f32) / 16 / f32}')
expect_num_close "$(awk "BEGIN{print ${b8:-0} / ${b0:-1}}")" "$model" 0.03 "int8's bytes over f32's"
expect_num_ge "${ak:-0}" 75 "the swarm average's test accuracy with topk:0.05"
# topk in 2 bits: per coded round the ranges of 262,144 and 7,178 elements:
# 64 and 2 chunks, 64 values a whole chunk and ceil(64 x 3082 / 4096) = 49
# the short one; 4 bytes a chunk, 12 bits an index, 2 a value
a2=$(swarm_accuracy topk2) b2=$(metrics_field "$tmp/topk2-0.jsonl" done bytes_sent)
r2=$(metrics_round "$tmp/topk2-0.jsonl")
echo "topk:0.015625:bits=2: ${b2:-?} bytes sent in $((${r2:-0} + 1)) rounds, swarm average ${a2:-?}%"
grep -q "compressed gossip (CHOCO-SGD): topk:0.015625:bits=2, 141.24x smaller" "$tmp/topk2-0.log" ||
  fail "peer 0 did not say it compresses in 2 bits: $(sed -n 1,6p "$tmp/topk2-0.log")"
model2=$(awk -v R="$((${r2:-0} + 1))" 'BEGIN{n=269322; f32=4*n;
  q=64*4 + int((64*64*12+7)/8) + int((64*64*2+7)/8);
  q2=2*4 + int((113*12+7)/8) + int((113*2+7)/8);
  kf=int((R+140)/141); print (kf*f32 + (R-kf)*(q+q2)) / (R*f32)}')
expect_num_close "$(awk "BEGIN{print ${b2:-0} / ${b0:-1}}")" "$model2" \
  "$(awk "BEGIN{print 0.15 * $model2}")" "topk in 2 bits: bytes over f32's (as many rounds)"
expect_num_ge "${a2:-0}" 75 "the swarm average's test accuracy with topk:0.015625:bits=2"
# the all-reduce baseline with int8 gradients: a quarter of the bytes
ar=$(swarm_accuracy ar) ar8=$(swarm_accuracy ar8)
bar=$(metrics_field "$tmp/ar-0.jsonl" done bytes_sent)
bar8=$(metrics_field "$tmp/ar8-0.jsonl" done bytes_sent)
echo "all-reduce: ${bar:-?} bytes sent, ${ar:-?}%; with int8: ${bar8:-?} bytes, ${ar8:-?}%"
grep -q "coded all-reduce: int8 gradients" "$tmp/ar8-0.log" ||
  fail "peer 0 did not say its all-reduce is coded: $(sed -n 1,6p "$tmp/ar8-0.log")"
expect_num_close "${ar8:-0}" "${ar:-99}" 0.5 "the test accuracy, all-reduce int8 against f32"
expect_num_close "$(awk "BEGIN{print ${bar8:-0} / ${bar:-1}}")" 0.26 0.02 \
  "the all-reduce's bytes, int8 over f32 (the swarm average at the end stays f32)"
eps=$(free_endpoints 3)
run_expect 2 "expected none, int8, int4, int2, topk:F[:bits=B[:chunk=C]] or randk:F" \
  "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --compress int9
run_expect 2 "bits must be 2, 4 or 8" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress topk:0.01:bits=3
run_expect 2 "must be a number in (0, 1]" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress topk:2
run_expect 2 "the all-reduce's codecs are int8 and int4" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress topk:0.1 --mode allreduce
run_expect 2 "the all-reduce's codecs are int8 and int4" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress int2 --mode allreduce
run_expect 2 "needs --mode dpsgd or allreduce (not async)" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress int8 --mode async
run_expect 2 "consensus-step" "$RUMOR_PEER" --insecure --rank 0 \
  --peers "$eps" --data "$FASHION" --compress int8 --consensus-step 1.5
finish
