"""DeepSpeed under `muster run --warm-start` (test_warm_start.py): init_distributed (gloo,
from muster's environment), deepspeed.initialize of a small model with a plain SGD
optimizer, and one training step. Prints, per rank, its DeepSpeed rank and world, the loss,
and a checksum of the weights after the step (the same on every rank: the gradients were
averaged across them)."""
import os

import deepspeed
import deepspeed.comm as dist
import torch

deepspeed.init_distributed(dist_backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
engine, _, _, _ = deepspeed.initialize(
    model=model, optimizer=optimizer,
    config={"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
            "train_batch_size": 4 * world})
torch.manual_seed(100 + rank)  # each rank its own batch
x, y = torch.randn(4, 8), torch.randn(4, 1)
loss = torch.nn.functional.mse_loss(engine(x), y)
engine.backward(loss)
engine.step()
checksum = sum(p.detach().double().sum().item() for p in engine.module.parameters())
print(f"deepspeed rank {rank}/{world} local {os.environ['LOCAL_RANK']} "
      f"step {engine.global_steps} loss {loss.item():.4f} weights {checksum:.6f}")
dist.barrier()
dist.destroy_process_group()
