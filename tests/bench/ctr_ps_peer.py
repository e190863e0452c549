#!/usr/bin/env python3
"""PyTorch parameter-server peer of tests/bench/ctr_bench.toml for
tests/bench/embedding_bench.sh: the model of ctr_peer.py with the table where tandem's
parameter-server strategy keeps it, on parameter-server processes, so that no worker
holds a copy of it.

Four processes under torch.distributed.rpc (TensorPipe), one thread each: two ps
processes each hold half the [buckets, 16] table (bucket b on ps b mod 2, row b div 2)
and its Adagrad accumulators; ps 0 also holds the dense layers [18 -> 64 -> 32 -> 1] and
theirs. Each of the two workers, every step, deduplicates its batch's ids, asks each ps
for its rows (ps 0 also for the dense weights) with one call per ps in flight at once,
computes the loss (the mean of each row's 8 embeddings, the two numeric features, the
same logistic loss summed over the batch) and its gradients locally, and sends each ps
its gradient rows (ps 0 also the dense gradients), again one call per ps at once, which
apply Adagrad at 0.05 (initial accumulator 0.1) to those rows only before answering:
asynchronous training, as tandem's `trainer launch --ps 2 --workers 2`. The ids come
preloaded from ctr_data.py's .npz as integers (bucket = a multiplicative hash of the id
mod `--buckets`).

  ctr_ps_peer.py --data /tmp/tandem_ctr/ctr.npz --buckets 4194304 --steps 300
      prints "ctr_ps_peer ps=2 workers=2 buckets=... examples_per_second=X"

The rate: both workers run `--warmup` steps, meet, and run `--steps` steps; examples/s
is both workers' examples over the time from the first start to the last end.
"""
import os
import sys
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402
from ddp_spawn import leave, spawn_replicas  # noqa: E402
from ctr_common import Batches, arguments, load_shard, one_thread  # noqa: E402

NUM_PS = 2
NUM_WORKERS = 2
DIM = 16
LR = 0.05
INIT_ACC = 0.1

# The state of this ps process (set by serve()).
_table = None
_table_acc = None
_dense = None
_dense_acc = None
_lock = threading.Lock()
_met = None
_windows = []


def _adagrad(var, acc, grad):
    acc.add_(grad * grad)
    var.sub_(LR * grad / acc.sqrt())


def lookup(rows, with_dense):
    """On a ps: its rows `rows` (local indices), and the dense weights if asked."""
    out = _table.index_select(0, rows)
    return out, ([p.detach().clone() for p in _dense.parameters()] if with_dense else None)


def apply(rows, grad, dense_grads):
    """On a ps: Adagrad on the rows `rows` (distinct local indices) and on the dense
    weights when their gradients come."""
    with _lock:  # The two workers' updates of one ps, one after the other.
        acc = _table_acc.index_select(0, rows)
        acc.add_(grad * grad)
        _table_acc.index_copy_(0, rows, acc)
        _table.index_copy_(0, rows, _table.index_select(0, rows) - LR * grad / acc.sqrt())
        if dense_grads is not None:
            for p, a, g in zip(_dense.parameters(), _dense_acc, dense_grads):
                _adagrad(p.data, a, g)
    return True


def meet():
    """On ps 0: returns once both workers have called it."""
    _met.wait()
    return True


def report(start, end):
    with _lock:
        _windows.append((start, end))
    return True


def dense_layers():
    return nn.Sequential(nn.Linear(DIM + 2, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                         nn.Linear(32, 1))


def serve(ps, a):
    global _table, _table_acc, _dense, _dense_acc, _met
    rows = (a.buckets - ps + NUM_PS - 1) // NUM_PS
    torch.manual_seed(1 + ps)
    _table = torch.randn(rows, DIM) * DIM ** -0.5
    _table_acc = torch.full((rows, DIM), INIT_ACC)
    _dense = dense_layers()
    _dense_acc = [torch.full_like(p, INIT_ACC) for p in _dense.parameters()]
    _met = threading.Barrier(NUM_WORKERS)


def work(w, a):
    ids, x, y = load_shard(a.data, a.buckets, w, NUM_WORKERS)
    model = dense_layers()
    loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
    batches = Batches(ids.shape[0], a.batch)

    def step():
        sl = batches.next()
        unique, inverse = torch.unique(ids[sl], return_inverse=True)
        owner = unique % NUM_PS
        masks = [owner == p for p in range(NUM_PS)]
        local = [unique[m] // NUM_PS for m in masks]
        got = [rpc.rpc_async(f"ps{p}", lookup, args=(local[p], p == 0)) for p in range(NUM_PS)]
        rows = torch.empty(unique.shape[0], DIM)
        for p in range(NUM_PS):
            part, dense = got[p].wait()
            rows[masks[p]] = part
            if dense is not None:
                with torch.no_grad():
                    for param, value in zip(model.parameters(), dense):
                        param.copy_(value)
        rows.requires_grad_()
        model.zero_grad()
        emb = F.embedding(inverse, rows).mean(1)
        loss = loss_fn(model(torch.cat([emb, x[sl]], dim=1)).squeeze(1), y[sl])
        loss.backward()
        dense_grads = [p.grad for p in model.parameters()]
        done = [rpc.rpc_async(f"ps{p}", apply,
                              args=(local[p], rows.grad[masks[p]], dense_grads if p == 0 else None))
                for p in range(NUM_PS)]
        for f in done:
            f.wait()

    for _ in range(a.warmup):
        step()
    rpc.rpc_sync("ps0", meet)
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the host.
    for _ in range(a.steps):
        step()
    rpc.rpc_sync("ps0", report, args=(start, time.monotonic()))


def process(rank, a, port):
    one_thread(rank, a.pin_cpus)
    name = f"ps{rank}" if rank < NUM_PS else f"worker{rank - NUM_PS}"
    if rank < NUM_PS:
        serve(rank, a)  # Before init_rpc: no call reaches a ps whose table is not there.
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}",
                                              num_worker_threads=a.rpc_threads,
                                              rpc_timeout=a.timeout)
    rpc.init_rpc(name, rank=rank, world_size=NUM_PS + NUM_WORKERS, rpc_backend_options=options)
    if rank >= NUM_PS:
        work(rank - NUM_PS, a)
    rpc.shutdown()  # Waits for every process's outstanding work.
    if rank == 0:
        start = min(s for s, _ in _windows)
        end = max(e for _, e in _windows)
        eps = NUM_WORKERS * a.steps * a.batch / (end - start)
        print(f"ctr_ps_peer ps={NUM_PS} workers={NUM_WORKERS} buckets={a.buckets} "
              f"examples_per_second={eps:.0f}", flush=True)
    leave()


def main():
    p = arguments(__doc__, "worker")
    p.add_argument("--rpc_threads", type=int, default=4,
                   help="TensorPipe's request threads per process")
    a = p.parse_args()
    if a.rpc_threads < 2:
        p.error("--rpc_threads must be at least 2 (ps 0 holds one while the workers meet)")
    spawn_replicas(process, (a, free_port()), NUM_PS + NUM_WORKERS, a.timeout, "ctr_ps_peer")


if __name__ == "__main__":
    main()
