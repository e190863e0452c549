"""What the two PyTorch peers of tests/bench/embedding_bench.sh (ctr_peer.py,
ctr_ps_peer.py) share.

one_thread(rank, pin_cpus): one intra-op and one inter-op thread, and with `pin_cpus`
the process on CPU rank mod the CPU count (as `trainer launch --pin_cpus`).
load_shard(path, buckets, index, count): ctr_data.py's .npz, the ids hashed into
`buckets` (a multiplicative hash mod `buckets`), shard `index` of `count` (every
count-th row): (ids [rows, 8] int64, x [rows, 2] float32, labels [rows] float32).
Batches(rows, batch): the slice of each next batch, round and round.
arguments(doc, unit): the options both peers take (`unit`: what --batch and --steps
count per, "process" or "worker").
"""
import argparse
import os

import numpy as np
import torch


def one_thread(rank, pin_cpus):
    if pin_cpus:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


def load_shard(path, buckets, index, count):
    data = np.load(path)
    raw = data["ids"].astype(np.uint64)
    hashed = ((raw * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) % np.uint64(buckets)
    ids = torch.from_numpy(hashed.astype(np.int64))[index::count]
    x = torch.from_numpy(data["x"])[index::count]
    y = torch.from_numpy(data["labels"].astype(np.float32))[index::count]
    return ids, x, y


class Batches:
    def __init__(self, rows, batch):
        self.n = rows // batch
        self.batch = batch
        self.at = 0

    def next(self):
        b = self.at % self.n
        self.at += 1
        return slice(b * self.batch, (b + 1) * self.batch)


def arguments(doc, unit):
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="ctr_data.py's .npz")
    p.add_argument("--buckets", type=int, default=4194304)
    p.add_argument("--batch", type=int, default=256, help=f"per-{unit} batch size")
    p.add_argument("--steps", type=int, default=300, help=f"timed steps per {unit}")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--pin_cpus", action="store_true",
                   help="pin process i to CPU i mod the CPU count")
    return p
