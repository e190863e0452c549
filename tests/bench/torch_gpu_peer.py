#!/usr/bin/env python3
"""PyTorch peer of train_bench on a GPU: the same MLP (784-256-128-10) and CNN (conv
5x5x32, pool, conv 5x5x64, pool, dense 1024, dropout 0.4, dense 10) trained with Adam on
random data, one loss.item() per step as tandem fetches its loss; and torch.mm's rate
(cuBLAS, full float32: TF32 off, as tandem's MatMul) on square float32 matrices.

  python3 tests/bench/torch_gpu_peer.py --model mlp --batch 512 --steps 300
"""
import argparse
import time

import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 100), nn.ReLU(), nn.Linear(100, 10))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 5, padding=2)
        self.c2 = nn.Conv2d(32, 64, 5, padding=2)
        self.d1 = nn.Linear(3136, 1024)
        self.d2 = nn.Linear(1024, 10)
        self.drop = nn.Dropout(0.4)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        x = self.drop(torch.relu(self.d1(x.flatten(1))))
        return self.d2(x)


def train(model_name, batch, steps, warmup):
    dev = torch.device("cuda")
    model = (mlp() if model_name == "mlp" else Cnn()).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(batch, 784, device=dev)
    y = torch.arange(batch, device=dev) % 10
    loss_fn = nn.CrossEntropyLoss()
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    secs = time.perf_counter() - t0
    print(f"torch {model_name} gpu batch={batch} examples_per_second={batch * steps / secs:.0f}")


def matmul(n, steps):
    a = torch.rand(n, n, device="cuda")
    b = torch.rand(n, n, device="cuda")
    for _ in range(5):
        torch.mm(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        torch.mm(a, b)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    print(f"torch gpu_matmul n={n} tflops={2.0 * n**3 * steps / secs / 1e12:.1f} "
          f"ms_per_step={secs * 1e3 / steps:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["mlp", "cnn", "gpu_matmul"], default="mlp")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--n", type=int, default=4096)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.model == "gpu_matmul":
        matmul(a.n, a.steps)
    else:
        train(a.model, a.batch, a.steps, a.warmup)


if __name__ == "__main__":
    main()
