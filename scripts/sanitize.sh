#!/usr/bin/env bash
# The default test tier under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer: run it before landing changes to the runtime, the distributed layer or
# any parser. Builds a build directory of its own (default build-asan) with
# -DTANDEM_SANITIZE=ON, without the CUDA backend (the GPU tests skip without a GPU
# anyway), then runs `ctest -L unit` there. Any sanitizer report fails its test: UBSan
# halts on the first error, ASan and LSan always do.
#   scripts/sanitize.sh [BUILD_DIR] [extra ctest arguments, e.g. -R grpc_session_test]
# About 2.5x the plain build and 2-3x the plain tier's time on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
shift $(( $# > 0 ? 1 : 0 ))
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON \
  -DTANDEM_CUDA=OFF
cmake --build "$build" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Instrumented code is slower: the tier's per-test timeout is doubled.
ctest --test-dir "$build" -L unit --output-on-failure -j"$(nproc)" --timeout 1800 "$@"
