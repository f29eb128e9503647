#!/bin/sh
# tests/gpu/run.sh [check|bench|cores|quick|focus|kernels|swarm|profile|all]: what only a machine with an NVIDIA GPU
# can tell, in one run, from what tests/gpu/pack.sh packed into .gpu/:
#   check  rumor-train devices; every op on the GPU against the CPU
#          (test_backend_ops, test_ops, test_ops_tf); GPT steps, bf16,
#          pipelines on the GPU, links and NCCL (test_cuda_train); 50 bf16
#          steps against the CPU's fp32 (test_cuda_parity); rumor's
#          GPT against PyTorch and its Hugging Face export against
#          transformers (test_gpt_torch.sh); GPT-2 token shards and the
#          export's tokenizer in transformers (test_tokenize.sh); a GPU peer in a CPU swarm
#          (test_gpu_swarm.sh); test_backend_ops under compute-sanitizer
#   bench  bench_cuda (GPT-2 124M against PyTorch, ops against a copy,
#          GEMMs against cuBLAS, a 4-stage pipeline on one GPU), the op
#          profile of GPT-2 124M steps in bf16 (RUMOR_CUDA_PROFILE), and the
#          CPU benchmarks that want the machine's 16 cores (bench_pipeline's
#          4 and 8 stages, bench_gossip's 2-stage peers)
#   cores  the CPU benchmarks alone (a second call when all ran out of time)
#   swarm  the GPU's part of the swarm: test_cuda_train (stage by stage
#          steps), test_gpu_swarm, bench_gossip's 2-stage peers on 16 cores,
#          and the demo's mixed swarm (examples/mixed-swarm.sh) with its GPU
#          peer, then test_ops_tf and test_backend_ops while time is left
#   quick  the GPU's op and step tests and the swarm with a GPU peer (a
#          short call to recheck a change)
#   focus  the GPU's op and step tests, then bench_cuda's parts named in
#          RUMOR_BENCH_CUDA_ONLY (e.g. gpt124m,attention) and the op profile,
#          then test_tokenize (its Hugging Face check): a short call to
#          measure one kernel's change
#   kernels the GPU's op and step tests, bench_cuda, the op profile,
#          test_backend_ops under compute-sanitizer, rumor's GPT against
#          PyTorch and the tokenizer's export in transformers (a call after
#          the kernels changed)
#   profile the op profile of GPT-2 124M steps alone (RUMOR_CUDA_PROFILE=shapes:
#          each product by its shape)
#   all    both, the most telling first (the GPU's op and step tests, its
#          benchmarks, the rest), so a call cut at its limit keeps the most
# Logs go to $OUT (the device tool's) or /tmp/rumor-gpu; the last lines
# are a table of what passed. Exit status: 0 when nothing failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:-all}
G=$top/.gpu
B=$G/build
out=${OUT:-/tmp/rumor-gpu}
mkdir -p "$out"
log=$out/gpu-$what.log
: >"$log"
# the binaries travel compressed (pack.sh): unpacked afresh, since a warm
# machine may keep an older .gpu/build
if [ -f "$G/build.tar.gz" ]; then rm -rf "$B"; tar -C "$G" -xzf "$G/build.tar.gz"; fi
[ -x "$B/rumor-train" ] || { echo "run: $B/rumor-train missing: run tests/gpu/pack.sh first and carry .gpu" | tee -a "$log"; exit 2; }

# the libraries that travelled as .deb files, unpacked where nothing else looks
libs=/tmp/rumor-libs
if [ ! -d "$libs/usr" ]; then
  mkdir -p "$libs"
  for d in "$G"/debs/*.deb; do dpkg -x "$d" "$libs"; done
fi
# cuBLAS and NCCL: the CUDA toolkit's, else PyTorch's wheels'
find_lib() { # NAME: the directory holding it
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$1" ] && { echo "$d"; return; }
  done
  python3 - "$1" <<'PY' 2>/dev/null
import glob, os, site, sys
for s in site.getsitepackages():
    for p in glob.glob(os.path.join(s, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(p)); sys.exit(0)
PY
}
cub=$(find_lib libcublas.so.13) nccl=$(find_lib libnccl.so.2)
a=$libs/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$a/openblas-pthread:$a:${cub:+$cub:}${nccl:+$nccl:}${LD_LIBRARY_PATH:-}"
export RUMOR_SRCDIR="$top" RUMOR_BUILDDIR="$B" RUMOR_PYTHON="${RUMOR_PYTHON:-$(command -v python3)}"
export OMP_NUM_THREADS=1

results=
note() { echo "$*" | tee -a "$log"; }
step() { # NAME TIMEOUT CMD...: runs CMD, records PASS, FAIL or SKIP (77)
  name=$1 lim=$2; shift 2
  note "== $name ($(date +%T))"
  t0=$(date +%s)
  case $1 in
    profile|sanitize|demo) ( "$@" ) >>"$log" 2>&1 & _p=$!
      ( sleep "$lim"; kill -TERM $_p 2>/dev/null ) & _w=$!
      wait $_p; rc=$?; kill $_w 2>/dev/null ;;
    *) timeout "$lim" "$@" >>"$log" 2>&1; rc=$? ;;
  esac
  case $rc in 0) r=PASS ;; 77) r=SKIP ;; 124) r="FAIL (timed out after ${lim}s)" ;; *) r="FAIL (exit $rc)" ;; esac
  note "-- $name: $r in $(( $(date +%s) - t0 )) s"
  results="$results$name: $r
"
}
note "rumor GPU run '$what' on $(hostname), $(getconf _NPROCESSORS_ONLN) cores; cuBLAS in ${cub:-?}, NCCL in ${nccl:-?}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"
step devices 60 "$B/rumor-train" devices

tokens() { # random token shards in llm.c's format for GPT-2's vocabulary
  tok=/tmp/rumor-tokens
  [ -f "$tok/val.bin" ] && return 0
  mkdir -p "$tok"
  python3 - "$tok" <<'PY' >>"$log" 2>&1
import sys
import numpy as np
rng = np.random.default_rng(1)
for name, n in (("train", 2_000_000), ("val", 100_000)):
    head = np.zeros(256, np.int32)
    head[:3] = (20240520, 1, n)
    with open("%s/%s.bin" % (sys.argv[1], name), "wb") as f:
        f.write(head.tobytes())
        f.write(rng.integers(0, 50257, n, dtype=np.uint16).tobytes())
PY
}
# where a GPT-2 124M step's time goes, op by op: a few bf16 AdamW steps with
# RUMOR_CUDA_PROFILE on random tokens
profile() {
  "$B/rumor-train" devices --json | grep -q '"spec":"cuda:0"' || { echo "no GPU"; return 77; }
  tokens
  env RUMOR_CUDA_PROFILE="${RUMOR_CUDA_PROFILE:-1}" "$B/rumor-train" --model gpt:layers=12,dim=768,heads=12,ctx=1024,vocab=50257 \
    --data "tokens:$tok/train.bin,$tok/val.bin" --device cuda:0:bf16 --optimizer adamw \
    --steps 6 --batch 8 --eval-every 6 --eval-batches 1 --progress 1
}
sanitize() {
  command -v compute-sanitizer >/dev/null || { echo "no compute-sanitizer on PATH"; return 77; }
  RUMOR_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tests/test_backend_ops"
}
check_first() { # the GPU's own checks, fast, most telling first
  step test_backend_ops 90 "$B/tests/test_backend_ops"
  step test_ops 60 "$B/tests/test_ops"
  step test_ops_tf 60 "$B/tests/test_ops_tf"
  step test_cuda_train 120 "$B/tests/test_cuda_train"
  step test_cuda_parity 60 "$B/tests/test_cuda_parity"
}
check_rest() {
  step test_gpt_torch 150 sh "$top/tests/test_gpt_torch.sh"
  step test_tokenize 150 sh "$top/tests/test_tokenize.sh"
  step test_gpu_swarm 200 sh "$top/tests/test_gpu_swarm.sh"
  step memcheck 120 sanitize
}
bench_gpu() {
  step bench_cuda 330 "$B/tests/bench/bench_cuda"
  step profile_124m 90 profile
}
# the main job's mixed swarm, peer 0 pipelined on the GPU (the corpus
# travelled in .gpu/build/corpus)
demo() {
  "$B/rumor-train" devices --json | grep -q '"spec":"cuda:0"' || { echo "no GPU"; return 77; }
  [ -f "$B/corpus/kjv.txt" ] || { echo "no $B/corpus/kjv.txt: run tests/gpu/pack.sh after ./bootstrap build"; return 1; }
  RUMOR_TRAIN="$B/rumor-train" RUMOR_PEER="$B/rumor-peer" \
    sh "$top/examples/mixed-swarm.sh" -c "$B/corpus/kjv.txt" -d /tmp/rumor-demo
}
bench_cores() { # the CPU benchmarks that want 16 cores
  step bench_pipeline 180 "$B/tests/bench/bench_pipeline"
  step bench_gossip 180 "$B/tests/bench/bench_gossip"
}
# in order of what tells most first: a call cut at its limit keeps the log
case $what in
  check) check_first; check_rest ;;
  bench) bench_gpu; bench_cores ;;
  cores) bench_cores ;;
  swarm) step test_cuda_train 120 "$B/tests/test_cuda_train"
    step test_gpu_swarm 200 sh "$top/tests/test_gpu_swarm.sh"
    step bench_gossip 180 "$B/tests/bench/bench_gossip"
    step demo 200 demo
    step test_ops_tf 60 "$B/tests/test_ops_tf"
    step test_backend_ops 90 "$B/tests/test_backend_ops" ;;
  quick) check_first; step test_gpu_swarm 200 sh "$top/tests/test_gpu_swarm.sh" ;;
  focus) check_first; bench_gpu; step test_tokenize 150 sh "$top/tests/test_tokenize.sh" ;;
  kernels) check_first; bench_gpu; step memcheck 120 sanitize
    step test_gpt_torch 150 sh "$top/tests/test_gpt_torch.sh"
    step test_tokenize 150 sh "$top/tests/test_tokenize.sh" ;;
  profile) step profile_124m 90 profile ;;
  all) check_first; bench_gpu; check_rest; bench_cores; step demo 200 demo ;;
  *) note "run: '$what': expected check, bench, cores, quick, focus, kernels, swarm, profile or all"; exit 2 ;;
esac
note ""
note "== summary"
printf '%s' "$results" | tee -a "$log"
grep '^bench: ' "$log" >"$out/gpu-$what-figures.txt" 2>/dev/null || true
printf '%s' "$results" | grep -q FAIL && exit 1
exit 0
