"""Peak memory of one convolution backward call: convbwd against PyTorch.

    /usr/bin/python3 bench/memory.py --suite bench/suites/all.txt [--filter RE] [--dtype fp32]

For every suite row, each side runs in a fresh process (so no allocator cache
from an earlier call hides or inflates anything). The process imports both
libraries, builds the row's input tensors (the same seeded values as
bench/run.py), and only then resets the kernel's peak-RSS mark (writing 5 to
/proc/self/clear_refs). It then makes one call and reads the new peak
(VmHWM). The figure is that peak minus the resident size just before the
call: the memory the call itself added.
  - convbwd: allocating the three gradient buffers, the workspace the plan
    asks for, the plan and the run.
  - PyTorch: torch.ops.aten.convolution_backward, which allocates its outputs
    and any scratch inside.
Inputs are excluded on both sides: the caller already holds them.

Issue 4's target: ours at most PyTorch's on every row.
"""
import argparse
import os
import subprocess
import sys

import run as harness  # bench/run.py: suite files, seeded data, the C API wrapper

np = harness.np


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(side, desc, build, threads):
    """Runs in the fresh process: prints the KiB the call added to the peak."""
    import torch
    torch.set_num_threads(threads)
    os.environ["CONVBWD_NUM_THREADS"] = str(threads)
    info = harness.plan_info(build, threads, [desc])[0]
    if "error" in info:
        raise RuntimeError(info["error"])
    lib = harness.Library(os.path.join(build, "libconvbwd.so"))
    rng = np.random.default_rng(1)
    go = harness.Operand(harness.representable_everywhere(rng, info["grad_output"]), info["dtypes"][0])
    x = harness.Operand(harness.representable_everywhere(rng, info["input"]), info["dtypes"][1])
    w = harness.Operand(harness.representable_everywhere(rng, info["weight"]), info["dtypes"][2])
    tensors = [harness.torch_tensor(torch, op) for op in (go, x, w)] if side == "torch" else None

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak-RSS mark restarts from the current RSS
    before = rss_kib("VmRSS")
    if side == "ours":
        shapes = (info["input"], info["weight"], [info["grad_output"][1]])
        outs = [harness.aligned_empty(shapes[i], harness.storage_dtype(info["gradient_dtypes"][i]))
                for i in range(3)]
        call = harness.OurCall(lib, info, go.array, x.array, w.array, outs)
        call.plan()
        call.run()
    else:
        result = harness.torch_call(torch, info, *tensors)
        del result
    print(rss_kib("VmHWM") - before)


def measure(side, desc, build, threads):
    # A fixed mmap threshold and no heap-top retention: every large block is a
    # fresh mapping whose pages count when touched, on both sides. (With
    # glibc's adaptive threshold, buffers landed in heap memory that the
    # data generation had freed but kept resident, and counted as nothing.)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", side, "--build", build,
                           "--threads", str(threads), desc], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["failed"])[-1][:60]
    return int(proc.stdout.split()[-1]), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_selection_args(ap)
    ap.add_argument("--build", default=os.path.join(harness.ROOT, "build"), help="build directory")
    ap.add_argument("--child", choices=("ours", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("descriptor", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.child:
        child(args.child, args.descriptor, build, args.threads)
        return 0

    wanted = {harness.DTYPE_ALIASES[d] for d in filter(None, args.dtype.split(","))}
    rows = harness.selected_rows(args)
    infos = harness.plan_info(build, args.threads, [d for _, d in rows])
    print(f"# MiB the call adds to the process's peak RSS (fresh process per side, {args.threads} threads)")
    print(f"{'layer':34} {'dtype':5} {'ours':>8} {'torch':>8} {'ours/torch':>10}")
    worst = 0.0
    for (name, desc), info in zip(rows, infos):
        if "error" in info or (wanted and info["dtypes"][0] not in wanted):
            continue
        dtype = harness.DTYPE_SHOW.get(info["dtypes"][0], info["dtypes"][0])
        ours, why = measure("ours", desc, build, args.threads)
        theirs, twhy = measure("torch", desc, build, args.threads)
        if ours is None:
            print(f"{name:34} {dtype:5} ours failed: {why}")
            continue
        if theirs is None:
            print(f"{name:34} {dtype:5} {ours / 1024:8.1f} {'-':>8} {'-':>10}  torch: {twhy}")
            continue
        ratio = ours / max(theirs, 1)
        worst = max(worst, ratio)
        print(f"{name:34} {dtype:5} {ours / 1024:8.1f} {theirs / 1024:8.1f} {ratio:10.2f}")
    print(f"# worst ours/torch: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
