#!/usr/bin/python3
"""How far PyTorch's own autocast bf16 training drifts from its float32 training.

The fashion_cnn model of torch_peer.py, Adam 1e-3, the first 20 batches of 100
Fashion-MNIST training images in order, the same initialisation and dropout masks
(seeded) in both runs. Prints, per seed, the worst relative difference of the
per-step training loss. tests/integration/precision_trainer_test.cc bounds tandem's
free-running drift by this peer's spread.
Needs Debian's python3-torch (run with /usr/bin/python3).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import Cnn, load_idx  # noqa: E402


def losses(x, y, bf16, seed, steps):
    torch.manual_seed(seed)
    model = Cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    out = []
    for i in range(steps):
        xb, yb = x[i * 100:(i + 1) * 100], y[i * 100:(i + 1) * 100]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    n = a.steps * 100
    images = load_idx(f"{a.data_dir}/train-images-idx3-ubyte.gz")[:n]
    labels = load_idx(f"{a.data_dir}/train-labels-idx1-ubyte.gz")[:n]
    x = torch.from_numpy(images.reshape(-1, 784).astype("float32") / 255.0)
    y = torch.from_numpy(labels.astype("int64"))
    for seed in range(1, a.seeds + 1):
        f32, bf16 = losses(x, y, False, seed, a.steps), losses(x, y, True, seed, a.steps)
        d = [abs(q - p) / p for p, q in zip(f32, bf16)]
        print(f"seed {seed}: worst {max(d):.4f} at step {d.index(max(d))}", flush=True)


if __name__ == "__main__":
    main()
