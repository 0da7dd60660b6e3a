#!/usr/bin/env python3
"""Per-call overhead of convbwd's Python binding over the C++ call.

On one small problem, microseconds per call of:
  C++       Plan::execute in a C++ loop (no Python at all)
  execute   the extension's Plan.execute from Python (pybind11 dispatch, GIL release)
  out=      convbwd.convolution_backward into preallocated outputs
  full      convbwd.convolution_backward allocating its outputs (the usual call)
and each one's overhead over C++. The plan is cached after the first call.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--repeats 2000] [--numpy]
"""

import argparse
import time

import torch

import convbwd


def per_call(fn, repeats):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--numpy", action="store_true", help="NumPy arrays instead of torch tensors")
    args = ap.parse_args()
    convbwd.set_num_threads(1)
    # mb1ic4ih8oc4kh3ph1: small enough that the binding's cost shows.
    go, x, w = torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8), torch.randn(4, 4, 3, 3)
    if args.numpy:
        go, x, w = go.numpy(), x.numpy(), w.numpy()
    call = ([4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
    outs = convbwd.convolution_backward(go, x, w, *call)
    plan, _, gv, xv, wv, _, _ = convbwd._prepare(go, x, w, *call, 0, None)
    ptr = [o.data_ptr() if isinstance(o, torch.Tensor) else o.__array_interface__["data"][0] for o in outs]
    operands = (gv[0], xv[0], wv[0], ptr[0], ptr[1], ptr[2])

    n = args.repeats
    rows = [
        ("C++", plan._time_execute(*operands, n)),
        ("execute", per_call(lambda: plan.execute(*operands), n)),
        ("out=", per_call(lambda: convbwd.convolution_backward(go, x, w, *call, out=outs), n)),
        ("full", per_call(lambda: convbwd.convolution_backward(go, x, w, *call), n)),
    ]
    base = rows[0][1]
    print(f"{plan.descriptor}  ({'numpy' if args.numpy else 'torch'}, 1 thread, {n} calls each)")
    for name, t in rows:
        print(f"  {name:8s} {t * 1e6:8.2f} us/call   overhead {(t - base) * 1e6:7.2f} us")


if __name__ == "__main__":
    main()
