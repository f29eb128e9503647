#!/bin/sh
# End-to-end training with the real rumor-train binary on Fashion-MNIST:
#  - one epoch reaches at least 84% test accuracy;
#  - the same run with shuffled training labels stays near chance (< 20%),
#    so the accuracy check can fail;
#  - two runs with the same seed and one thread give identical results;
#  - the JSON-lines metrics hold start, epoch and done events that agree with
#    the printed result.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion

train="$RUMOR_BUILDDIR/rumor-train"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints the accuracy (percent) from rumor-train's last line.
acc_of() { sed -n 's/^test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }

"$train" --data "$FASHION" --epochs 1 --seed 1 --quiet --metrics "$tmp/m.jsonl" >"$tmp/good.out" 2>&1
expect_rc 0 $? "one epoch of training" "$tmp/good.out"
good=$(acc_of "$tmp/good.out")
echo "one epoch: ${good}% test accuracy"
expect_num_ge "${good:-0}" 84 "test accuracy after one epoch"

"$train" --data "$FASHION" --epochs 1 --seed 1 --quiet --shuffle-labels >"$tmp/shuf.out" 2>&1
expect_rc 0 $? "shuffled-label run" "$tmp/shuf.out"
shuf=$(acc_of "$tmp/shuf.out")
echo "shuffled labels: ${shuf}% test accuracy"
expect_num_lt "${shuf:-100}" 20 "test accuracy with shuffled labels"

# Metrics: one start, one epoch, one done event; done's accuracy matches stdout.
expect_count "$tmp/m.jsonl" '"event":"start"' 1
expect_count "$tmp/m.jsonl" '"event":"epoch"' 1
expect_count "$tmp/m.jsonl" '"event":"done"' 1
macc=$(sed -n 's/.*"event":"done","test_accuracy":\([0-9.]*\).*/\1/p' "$tmp/m.jsonl")
expect_num_close "$(awk "BEGIN{print ${macc:-0}*100}")" "$good" 0.006 "metrics accuracy vs printed"
bad_lines=$(grep -cv '^{.*}$' "$tmp/m.jsonl")
[ "$bad_lines" -eq 0 ] || fail "metrics file has $bad_lines lines that are not JSON objects"

# Determinism with one thread.
for i in 1 2; do
  "$train" --data "$FASHION" --epochs 1 --train-limit 3000 --threads 1 --seed 7 --quiet \
    >"$tmp/det$i.out" 2>&1
done
# Compare the result, not the timing that follows it.
result() { sed -n 's/^\(test accuracy .*)\) after.*/\1/p' "$1"; }
[ -n "$(result "$tmp/det1.out")" ] || fail "no result line in: $(cat "$tmp/det1.out")"
[ "$(result "$tmp/det1.out")" = "$(result "$tmp/det2.out")" ] ||
  fail "same seed, different results: $(result "$tmp/det1.out") vs $(result "$tmp/det2.out")"
"$train" --data "$FASHION" --epochs 1 --train-limit 3000 --threads 1 --seed 8 --quiet >"$tmp/det3.out" 2>&1
[ "$(result "$tmp/det1.out")" = "$(result "$tmp/det3.out")" ] && fail "a different seed gave the same result"

finish
