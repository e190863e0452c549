#!/usr/bin/env python3
"""PyTorch peer of tests/bench/ctr_bench.toml for tests/bench/embedding_bench.sh.

The same model: nn.EmbeddingBag(buckets, 16, mode="mean", sparse=True) over each row's
item ids, concatenated with the two numeric features, hidden layers [64, 32] with relu,
a logit, the logistic loss summed over the batch, and Adagrad at 0.05 (initial
accumulator 0.1, TensorFlow's), which updates the table sparsely. `--procs` processes
under DistributedDataParallel over gloo (which all-reduces the table's sparse gradient
as indices and values), one thread each, every process holding the whole table. The ids
come preloaded from ctr_data.py's .npz as integers (bucket = a multiplicative hash of
the id mod `--buckets`): the peer does no parsing or string hashing, which tandem does
inside its step.

  ctr_peer.py --data /tmp/tandem_ctr/ctr.npz --buckets 4194304 --steps 300
      prints "ctr_peer procs=2 buckets=... examples_per_second=X"
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402
from ddp_spawn import group_rate, leave, spawn_replicas  # noqa: E402
from ctr_common import Batches, arguments, load_shard, one_thread  # noqa: E402


class Ctr(nn.Module):
    def __init__(self, buckets, dim=16):
        super().__init__()
        self.items = nn.EmbeddingBag(buckets, dim, mode="mean", sparse=True)
        nn.init.normal_(self.items.weight, std=dim ** -0.5)
        self.dnn = nn.Sequential(nn.Linear(dim + 2, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                                 nn.Linear(32, 1))

    def forward(self, ids, x):
        return self.dnn(torch.cat([self.items(ids), x], dim=1)).squeeze(1)


def replica(rank, a, port):
    one_thread(rank, a.pin_cpus)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.procs, timeout=datetime.timedelta(seconds=a.timeout))
    try:
        torch.manual_seed(1)
        ids, x, y = load_shard(a.data, a.buckets, rank, a.procs)
        model = nn.parallel.DistributedDataParallel(Ctr(a.buckets))
        opt = torch.optim.Adagrad(model.parameters(), lr=0.05, initial_accumulator_value=0.1)
        loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
        batches = Batches(ids.shape[0], a.batch)

        def step():
            sl = batches.next()
            opt.zero_grad()
            loss = loss_fn(model(ids[sl], x[sl]), y[sl])
            loss.backward()  # DDP all-reduces the gradients here (the table's as sparse).
            opt.step()

        eps = group_rate(step, a.warmup, a.steps, a.procs * a.batch)
        if rank == 0:
            print(f"ctr_peer procs={a.procs} buckets={a.buckets} examples_per_second={eps:.0f}",
                  flush=True)
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    leave()


def main():
    p = arguments(__doc__, "process")
    p.add_argument("--procs", type=int, default=2)
    a = p.parse_args()
    spawn_replicas(replica, (a, free_port()), a.procs, a.timeout, "ctr_peer")


if __name__ == "__main__":
    main()
