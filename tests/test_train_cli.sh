#!/bin/sh
# rumor-train's command line: help, bad flags and bad data give clear errors
# and the documented exit codes (0 ok, 1 runtime error, 2 usage), never a crash.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion

train="$RUMOR_BUILDDIR/rumor-train"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$train" --help >"$tmp/help" 2>&1
expect_rc 0 $? "--help"
for opt in --data --rank --world --train-limit --shuffle-labels --model --device --threads \
           --epochs --batch --optimizer --lr --momentum --no-nesterov --weight-decay --beta1 \
           --beta2 --warmup-epochs --schedule --min-lr-ratio --seed --metrics --progress \
           --quiet --log-level --config --help --version "Exit status" "Example"; do
  grep -q -- "$opt" "$tmp/help" || fail "--help does not document $opt"
done

# usage errors: exit 2, message names the problem
run_expect 2 "expected an integer" "$train" --epochs 0
run_expect 2 "expected an integer" "$train" --batch 12x
run_expect 2 "expected a number" "$train" --lr nan
run_expect 2 "unknown option '--bogus'" "$train" --bogus
run_expect 2 "needs a value" "$train" --epochs
run_expect 2 "must be less than --world" "$train" --rank 2 --world 2
run_expect 2 "--schedule 'linear': expected one of cosine,constant" "$train" --schedule linear
run_expect 2 "--optimizer 'adam': expected one of sgd,adamw" "$train" --optimizer adam
run_expect 2 "unexpected argument 'extra'" "$train" extra

# config files: keys are option names; flags override them; errors name file:line
printf '[train]\nepochs = 1\ntrain-limit = 3000\n\n# a comment\nlr = abc\n' >"$tmp/bad.ini"
run_expect 2 "$tmp/bad.ini:6: lr 'abc': expected a number" "$train" -c "$tmp/bad.ini"
printf 'epochs = 1\nepoch = 2\n' >"$tmp/typo.ini"
run_expect 2 "$tmp/typo.ini:2: unknown key 'epoch'" "$train" --config "$tmp/typo.ini"
printf 'epochs = 1\njust words\n' >"$tmp/junk.ini"
run_expect 2 "$tmp/junk.ini:2: not 'key = value'" "$train" -c "$tmp/junk.ini"
run_expect 2 "config file '$tmp/none.ini'" "$train" -c "$tmp/none.ini"
printf '[data]\ndata = %s\ntrain-limit = 2000\n[run]\nepochs = 5\nquiet = yes\nthreads = 1\n' "$FASHION" >"$tmp/good.ini"
out=$("$train" -c "$tmp/good.ini" --epochs 1 2>&1)
echo "$out" | grep -q "after 1 epoch in" || fail "config + --epochs 1 override: $out"
echo "$out" | grep -q "^rumor-train:" && fail "quiet = yes from the config file was not applied: $out"

# runtime errors: exit 1, message names the file or value
run_expect 1 "$tmp/none/train-images-idx3-ubyte.gz" "$train" --data "$tmp/none"
mkdir "$tmp/trunc"
cp "$FASHION"/*.gz "$tmp/trunc/"
head -c 100000 "$FASHION/train-images-idx3-ubyte.gz" >"$tmp/trunc/train-images-idx3-ubyte.gz"
run_expect 1 "train-images-idx3-ubyte.gz" "$train" --data "$tmp/trunc"
run_expect 1 "takes 100 inputs" "$train" --data "$FASHION" --model mlp:100-10 --train-limit 10
run_expect 1 "model 'mlp:784-0-10'" "$train" --data "$FASHION" --model mlp:784-0-10 --train-limit 10
run_expect 1 "device 'gpu'" "$train" --data "$FASHION" --device gpu
run_expect 1 "metrics file '$tmp/no/such/dir.jsonl'" "$train" --data "$FASHION" --train-limit 10 \
  --metrics "$tmp/no/such/dir.jsonl"
# A learning rate far too high: reported as divergence, not trained into NaN.
run_expect 1 "training diverged" "$train" --data "$FASHION" --lr 900 --momentum 0.99 --train-limit 5000

finish
