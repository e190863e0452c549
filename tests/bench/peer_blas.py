"""Gives the PyTorch peers their best BLAS kernels, and says which.

Debian's PyTorch multiplies float32 matrices with OpenBLAS, which picks its kernels by
the CPU it detects at load time. It can detect wrong: on a 2-vCPU Intel Xeon with
AVX-512 it chose "Prescott" (generic kernels, 31.8 GFLOP/s for a 512^3 torch.mm against
143.8 with SkylakeX). An OPENBLAS_CORETYPE inherited from the environment overrides
the detection: a 2-vCPU AMD EPYC with AVX512-BF16 came with OPENBLAS_CORETYPE=Haswell
set, 90 GFLOP/s against 165 with SkylakeX. So this script times a 512^3 torch.mm, one
thread, under the inherited setting, under OpenBLAS's own detection and under each
core type the CPU's flags allow (OPENBLAS_CORETYPE; each in its own process, since
OpenBLAS reads it when it loads), and prints

    peer_blas: inherited=Haswell detected=Cooperlake chosen=SkylakeX gflops=... (...)
    export OPENBLAS_CORETYPE=SkylakeX

The benchmark scripts eval the last line (`--export`), so every peer runs on the
fastest kernels and the output names them. Needs python3-torch.

    /usr/bin/python3 tests/bench/peer_blas.py [--export]
"""
import argparse
import os
import re
import subprocess
import sys

# OpenBLAS core types and the CPU flags each one's kernels execute.
CANDIDATES = {
    "SkylakeX": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"},
    "Cooperlake": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"},
    "Zen": {"avx2", "fma"},
    "Haswell": {"avx2", "fma"},
    "Sandybridge": {"avx"},
}

TIMER = r"""
import os, sys, time, torch
torch.set_num_threads(1)
n = 512
a, b = torch.randn(n, n), torch.randn(n, n)
for _ in range(3): torch.mm(a, b)
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    for _ in range(10): torch.mm(a, b)
    best = min(best, (time.perf_counter() - t) / 10)
print("gflops=%.1f" % (2 * n ** 3 / best / 1e9))
"""


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def measure(core):
    """(core name OpenBLAS used, GFLOP/s) of one process with OPENBLAS_CORETYPE=core
    (unset for None), or None if it failed."""
    env = dict(os.environ, OPENBLAS_VERBOSE="2", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("OPENBLAS_CORETYPE", None)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    p = subprocess.run([sys.executable, "-c", TIMER], env=env, capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        return None
    name = re.search(r"Core: (\S+)", p.stdout + p.stderr)
    rate = re.search(r"gflops=([0-9.]+)", p.stdout)
    if not rate:
        return None
    return (name.group(1) if name else "unknown"), float(rate.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", action="store_true",
                        help="print the chosen OPENBLAS_CORETYPE as a shell export last")
    args = parser.parse_args()
    flags = cpu_flags()
    inherited = os.environ.get("OPENBLAS_CORETYPE", "")
    detected = measure(None)
    if detected is None:
        print("peer_blas: torch did not run; the peers keep the BLAS settings they inherit")
        return
    rates = {detected[0]: detected[1]}
    tries = ([inherited] if inherited else []) + list(CANDIDATES)
    for core in tries:
        if core in rates or (core in CANDIDATES and not CANDIDATES[core] <= flags):
            continue
        got = measure(core)
        if got is not None:
            rates[got[0]] = got[1]
    chosen = max(rates, key=rates.get)
    listing = ", ".join("%s=%.1f" % (c, r) for c, r in sorted(rates.items(), key=lambda x: -x[1]))
    print("peer_blas: inherited=%s detected=%s chosen=%s gflops=%.1f (512^3 torch.mm, "
          "1 thread: %s)" % (inherited or "none", detected[0], chosen, rates[chosen], listing))
    if args.export:
        print("export OPENBLAS_CORETYPE=%s" % chosen)


if __name__ == "__main__":
    main()
