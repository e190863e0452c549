#!/usr/bin/env python3
"""Synthetic click-through data for tests/bench/embedding_bench.sh.

Each row: a label, two numeric features and a list of `--ids` item ids ("i<k>", joined
by "|"), drawn from a Zipf (power-law) distribution over `--vocab` possible items, as
real CTR logs are skewed: a few items appear in most rows, most items rarely. The label
is 1 with probability sigmoid(sum of the items' hidden weights + 0.5 * x1), so the model
has something to learn. Writes `<out>.csv` (for tandem) and `<out>.npz` (ids as
integers, labels, numerics: for the PyTorch peer, which thus skips parsing and
hashing), and prints the mean number of distinct ids per batch of `--batch` rows, the
figure the benchmark's bytes floor is computed from.

  ctr_data.py --out /tmp/ctr --rows 200000 --ids 8 --vocab 50000000 --batch 256
"""
import argparse
import math

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--rows", type=int, default=200000)
    p.add_argument("--ids", type=int, default=8, help="ids per row")
    p.add_argument("--vocab", type=int, default=50_000_000, help="possible item ids")
    p.add_argument("--zipf", type=float, default=1.2, help="Zipf exponent (> 1)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    ids = rng.zipf(a.zipf, size=(a.rows, a.ids)).astype(np.int64)
    ids = (ids - 1) % a.vocab
    # Hidden weight of an item: a fixed function of its id in [-1, 1].
    hidden = ((ids * 2654435761) % 1000003) / 500001.5 - 1.0
    x = rng.normal(size=(a.rows, 2)).astype(np.float32)
    logit = hidden.sum(axis=1) * 0.5 + 0.5 * x[:, 0]
    labels = (rng.random(a.rows) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    with open(a.out + ".csv", "w") as f:
        f.write("label,x1,x2,items\n")
        for r in range(a.rows):
            items = "|".join(f"i{k}" for k in ids[r])
            f.write(f"{labels[r]},{x[r, 0]:.5f},{x[r, 1]:.5f},{items}\n")
    np.savez(a.out + ".npz", ids=ids, labels=labels, x=x)
    unique = [len(np.unique(ids[b:b + a.batch])) for b in range(0, a.rows - a.batch + 1, a.batch)]
    print(f"ctr_data rows={a.rows} ids_per_row={a.ids} vocab={a.vocab} zipf={a.zipf} "
          f"positive={labels.mean():.3f} batch={a.batch} "
          f"unique_ids_per_batch={sum(unique) / len(unique):.1f}")


if __name__ == "__main__":
    main()
