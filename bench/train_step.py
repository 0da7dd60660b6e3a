#!/usr/bin/env python3
"""One training step (forward, backward, SGD update) of small ResNet-style
blocks on CPU: plain torch against the same model through convbwd.torch
(convolution backward by convbwd, the rest torch's), same threads,
alternating runs; prints the median ms of each and torch/convbwd.

Blocks: basic (two 3x3 convolutions and a skip), depthwise (1x1 expand,
3x3 depthwise, 1x1 project and a skip), transposed (a 2x-upsampling 4x4
ConvTranspose2d decoder step and a 3x3 convolution). With --dtype f16 torch
has no CPU backward to compare with, and only convbwd's time is printed.

    PYTHONPATH=build/python /usr/bin/python3 bench/train_step.py [--threads 2] [--steps 10]
"""

import argparse
import copy
import statistics
import time

import torch
import torch.nn as nn

import convbwd
import convbwd.torch


class Basic(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(x + self.body(x))


class Depthwise(nn.Module):
    def __init__(self, c, expand=4):
        super().__init__()
        e = c * expand
        self.body = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.ReLU6(),
                                  nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), nn.BatchNorm2d(e), nn.ReLU6(),
                                  nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


class Transposed(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.ConvTranspose2d(c, c // 2, 4, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(c // 2, c // 2, 3, padding=1))

    def forward(self, x):
        return self.body(x)


BLOCKS = {"basic": (Basic, 64, 28), "depthwise": (Depthwise, 32, 28), "transposed": (Transposed, 64, 14)}


def step_time(model, x):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--steps", type=int, default=10, help="timed steps per side")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--blocks", default=",".join(BLOCKS))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    convbwd.set_num_threads(args.threads)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    print(f"threads {args.threads}, batch {args.batch}, {args.dtype}, {args.steps} steps, ISA {convbwd.isa()}")
    print(f"{'block':12s} {'torch ms':>9s} {'convbwd ms':>11s} {'torch/convbwd':>14s}")
    for name in args.blocks.split(","):
        cls, c, hw = BLOCKS[name]
        torch.manual_seed(0)
        plain = cls(c)
        ours = convbwd.torch.swap(copy.deepcopy(plain))
        # Half precision as mixed-precision training does it: convolutions
        # in the dtype, their outputs (into BatchNorm, ReLU, the skip) float32.
        if dtype != torch.float32:
            for m in (plain, ours):
                for mod in m.modules():
                    if isinstance(mod, (nn.Conv2d, nn.ConvTranspose2d)):
                        mod.to(dtype)
                        mod.register_forward_pre_hook(lambda mod, inp: (inp[0].to(dtype),))
                        mod.register_forward_hook(lambda mod, inp, out: out.float())
        x = torch.randn(args.batch, c, hw, hw)
        sides = {"convbwd": step_time(ours, x)}
        if dtype != torch.float16:
            sides["torch"] = step_time(plain, x)
        times = {k: [] for k in sides}
        for k, fn in sides.items():
            try:
                fn()  # warm up: plans, allocations
            except RuntimeError as e:  # torch lacks a kernel (e.g. bf16 transposed)
                print(f"{name:12s} {k}: {str(e).splitlines()[0][:60]}")
                times.pop(k)
        if "convbwd" not in times:
            continue
        for _ in range(args.steps):
            for k in times:
                t0 = time.perf_counter()
                sides[k]()
                times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        t = f"{med['torch']:9.2f}" if "torch" in med else f"{'n/a':>9s}"
        ratio = f"{med['torch'] / med['convbwd']:14.2f}" if "torch" in med else f"{'':>14s}"
        print(f"{name:12s} {t} {med['convbwd']:11.2f} {ratio}")


if __name__ == "__main__":
    main()
