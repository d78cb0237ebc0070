"""A module that runs an intra-op parallel region when imported: the OpenMP pool it starts
is not fork-safe, so a --warm-start template that preloads it must exec its ranks
(test_warm_start.py)."""
import torch

torch.set_num_threads(2)
torch.randn(512, 512) @ torch.randn(512, 512)
