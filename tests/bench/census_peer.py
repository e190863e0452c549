#!/usr/bin/env python3
"""PyTorch peer of tandem's census configs (configs/census_*.toml).

TensorFlow's census example (tensorflow/models official/r1/wide_deep) in torch: the same
columns (four vocabularies, occupation hashed into 1000 buckets, age in 11 buckets, two
crosses of 1000 buckets, indicators, an 8-dimensional occupation embedding), the same
hyper-parameters (hidden units [100, 75, 50, 25], batch 40, loss summed over the batch),
nn.EmbeddingBag(sparse=True) for every categorical column, and Adagrad (initial
accumulator 0.1) at TensorFlow's learning rates, also for the linear part where
TensorFlow uses FTRL, which torch does not have.

Like tandem, it reads each CSV once (the UCI files as they are: ", " separated,
adult.test's "|1x3" line and trailing "."), keeps the rows as strings, and builds every
batch's ids (vocabulary lookups, hashing, crosses) inside the training loop: that is the
input pipeline whose share of the step it reports. Hashing is zlib.crc32 (Python has no
FarmHash): the buckets differ from TensorFlow's and tandem's, their number does not.

  census_peer.py --data data/adult --model wide_deep --steps 3000 --warmup 200
      speed: "census_peer model=... threads=1 examples_per_second=X pipeline_share=Y"
  census_peer.py --data data/adult --model wide_deep --epochs 40 --eval_every 2
      accuracy: the test set's accuracy and AUC after training
"""
import argparse
import bisect
import csv
import gzip
import math
import random
import time
import zlib

import torch
from torch import nn

COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
           "occupation", "relationship", "race", "gender", "capital_gain", "capital_loss",
           "hours_per_week", "native_country", "income_bracket"]
C = {name: i for i, name in enumerate(COLUMNS)}
VOCAB = {
    "education": ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm",
                  "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "5th-6th", "10th", "1st-4th",
                  "Preschool", "12th"],
    "marital_status": ["Married-civ-spouse", "Divorced", "Married-spouse-absent", "Never-married",
                       "Separated", "Married-AF-spouse", "Widowed"],
    "relationship": ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried",
                     "Other-relative"],
    "workclass": ["Self-emp-not-inc", "Private", "State-gov", "Federal-gov", "Local-gov", "?",
                  "Self-emp-inc", "Without-pay", "Never-worked"],
}
INDEX = {k: {v: i for i, v in enumerate(vs)} for k, vs in VOCAB.items()}
BOUNDARIES = [18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
BUCKETS = 1000


def read(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("|"):
                continue
            if line.endswith("."):
                line = line[:-1]
            rows.append(next(csv.reader([line], skipinitialspace=True)))
    return rows


def h(text):
    return zlib.crc32(text.encode()) % BUCKETS


def batch_tensors(rows):
    """One batch's model inputs from its rows of strings: the input pipeline."""
    ids = {k: [] for k in ["education", "marital_status", "relationship", "workclass",
                           "occupation", "age_buckets", "edu_x_occ", "age_x_edu_x_occ"]}
    numeric, labels = [], []
    for r in rows:
        age = float(r[C["age"]] or 0)
        for k in VOCAB:
            ids[k].append(INDEX[k].get(r[C[k]], 0))
        occ, edu = r[C["occupation"]], r[C["education"]]
        bucket = bisect.bisect_right(BOUNDARIES, age)
        ids["occupation"].append(h(occ))
        ids["age_buckets"].append(bucket)
        ids["edu_x_occ"].append(h(edu + "_X_" + occ))
        ids["age_x_edu_x_occ"].append(h("%d_X_%s_X_%s" % (bucket, edu, occ)))
        numeric.append([float(r[C[k]] or 0) for k in NUMERIC])
        labels.append(1.0 if r[C["income_bracket"]] == ">50K" else 0.0)
    out = {k: torch.tensor(v, dtype=torch.long).unsqueeze(1) for k, v in ids.items()}
    out["numeric"] = torch.tensor(numeric)
    return out, torch.tensor(labels).unsqueeze(1)


WIDE = {"education": 16, "marital_status": 7, "relationship": 6, "workclass": 9,
        "occupation": BUCKETS, "age_buckets": 11, "edu_x_occ": BUCKETS, "age_x_edu_x_occ": BUCKETS}


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleDict({k: nn.EmbeddingBag(n, 1, mode="sum", sparse=True)
                                   for k, n in WIDE.items()})
        for b in self.bags.values():
            nn.init.zeros_(b.weight)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return sum(b(x[k]) for k, b in self.bags.items()) + self.bias


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.occupation = nn.EmbeddingBag(BUCKETS, 8, mode="mean", sparse=True)
        nn.init.trunc_normal_(self.occupation.weight, std=1 / math.sqrt(8),
                              a=-2 / math.sqrt(8), b=2 / math.sqrt(8))
        layers, width = [], 5 + 9 + 16 + 7 + 6 + 8
        for units in [100, 75, 50, 25]:
            layers += [nn.Linear(width, units), nn.ReLU()]
            width = units
        layers.append(nn.Linear(width, 1))
        for m in layers:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        one_hot = [nn.functional.one_hot(x[k].squeeze(1), len(VOCAB[k])).float()
                   for k in ["workclass", "education", "marital_status", "relationship"]]
        return self.mlp(torch.cat([x["numeric"]] + one_hot + [self.occupation(x["occupation"])], 1))


class Model(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.wide = Wide() if kind in ("wide", "wide_deep") else None
        self.deep = Deep() if kind in ("deep", "wide_deep") else None

    def forward(self, x):
        parts = [p(x) for p in (self.wide, self.deep) if p is not None]
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def optimizers(model, kind):
    # TensorFlow's learning rates: wide 0.2 (FTRL), deep 0.05; wide & deep: 0.005 and 0.001.
    rates = {"wide": (0.2, None), "deep": (None, 0.05), "wide_deep": (0.005, 0.001)}[kind]
    opts = []
    for part, lr in zip((model.wide, model.deep), rates):
        if part is not None:
            opts.append(torch.optim.Adagrad(part.parameters(), lr=lr,
                                            initial_accumulator_value=0.1))
    return opts


def auc(scores, labels):
    """Area under the ROC curve (the Mann-Whitney statistic, ties counted half)."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks, i = [0.0] * len(scores), 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    pos = sum(labels)
    neg = len(labels) - pos
    return (sum(r for r, y in zip(ranks, labels) if y) - pos * (pos + 1) / 2) / (pos * neg)


def evaluate(model, rows):
    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for i in range(0, len(rows), 1000):
            x, y = batch_tensors(rows[i:i + 1000])
            scores += torch.sigmoid(model(x)).squeeze(1).tolist()
            labels += [int(v) for v in y.squeeze(1).tolist()]
    model.train()
    acc = sum((s > 0.5) == bool(y) for s, y in zip(scores, labels)) / len(labels)
    return acc, auc(scores, labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/adult")
    p.add_argument("--model", choices=["wide", "deep", "wide_deep"], default="wide_deep")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=40)
    p.add_argument("--steps", type=int, default=0, help="speed: timed steps")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--epochs", type=int, default=0, help="accuracy: epochs to train")
    p.add_argument("--eval_every", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    train = read(a.data + "/adult.data.gz")
    model = Model(a.model)
    opts = optimizers(model, a.model)
    loss_fn = nn.BCEWithLogitsLoss(reduction="sum")

    def batches():
        while True:
            order = list(range(len(train)))
            rng.shuffle(order)
            for i in range(0, len(order) - a.batch + 1, a.batch):
                yield [train[j] for j in order[i:i + a.batch]]

    stream = batches()

    def step(timing):
        t0 = time.perf_counter()
        x, y = batch_tensors(next(stream))
        t1 = time.perf_counter()
        for o in opts:
            o.zero_grad()
        loss_fn(model(x), y).backward()
        for o in opts:
            o.step()
        if timing is not None:
            timing[0] += t1 - t0
            timing[1] += time.perf_counter() - t0

    if a.steps:
        for _ in range(a.warmup):
            step(None)
        timing = [0.0, 0.0]
        for _ in range(a.steps):
            step(timing)
        print("census_peer model=%s threads=%d batch=%d examples_per_second=%.0f "
              "pipeline_share=%.3f (torch %s, EmbeddingBag sparse, Adagrad)" %
              (a.model, a.threads, a.batch, a.steps * a.batch / timing[1], timing[0] / timing[1],
               torch.__version__))
    if a.epochs:
        test = read(a.data + "/adult.test.gz")
        per_epoch = len(train) // a.batch
        for epoch in range(1, a.epochs + 1):
            for _ in range(per_epoch):
                step(None)
            if epoch % a.eval_every == 0 or epoch == a.epochs:
                acc, area = evaluate(model, test)
                print("census_peer model=%s epoch=%d accuracy=%.4f auc=%.4f" %
                      (a.model, epoch, acc, area), flush=True)


if __name__ == "__main__":
    main()
