#!/bin/sh
# tests/gpu/pack.sh: builds, on this machine (nvcc is enough, no GPU needed),
# what tests/gpu/run.sh runs on a machine with a GPU, and packs it into .gpu/
# at the top of the tree (ignored by git):
#   .gpu/build.tar.gz  the binaries, statically linked with librumor (no
#                 libtool wrappers, no relinking there), for --with-cuda-arch
#                 (90 by default: the H100 and H200), at the paths a build
#                 has, with the demo's text in corpus/ (build/corpus/kjv.txt)
#                 and GPT-2's tokenizer files in tokenizers/gpt2
#                 (build/tokenizers/gpt2), both ./bootstrap's; compressed,
#                 since the tree travels in 64 MiB; run.sh unpacks it
#   .gpu/debs/    Debian's packages of the libraries they load (OpenBLAS,
#                 ZeroMQ, libsodium, ICU, ...), which run.sh unpacks with
#                 dpkg -x: a GPU machine may have no package mirror
# The GPU machines have CUDA's runtime, cuBLAS and NCCL, PyTorch and
# transformers; everything else travels. Usage: tests/gpu/pack.sh [ARCH]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:-90}
cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build-gpu
if [ ! -f build-gpu/Makefile ] || [ configure -nt build-gpu/Makefile ]; then
  (cd build-gpu && ../configure --quiet --disable-shared --enable-static --with-cuda \
    --with-cuda-arch="$arch")
fi
bins="rumor-train rumor-peer tests/gpt_ref tests/test_ops tests/test_ops_tf tests/test_backend_ops
  tests/test_cuda_train tests/test_cuda_parity tests/bpe_ids tests/bench/bench_cuda tests/bench/bench_pipeline tests/bench/bench_gossip"
# shellcheck disable=SC2086
make -C build-gpu -j"$(nproc)" $bins >/dev/null
rm -rf .gpu/build .gpu/build.tar.gz .gpu/corpus
for b in $bins; do
  file -b "build-gpu/$b" | grep -q ELF || { echo "pack: build-gpu/$b is not a binary (a libtool wrapper?)" >&2; exit 1; }
  mkdir -p ".gpu/build/$(dirname "$b")"
  strip -o ".gpu/build/$b" "build-gpu/$b"
done
if [ -f build/corpus/kjv.txt ]; then mkdir -p .gpu/build/corpus && cp build/corpus/kjv.txt .gpu/build/corpus/
else echo "pack: no build/corpus/kjv.txt (./bootstrap build writes it): the demo step will fail" >&2; fi
# GPT-2's tokenizer files for test_tokenize (its Hugging Face check needs
# transformers, which the GPU machines have)
if [ -f build/tokenizers/gpt2/encoder.json ]; then mkdir -p .gpu/build/tokenizers && cp -r build/tokenizers/gpt2 .gpu/build/tokenizers/
else echo "pack: no build/tokenizers/gpt2 (./bootstrap build fetches it): test_tokenize will skip" >&2; fi
tar -C .gpu -czf .gpu/build.tar.gz build && rm -rf .gpu/build
mkdir -p .gpu/debs
pkgs="libopenblas0-pthread libzmq5 libsodium23 liblapacke libtmglib3 libcjson1 libinih1
  libmicrohttpd12 libicu72 libarpack2 libgfortran5 libquadmath0 libpgm-5.3-0 libnorm1 libgssapi-krb5-2
  libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libbsd0 libmd0"
for p in $pkgs; do
  ls .gpu/debs/"${p}"_*.deb >/dev/null 2>&1 && continue
  (cd .gpu/debs && apt-get download "$p" >/dev/null 2>&1) ||
    { echo "pack: apt-get download $p failed (run apt-get update first)" >&2; exit 1; }
done
echo "pack: .gpu/ holds $(du -sh .gpu | cut -f1) (the device takes 64 MiB with the tree):"
du -sh .gpu/build.tar.gz .gpu/debs
