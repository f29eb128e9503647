#!/bin/sh
# Runs each fuzz target for a while (the body of `make fuzz`, see local.am).
#
#   run-fuzz.sh OUT CORPUS SECONDS TARGET...
#
# For each TARGET: copies CORPUS/TARGET to OUT/TARGET/corpus (the source
# tree's corpus is only read, unless FUZZ_MERGE=1), runs OUT/bin/fuzz_TARGET
# on the copy for SECONDS with artifacts (crash-*, leak-*, timeout-*, oom-*)
# in OUT/TARGET/ and its temp files in OUT/TARGET/tmp, and prints
#   fuzz: TARGET executions=N crashes=N
# Exits 1 when any target crashed (its log's end is printed), else 0.
# FUZZ_TIMEOUT: seconds one input may take (libFuzzer -timeout); FUZZ_FLAGS:
# more libFuzzer flags; FUZZ_MERGE=1: afterwards, merge the inputs that add
# coverage into CORPUS/TARGET.
set -u
out=$1 corpus=$2 seconds=$3
shift 3
status=0
for t in "$@"; do
  dir=$out/$t
  bin=$out/bin/fuzz_$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/tmp"
  if [ ! -d "$corpus/$t" ]; then
    echo "fuzz: $t: no seed corpus $corpus/$t" >&2
    status=1
    continue
  fi
  cp "$corpus/$t"/* "$dir/corpus/" || status=1
  rc=0
  # libFuzzer turns leak detection on with ASan; the rss limit is libFuzzer's
  # default, written out.
  TMPDIR=$dir/tmp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-25}" -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$dir/" ${FUZZ_FLAGS:-} "$dir/corpus" \
      >"$dir/log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9][0-9]*\) runs.*/\1/p' "$dir/log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9][0-9]*\)[^0-9].*/\1/p' "$dir/log" | tail -n 1)
  crashes=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    crashes=1 # it stopped without leaving an input (e.g. on a seed); the log says why
  fi
  echo "fuzz: $t executions=${runs:-0} crashes=$crashes"
  if [ "$crashes" -ne 0 ]; then
    status=1
    tail -n 40 "$dir/log" | sed "s|^|  $t: |"
    echo "  $t: full log $dir/log; inputs: $(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' \
      -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | tr '\n' ' ')"
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    TMPDIR=$dir/tmp "$bin" -merge=1 -timeout="${FUZZ_TIMEOUT:-25}" "$corpus/$t" "$dir/corpus" \
      >"$dir/merge.log" 2>&1 || { echo "fuzz: $t: merge failed (see $dir/merge.log)" >&2; status=1; }
  fi
done
exit $status
