#!/usr/bin/env python3
"""Predicted training throughput of tandem's cluster strategies, 2-256 workers.

A first-order model (no overlap of communication with the backward pass, which makes
it a floor for the collective strategy), calibrated by measurements of this machine:

  step_local      seconds of one replica's step (local `trainer train`, 1 thread);
  grad_bytes      the model's gradient (= weight) bytes;
  latency         seconds per message (a small all-reduce's time / its exchanges);
  bandwidth       the link's bytes/s (10, 25, 100 Gbit/s; or the measured loopback).

Collective (ring reduce-scatter + all-gather; every worker sends and receives
2 (N-1)/N of the gradient over 2 (N-1) messages):
  t_step = step_local + 2 (N-1) latency + 2 (N-1)/N grad_bytes / bandwidth
  examples/s = N batch / t_step
Parameter servers (asynchronous; each worker pulls the weights and pushes its
gradients, grad_bytes each way, and the P ps share the variables, so each ps moves
2 N grad_bytes / P per round of steps):
  worker-bound = N batch / (step_local + 2 latency + 2 grad_bytes / bandwidth)
  ps-bound     = P bandwidth batch / (2 grad_bytes)         (each ps link saturated)
  examples/s   = min(worker-bound, ps-bound)

--check compares the model, with the loopback figures, against the 2- and 3-process
rates measured by cluster_bench.sh (pass them with --measured N=examples_per_second).

--tables: a model with a sparsely touched table beside its dense layers (hybrid_bench.sh's
CTR model by default), per worker step `rows` distinct rows of `dim` floats looked up
and updated, `dense` bytes of dense gradients; the three strategies, all bandwidths
per worker link:
  Parameter servers: each worker step pulls the dense weights and its rows and pushes
    both gradients (2 dense + 2 rows bytes, two round trips); P ps share the traffic:
    examples/s = min(N batch / (step + 4 latency + bytes / bw), P bw batch / bytes).
  Collective (every worker holds the whole table): rows are all-gathered (each worker
    sends its rows to every other: (N-1) rows bytes), the dense gradients all-reduced
    (recursive doubling up to 2 MiB: log2 N exchanges of the whole buffer, else the
    ring); lookups are local. Only where the table and its slots fit in one worker.
  Hybrid: the rows as with parameter servers (2 rows bytes, two round trips, the ps
    links shared by N / P workers), the dense gradients as with collective.
Prints Markdown tables (docs/benchmarks/2026-11-amd-epyc-2vcpu.md, "Scaling model").
"""
import math
import argparse


def collective(n, step, grad, lat, bw, batch):
    if n == 1:
        return batch / step
    t = step + 2 * (n - 1) * lat + 2 * (n - 1) / n * grad / bw
    return n * batch / t


def parameter_server(n, p, step, grad, lat, bw, batch):
    worker = n * batch / (step + 2 * lat + 2 * grad / bw)
    ps = p * bw * batch / (2 * grad)
    return min(worker, ps)


def dense_allreduce(n, dense, lat, bw):
    """Seconds of tandem's all-reduce of `dense` bytes over n workers."""
    if n == 1:
        return 0.0
    if dense <= 2 * (1 << 20):
        return math.ceil(math.log2(n)) * (lat + dense / bw)
    return 2 * (n - 1) * lat + 2 * (n - 1) / n * dense / bw


def table_strategies(n, p, step, rows, dense, lat, bw, batch):
    """examples/s of parameter servers, collective and hybrid for the --tables model."""
    ps_bytes = 2 * dense + 2 * rows
    ps = min(n * batch / (step + 4 * lat + ps_bytes / bw), p * bw * batch / ps_bytes)
    gather = (n - 1) * (lat + rows / bw) if n > 1 else 0.0
    collective = n * batch / (step + gather + dense_allreduce(n, dense, lat, bw))
    hybrid_worker = n * batch / (step + 4 * lat + 2 * rows / bw +
                                 dense_allreduce(n, dense, lat, bw))
    hybrid = min(hybrid_worker, p * bw * batch / (2 * rows))
    return ps, collective, hybrid


def tables_main(args):
    rows = args.rows * (args.dim * 4 + 8)  # Values and int64 indices, one direction.
    dense = args.dense_floats * 4
    lat = args.latency_us * 1e-6
    print(f"### {args.model}: {args.rows:.0f} rows x {args.dim} floats and {args.dense_floats:,} "
          f"dense weights per worker step, {args.step_local * 1e3:.2f} ms local step, batch "
          f"{args.batch} per worker, {args.ps} ps, {args.latency_us:.0f} us per message\n")
    print("bytes per worker step (sent by it and for it): parameter servers "
          f"{2 * dense + 2 * rows:,.0f}; hybrid {2 * rows:,.0f} and the all-reduce of "
          f"{dense:,.0f}; collective (N - 1) x {rows:,.0f} and the same all-reduce\n")
    print("examples/s: parameter servers / collective / hybrid (the fastest in bold)\n")
    links = [10, 25, 100]
    print("| workers | " + " | ".join(f"{g} Gbit/s" for g in links) + " |")
    print("|" + "---|" * (1 + len(links)))
    for n in [2, 8, 16, 32, 64, 128, 256]:
        cells = []
        for g in links:
            got = table_strategies(n, args.ps, args.step_local, rows, dense, lat, g * 1e9 / 8,
                                   args.batch)
            best = max(range(3), key=lambda i: got[i])
            cells.append(" / ".join(f"**{x:,.0f}**" if i == best else f"{x:,.0f}"
                                    for i, x in enumerate(got)))
        print(f"| {n} | " + " | ".join(cells) + " |")


def main():
    a = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--model", default="fashion_cnn")
    a.add_argument("--step_local", type=float, required=True,
                   help="seconds per local 1-thread step (from cluster_bench.sh's local row)")
    a.add_argument("--batch", type=int, required=True, help="per-replica batch")
    a.add_argument("--grad_mib", type=float, default=0.0, help="gradient MiB")
    a.add_argument("--latency_us", type=float, default=100.0,
                   help="per message (collective_bench: a 32 KiB all-reduce / its 2 messages)")
    a.add_argument("--loopback_gbps", type=float, default=None,
                   help="measured loopback bytes/s in Gbit/s (collective_bench's floor)")
    a.add_argument("--measured", action="append", default=[],
                   help="N=examples_per_second of the collective strategy, for --check")
    a.add_argument("--tables", action="store_true",
                   help="the table model's three strategies (--rows, --dim, --dense_floats, --ps)")
    a.add_argument("--rows", type=float, default=761.9, help="distinct rows per worker step")
    a.add_argument("--dim", type=int, default=16)
    a.add_argument("--dense_floats", type=int, default=3329)
    a.add_argument("--ps", type=int, default=2)
    args = a.parse_args()
    if args.tables:
        tables_main(args)
        return
    grad = args.grad_mib * (1 << 20)
    lat = args.latency_us * 1e-6
    links = [(f"{g} Gbit/s", g * 1e9 / 8) for g in (10, 25, 100)]
    workers = [2, 4, 8, 16, 32, 64, 128, 256]
    print(f"### {args.model}: {args.grad_mib:.1f} MiB of gradients, {args.step_local * 1e3:.1f} ms "
          f"local step, batch {args.batch} per worker, {args.latency_us:.0f} us per message\n")
    print("examples/s (speed-up over one worker in brackets)\n")
    header = "| workers | " + " | ".join(
        [f"ring, {name}" for name, _ in links] +
        [f"{p} ps, {links[0][0]}" for p in (1, 2, 4, 8)]) + " |"
    print(header)
    print("|" + "---|" * (1 + len(links) + 4))
    one = args.batch / args.step_local
    for n in workers:
        cells = []
        for _, bw in links:
            x = collective(n, args.step_local, grad, lat, bw, args.batch)
            cells.append(f"{x:,.0f} ({x / one:.1f}x)")
        for p in (1, 2, 4, 8):
            x = parameter_server(n, p, args.step_local, grad, lat, links[0][1], args.batch)
            cells.append(f"{x:,.0f} ({x / one:.1f}x)")
        print(f"| {n} | " + " | ".join(cells) + " |")
    if args.loopback_gbps and args.measured:
        bw = args.loopback_gbps * 1e9 / 8
        print(f"\nCheck on this machine's loopback ({args.loopback_gbps:.1f} Gbit/s):\n")
        print("| processes | predicted | measured | measured / predicted |")
        print("|---|---|---|---|")
        for m in args.measured:
            n, eps = m.split("=")
            n, eps = int(n), float(eps)
            pred = collective(n, args.step_local, grad, lat, bw, args.batch)
            print(f"| {n} | {pred:,.0f} | {eps:,.0f} | {eps / pred:.2f} |")


if __name__ == "__main__":
    main()
