#!/bin/bash
# Packs what a GPU machine without tandem's Debian packages needs to run the GPU checks
# (scripts/gpu_check.sh): the stripped test and trainer binaries, every shared library
# they load except glibc's and the CUDA libraries the GPU machine has (cuBLAS, cuDNN),
# and Fashion-MNIST, into .device/bundle.tar.xz (ignored by git).
#   [PACK_EXTRA="PATH=NAME ..."] scripts/gpu_pack.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data" "$root/.device"
bins=(tests/framework/gpu/gpu_kernels_test tests/framework/gpu/gpu_session_test
      tests/framework/kernels/conv_filter_grad_test
      apps/trainer tests/bench/train_bench tests/bench/estimator_bench)
for b in "${bins[@]}"; do
  strip -o "$stage/bin/$(basename "$b")" "$build/$b"
done
# PACK_EXTRA="PATH=NAME ...": more binaries, e.g. another commit's train_bench to compare.
for extra in ${PACK_EXTRA:-}; do
  strip -o "$stage/bin/${extra#*=}" "${extra%%=*}"
done
# Shared libraries: all but the C library's and the GPU machine's own CUDA libraries.
for b in "$stage"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcublas|libcublasLt|libcudnn[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp /usr/share/datasets/fashion-mnist/*.gz "$stage/data/"
tar -C "$stage" -cJf "$root/.device/bundle.tar.xz" bin lib data
ls -la "$root/.device/bundle.tar.xz"
