#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer of tandem's cluster benchmark (cluster_bench.sh).

Trains what configs/fashion_mlp.toml trains (784-256-128-100-10 MLP, ReLU, softmax
cross-entropy, Adam lr 0.001, batch 128 per replica), or with --model fashion_cnn what
configs/fashion_cnn.toml trains (torch_peer.Cnn), on Fashion-MNIST with --procs
processes on this machine (gloo on 127.0.0.1), each reading its own shuffled shard.
--precision mixed_bfloat16 runs the forward pass and the loss under CPU autocast
(bfloat16), as torch_peer does.
Prints one line from rank 0: "ddp procs=<p> examples_per_second=<x>", x being the
aggregate rate: procs * batch * steps / the longest timed span over the ranks.
Needs Debian's python3-torch and libopenblas0-pthread (run with /usr/bin/python3).
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import Cnn, autocast, fashion_mlp, load_idx  # noqa: E402  (the same models)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402
from ddp_spawn import group_rate, leave, spawn_replicas  # noqa: E402


def idx_path(data_dir, name):
    """<name>.gz if the directory has it, else the uncompressed <name> (as tandem does)."""
    gz = os.path.join(data_dir, name + ".gz")
    return gz if os.path.exists(gz) else os.path.join(data_dir, name)


def replica(rank, a, port):
    """One DDP process: trains a.warmup + a.steps steps, rank 0 prints the aggregate rate."""
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # Already set (forked interpreter): harmless.
        pass
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.procs,
                            timeout=datetime.timedelta(seconds=a.timeout))
    try:
        torch.manual_seed(1)  # Same initial weights on every rank (DDP broadcasts rank 0's).
        images = load_idx(idx_path(a.data_dir, "train-images-idx3-ubyte"))
        labels = load_idx(idx_path(a.data_dir, "train-labels-idx1-ubyte"))
        x = torch.from_numpy(images.reshape(-1, 784).astype("float32") / 255.0)
        y = torch.from_numpy(labels.astype("int64"))
        data = torch.utils.data.TensorDataset(x, y)
        sampler = torch.utils.data.distributed.DistributedSampler(
            data, num_replicas=a.procs, rank=rank, shuffle=True, seed=1, drop_last=True)
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch, sampler=sampler,
                                             drop_last=True)
        model = nn.parallel.DistributedDataParallel(
            Cnn() if a.model == "fashion_cnn" else fashion_mlp())
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()

        def batches():
            epoch = 0
            while True:
                sampler.set_epoch(epoch)
                yield from loader
                epoch += 1

        it = batches()

        def step():
            xb, yb = next(it)
            opt.zero_grad()
            with autocast(a.precision):
                loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP all-reduces the gradients here.
            opt.step()

        eps = group_rate(step, a.warmup, a.steps, a.procs * a.batch)
        if rank == 0:
            print(f"ddp procs={a.procs} examples_per_second={eps:.0f}", flush=True)
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    leave()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--model", choices=["fashion_mlp", "fashion_cnn"], default="fashion_mlp")
    p.add_argument("--precision", choices=["float32", "mixed_bfloat16"], default="float32")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--batch", type=int, default=128, help="per-replica batch size")
    p.add_argument("--steps", type=int, default=500, help="timed steps per process")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--data_dir",
                   default=os.environ.get("TANDEM_DATA_DIR") or "/usr/share/datasets/fashion-mnist")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds: the process group's timeout and the whole run's deadline")
    a = p.parse_args()
    port = free_port()
    spawn_replicas(replica, (a, port), a.procs, a.timeout, "ddp_peer")


if __name__ == "__main__":
    main()
