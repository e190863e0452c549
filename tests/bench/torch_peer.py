#!/usr/bin/python3
"""PyTorch peer for tandem's benchmarks: the same models, optimizer and batch sizes.

Prints one line per configuration: "peer <model> threads=<t> examples_per_second=<x>".
--precision mixed_bfloat16 runs the forward pass and the loss under
torch.autocast("cpu", torch.bfloat16), PyTorch's CPU mixed precision: weights and the
optimizer stay float32, linear and convolution layers run in bfloat16.
Needs Debian's python3-torch and libopenblas0-pthread (run with /usr/bin/python3).
"""
import argparse
import contextlib
import time

import torch
import torch.nn as nn


def fashion_mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 100), nn.ReLU(), nn.Linear(100, 10))


def load_idx(path):
    """An IDX(.gz) file as a uint8 numpy array (big-endian header, as in the spec)."""
    import gzip
    import numpy as np
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def autocast(precision):
    """The context the forward pass runs in: bf16 autocast, or nothing for float32."""
    if precision == "mixed_bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def bench_e2e(net, threads, batch, steps, warmup, data_dir, precision):
    """fashion_mlp or fashion_cnn end to end: IDX files -> shuffled DataLoader -> Adam steps."""
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    images = load_idx(f"{data_dir}/train-images-idx3-ubyte.gz")
    labels = load_idx(f"{data_dir}/train-labels-idx1-ubyte.gz")
    x = torch.from_numpy(images.reshape(-1, 784).astype("float32") / 255.0)
    y = torch.from_numpy(labels.astype("int64"))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=batch, shuffle=True, drop_last=True)
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    i = 0
    while True:
        for xb, yb in loader:
            if i == warmup:
                start = time.perf_counter()
            if i == warmup + steps:
                return batch * steps / (time.perf_counter() - start)
            opt.zero_grad()
            with autocast(precision):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            i += 1


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 5, padding=2)
        self.c2 = nn.Conv2d(32, 64, 5, padding=2)
        self.d1 = nn.Linear(7 * 7 * 64, 1024)
        self.d2 = nn.Linear(1024, 10)
        self.drop = nn.Dropout(0.4)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        x = self.drop(torch.relu(self.d1(x.flatten(1))))
        return self.d2(x)


def bench(model_name, threads, batch, steps, warmup, precision):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = fashion_mlp() if model_name == "mlp" else Cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(batch, 784)
    y = torch.randint(0, 10, (batch,))
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        opt.zero_grad()
        with autocast(precision):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return batch * steps / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["mlp", "cnn", "fashion_mlp_e2e", "fashion_cnn_e2e"],
                   required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--precision", choices=["float32", "mixed_bfloat16"], default="float32")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    if a.model.endswith("_e2e"):
        net = fashion_mlp if a.model == "fashion_mlp_e2e" else Cnn
        eps = bench_e2e(net, a.threads, a.batch, a.steps, a.warmup, a.data_dir, a.precision)
    else:
        eps = bench(a.model, a.threads, a.batch, a.steps, a.warmup, a.precision)
    print(f"peer {a.model} threads={a.threads} examples_per_second={eps:.0f}", flush=True)


if __name__ == "__main__":
    main()
