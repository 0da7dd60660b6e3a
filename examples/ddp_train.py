#!/usr/bin/env python3
"""Data-parallel training of a small CNN with torch's DistributedDataParallel
over the gloo backend, every convolution's backward computed by convbwd
(forward by torch). torch.distributed does all the communication.

Two processes on this machine:
    torchrun --redirects 1 --tee 1 --nproc_per_node=2 examples/ddp_train.py
Several machines, one process each (run on every machine, node_rank 0..N-1;
HOST0 is the first machine's address, reachable from the others):
    torchrun --redirects 1 --tee 1 --nnodes=2 --nproc_per_node=1 --node_rank=0 \\
        --master_addr=HOST0 --master_port=29500 examples/ddp_train.py
(--redirects 1 --tee 1 only because Debian's torch 1.13 on Python 3.11 fails
to parse their default.)
Without torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
it trains in one process on the whole batch: the run the data-parallel one
must reproduce.

Each step draws a global batch from a seeded generator; rank r trains on its
r-th slice, and DDP averages the gradients, so every step is the whole
batch's step whatever the number of processes.
"""

import argparse
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import convbwd
import convbwd.torch

CLASSES = 4


def make_model(seed, cube_math_type=0):
    """Plain torch layers, swapped to convbwd's backward in place."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),  # depthwise
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, CLASSES))
    return convbwd.torch.swap(model, cube_math_type)


def global_batch(step, size, seed):
    """Images whose class is the brightest of four colour patterns: a task a
    few SGD steps visibly learn."""
    g = torch.Generator().manual_seed(seed * 1000003 + step)
    labels = torch.randint(0, CLASSES, (size,), generator=g)
    patterns = torch.randn(CLASSES, 3, 1, 1, generator=torch.Generator().manual_seed(seed))
    images = 0.5 * torch.randn(size, 3, 16, 16, generator=g) + patterns[labels]
    return images, labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="global batch size (divisible by the process count)")
    ap.add_argument("--lr", type=float, default=0.03, help="Adam's learning rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch and convbwd threads per process")
    ap.add_argument("--cube-math-type", type=int, default=0, help="CANN cubeMathType for every convolution")
    ap.add_argument("--out", help="rank 0 writes the final weights (torch.save) and the losses (.json) here")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    convbwd.set_num_threads(args.threads)
    distributed = "WORLD_SIZE" in os.environ
    rank, world = 0, 1
    if distributed:
        # A peer that never comes makes this fail after the timeout, not hang.
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} is not divisible by the {world} processes")

    model = make_model(args.seed, args.cube_math_type)
    trained = nn.parallel.DistributedDataParallel(model) if distributed else model
    opt = torch.optim.Adam(trained.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    local = args.batch // world
    losses = []
    for step in range(args.steps):
        images, labels = global_batch(step, args.batch, args.seed)
        images, labels = images[rank * local:(rank + 1) * local], labels[rank * local:(rank + 1) * local]
        opt.zero_grad()
        loss = loss_fn(trained(images), labels)
        loss.backward()  # DDP averages the gradients across processes here
        opt.step()
        # The whole batch's loss, for the log: the mean of the slices' means.
        whole = loss.detach().clone()
        if distributed:
            dist.all_reduce(whole)
            whole /= world
        losses.append(whole.item())
        if rank == 0:
            print(f"step {step:3d}  loss {losses[-1]:.4f}", flush=True)

    if rank == 0 and args.out:
        torch.save(model.state_dict(), args.out)
        with open(args.out + ".json", "w") as f:
            json.dump({"losses": losses, "processes": world}, f)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
