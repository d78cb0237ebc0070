"""A rank that starts processes of its own (tests/integration/test_warm_start.py): DataLoader
workers with the fork and the spawn start method, a multiprocessing pool, a subprocess."""
import multiprocessing
import subprocess
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def square(x):
    return x * x


if __name__ == "__main__":
    data = TensorDataset(torch.arange(8, dtype=torch.float32))
    for method in ("fork", "spawn"):
        loader = DataLoader(data, batch_size=2, num_workers=2, multiprocessing_context=method)
        total = sum(float(batch[0].sum()) for batch in loader)
        print(f"dataloader {method}: {total:g}")
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(f"pool: {sum(pool.map(square, range(4)))}")
    out = subprocess.run([sys.executable, "-c", "print('child python')"], capture_output=True,
                         text=True, check=True).stdout.strip()
    print(f"subprocess: {out}")
