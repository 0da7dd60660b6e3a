#!/usr/bin/python3
"""convbwd benchmark: the issue-4 suite, convbwd (through its CANN C API) against
PyTorch's torch.ops.aten.convolution_backward, side by side in one run.

    /usr/bin/python3 bench/run.py --suite bench/suites/all.txt

Needs a build (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
cmake --build build) and a PyTorch with NumPy: Debian's 1.13

    apt-get install -y python3-torch python3-numpy

or the current 2.x from PyPI in the bench's own virtual environment
(scripts/bench_venv.sh makes bench/.venv), picked with
--torch-python bench/.venv/bin/python. --tier NAME[,NAME...] runs convbwd
with CONVBWD_ISA=NAME, one table per tier.

For every descriptor of the suite it builds one set of seeded tensors, runs both
sides on them alternately (ours first in even rounds, torch first in odd ones),
and reports medians and minima; it checks both results against an fp64
reference (torch in float64 on the same rounded inputs) with the tolerance of
tests/util/tensor.cpp. See bench/README.md for the columns.
"""
import argparse
import ctypes
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import zlib

INSTALL_HINT = ("PyTorch and NumPy come from Debian:\n"
                "    apt-get install -y python3-torch python3-numpy\n"
                "and the harness must run with that interpreter:\n"
                "    /usr/bin/python3 bench/run.py --suite bench/suites/all.txt\n"
                "or from PyPI in the bench's own environment:\n"
                "    scripts/bench_venv.sh\n"
                "    /usr/bin/python3 bench/run.py --torch-python bench/.venv/bin/python ...")

# Set in the environment of a run.py that another one started (for
# --torch-python or one child per --tier), so that it does not start more.
CHILD_ENV = "CONVBWD_BENCH_CHILD"


def option_values(argv, name):
    """The values of `name V` and `name=V` in argv, and argv without them."""
    values, rest, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == name and i + 1 < len(argv):
            values.append(argv[i + 1])
            i += 2
            continue
        if a.startswith(name + "="):
            values.append(a[len(name) + 1:])
        else:
            rest.append(a)
        i += 1
    return values, rest


def reexec_for_torch_python():
    """--torch-python PATH: the whole harness runs under that interpreter, so
    that `import torch` finds its PyTorch (and NumPy). Done before anything is
    imported from it."""
    if os.environ.get(CHILD_ENV):
        return
    values, _ = option_values(sys.argv[1:], "--torch-python")
    if not values:
        return
    py = values[-1]
    if not (os.path.isfile(py) and os.access(py, os.X_OK)):
        sys.exit(f"bench/run.py: --torch-python {py} is not an executable interpreter; expected e.g. "
                 f"/usr/bin/python3 (Debian's torch) or bench/.venv/bin/python (scripts/bench_venv.sh)")
    os.environ[CHILD_ENV] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


reexec_for_torch_python()

try:
    import numpy as np
except ImportError:
    sys.exit(f"bench/run.py: NumPy is not importable from {sys.executable}.\n{INSTALL_HINT}")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# CANN's aclDataType values (include/acl/acl_base.h) and formats by rank.
ACL_DTYPE = {"f32": 0, "f16": 1, "bf16": 27}
ACL_FORMAT_ND = 2
ACL_FORMAT_BY_RANK = {3: 47, 4: 0, 5: 30}  # NCL, NCHW, NCDHW
DTYPE_ALIASES = {"fp32": "f32", "f32": "f32", "bf16": "bf16", "fp16": "f16", "f16": "f16"}
DTYPE_SHOW = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}
# Unit roundoff of the output dtype, as in tests/util/tensor.cpp tolerance().
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
GRADIENTS = ("gradInput", "gradWeight", "gradBias")


# --------------------------------------------------------------------------- data

def aligned_empty(shape, dtype, align=64):
    """An uninitialised array whose data starts on an `align`-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def f32_to_bf16_bits(x):
    """fp32 -> bf16 bit patterns (uint16), round to nearest even (no NaNs here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


class Operand:
    """One tensor in the library's dtype (bf16 carried as uint16 bits), plus
    the exact float64 values it holds, for the reference."""

    def __init__(self, values_f32, dtype):
        self.dtype = dtype
        if dtype == "f32":
            store = values_f32.astype(np.float32)
            exact = store.astype(np.float64)
        elif dtype == "f16":
            store = values_f32.astype(np.float16)
            exact = store.astype(np.float64)
        elif dtype == "bf16":
            store = f32_to_bf16_bits(values_f32)
            exact = bf16_bits_to_f32(store).astype(np.float64)
        else:
            raise ValueError(f"dtype {dtype} is not benchmarked (expected f32, f16 or bf16)")
        self.array = aligned_empty(values_f32.shape, store.dtype)
        self.array[...] = store
        self.exact = exact


def layer_key(info):
    """What a layer's rows share: everything but dtypes and mask."""
    return json.dumps({k: info[k] for k in ("grad_output", "input", "weight", "stride", "padding_before",
                                            "padding_after", "dilation", "output_padding", "transposed", "groups")},
                      sort_keys=True)


def representable_everywhere(rng, shape):
    """Uniform [-1, 1] values that fp32, bf16 and fp16 all hold exactly: rounded
    to bf16's 8-bit significand, and magnitudes below fp16's smallest normal
    (2^-14) set to 0. The timings do not depend on the values; the check then
    needs one fp64 reference per layer."""
    v = bf16_bits_to_f32(f32_to_bf16_bits(rng.uniform(-1, 1, shape).astype(np.float32)))
    v[np.abs(v) < 2.0 ** -14] = 0
    return v


def to_float64(array, dtype):
    if dtype == "bf16":
        return bf16_bits_to_f32(array).astype(np.float64)
    return array.astype(np.float64)


def storage_dtype(dtype):
    return {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dtype]


# --------------------------------------------------------------------------- ours

class Library:
    """libconvbwd.so through its CANN C API only."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        i64p = ctypes.POINTER(ctypes.c_int64)
        lib.aclCreateTensor.restype = ctypes.c_void_p
        lib.aclCreateTensor.argtypes = [i64p, ctypes.c_uint64, ctypes.c_int, i64p, ctypes.c_int64, ctypes.c_int,
                                        i64p, ctypes.c_uint64, ctypes.c_void_p]
        lib.aclCreateIntArray.restype = ctypes.c_void_p
        lib.aclCreateIntArray.argtypes = [i64p, ctypes.c_uint64]
        lib.aclCreateBoolArray.restype = ctypes.c_void_p
        lib.aclCreateBoolArray.argtypes = [ctypes.POINTER(ctypes.c_bool), ctypes.c_uint64]
        for name in ("aclDestroyTensor", "aclDestroyIntArray", "aclDestroyBoolArray"):
            getattr(lib, name).restype = ctypes.c_int32
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.aclnnConvolutionBackwardGetWorkspaceSize.restype = ctypes.c_int32
        lib.aclnnConvolutionBackwardGetWorkspaceSize.argtypes = (
            [ctypes.c_void_p] * 7 + [ctypes.c_bool, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int8]
            + [ctypes.c_void_p] * 3 + [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)])
        lib.aclnnConvolutionBackward.restype = ctypes.c_int32
        lib.aclnnConvolutionBackward.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        lib.aclrtSynchronizeStream.restype = ctypes.c_int
        lib.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]
        lib.aclrtCreateStream.restype = ctypes.c_int
        lib.aclrtCreateStream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.aclrtDestroyStream.restype = ctypes.c_int
        lib.aclrtDestroyStream.argtypes = [ctypes.c_void_p]
        lib.aclInit.restype = ctypes.c_int
        lib.aclInit.argtypes = [ctypes.c_char_p]
        lib.aclrtSetDevice.restype = ctypes.c_int
        lib.aclrtSetDevice.argtypes = [ctypes.c_int32]
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        lib.aclGetRecentErrMsg.argtypes = []
        self.lib = lib
        self.check(lib.aclInit(None), "aclInit")
        self.check(lib.aclrtSetDevice(0), "aclrtSetDevice")
        self.stream = ctypes.c_void_p()
        self.check(lib.aclrtCreateStream(ctypes.byref(self.stream)), "aclrtCreateStream")

    def message(self):
        m = self.lib.aclGetRecentErrMsg()
        return m.decode(errors="replace") if m else ""

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what} returned {status}: {self.message()}")

    @staticmethod
    def ints(values):
        return (ctypes.c_int64 * max(1, len(values)))(*values)

    def tensor(self, array, dtype, fmt):
        dims = list(array.shape)
        strides = [s // array.itemsize for s in array.strides]
        t = self.lib.aclCreateTensor(self.ints(dims), len(dims), ACL_DTYPE[dtype], self.ints(strides), 0, fmt,
                                     self.ints(dims), len(dims), ctypes.c_void_p(array.ctypes.data))
        if not t:
            raise RuntimeError(f"aclCreateTensor failed: {self.message()}")
        return t

    def int_array(self, values):
        a = self.lib.aclCreateIntArray(self.ints(values), len(values))
        if not a:
            raise RuntimeError(f"aclCreateIntArray failed: {self.message()}")
        return a


class OurCall:
    """The handles of one problem; plan() + run() is one aclnnConvolutionBackward
    call (an executor runs once, so every call plans anew, as CANN callers do)."""

    def __init__(self, lib, info, go, x, w, outs):
        self.lib = lib
        rank = len(info["input"])
        fmt = ACL_FORMAT_BY_RANK.get(rank, ACL_FORMAT_ND)
        dts = info["dtypes"]
        gdts = info["gradient_dtypes"]
        self.handles = [lib.tensor(go, dts[0], fmt), lib.tensor(x, dts[1], fmt), lib.tensor(w, dts[2], fmt)]
        self.outs = [lib.tensor(outs[0], gdts[0], fmt) if info["mask"][0] else None,
                     lib.tensor(outs[1], gdts[1], fmt) if info["mask"][1] else None,
                     lib.tensor(outs[2], gdts[2], ACL_FORMAT_ND) if info["mask"][2] else None]
        pb, pa = info["padding_before"], info["padding_after"]
        if pb == pa:
            padding = pb
        elif len(pb) == 2:
            padding = [pb[0], pa[0], pb[1], pa[1]]  # CANN's 2D top, bottom, left, right
        else:
            raise RuntimeError("asymmetric padding in 1D/3D has no CANN spelling")
        self.arrays = [lib.int_array([info["grad_output"][1]]), lib.int_array(info["stride"]),
                       lib.int_array(padding), lib.int_array(info["dilation"]),
                       lib.int_array(info["output_padding"])]
        mask = (ctypes.c_bool * 3)(*info["mask"])
        self.mask = lib.lib.aclCreateBoolArray(mask, 3)
        self.transposed = info["transposed"]
        self.groups = info["groups"]
        self.math = info["math"]
        self.workspace = None
        self.executor = ctypes.c_void_p()
        self.ws_bytes = 0

    def plan(self):
        ws = ctypes.c_uint64()
        bias, stride, padding, dilation, out_pad = self.arrays
        status = self.lib.lib.aclnnConvolutionBackwardGetWorkspaceSize(
            self.handles[0], self.handles[1], self.handles[2], bias, stride, padding, dilation, self.transposed,
            out_pad, self.groups, self.mask, self.math, self.outs[0], self.outs[1], self.outs[2], ctypes.byref(ws),
            ctypes.byref(self.executor))
        self.lib.check(status, "aclnnConvolutionBackwardGetWorkspaceSize")
        self.ws_bytes = ws.value
        if self.ws_bytes and (self.workspace is None or self.workspace.nbytes < self.ws_bytes):
            self.workspace = aligned_empty((self.ws_bytes,), np.uint8)

    def run(self):
        ptr = ctypes.c_void_p(self.workspace.ctypes.data) if self.ws_bytes else None
        self.lib.check(self.lib.lib.aclnnConvolutionBackward(ptr, self.ws_bytes, self.executor, self.lib.stream),
                       "aclnnConvolutionBackward")
        self.lib.check(self.lib.lib.aclrtSynchronizeStream(self.lib.stream), "aclrtSynchronizeStream")

    def close(self):
        for t in self.handles + [o for o in self.outs if o]:
            self.lib.lib.aclDestroyTensor(t)
        for a in self.arrays:
            self.lib.lib.aclDestroyIntArray(a)
        self.lib.lib.aclDestroyBoolArray(self.mask)


# --------------------------------------------------------------------------- torch

def torch_tensor(torch, op):
    if op.dtype == "bf16":
        return torch.from_numpy(op.array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(op.array)


def torch_call(torch, info, go, x, w):
    if info["padding_before"] != info["padding_after"]:
        raise RuntimeError("PyTorch takes symmetric padding only")
    return torch.ops.aten.convolution_backward(
        go, x, w, [info["grad_output"][1]], info["stride"], info["padding_before"], info["dilation"],
        info["transposed"], info["output_padding"], info["groups"], list(info["mask"]))


def torch_to_float64(torch, t):
    if t is None:
        return None
    return t.detach().to(torch.float64).numpy()


# --------------------------------------------------------------------------- checks

def reduction_lengths(info):
    """Terms summed per output element, for the accumulation part of the
    tolerance (an upper bound: padding cuts some taps off)."""
    go, x, w = info["grad_output"], info["input"], info["weight"]
    ksize = math.prod(w[2:])
    out_channels_per_group = go[1] // info["groups"]
    # The side the weight gradient reduces over: gradOutput's spatial size for a
    # normal convolution, the input's for a transposed one.
    y_spatial = math.prod(x[2:]) if info["transposed"] else math.prod(go[2:])
    return (out_channels_per_group * ksize, go[0] * y_spatial, go[0] * math.prod(go[2:]))


def scaled_error(got, ref, sum_abs, n, out_dtype):
    """max |got - ref| / tolerance, tolerance as in tests/util/tensor.cpp:
    2 u |ref| + n 2^-24 sum|products| + 2^-24."""
    tol = 2 * UNIT_ROUNDOFF[out_dtype] * np.abs(ref) + max(n, 1) * 2.0 ** -24 * sum_abs + 2.0 ** -24
    if got.shape != ref.shape:
        return float("inf")
    err = np.abs(got - ref) / tol
    worst = float(np.max(err)) if err.size else 0.0
    return worst if math.isfinite(worst) else float("inf")


# --------------------------------------------------------------------------- probe and plan info

def run_peak(build, threads, peak_file):
    if peak_file:
        text = open(peak_file).read()
    else:
        exe = os.path.join(build, "bench", "convbwd_peak")
        if not os.path.exists(exe):
            sys.exit(f"bench/run.py: {exe} is missing; build it: cmake --build {build} --target convbwd_peak")
        text = subprocess.run([exe, "--threads", str(threads)], check=True, capture_output=True, text=True).stdout
    summary, cpu = None, ""
    for line in text.splitlines():
        if line.startswith("summary "):
            summary = dict(kv.split("=", 1) for kv in line.split()[1:])
        elif line.startswith("cpu "):
            cpu = line[4:]
    if summary is None:
        sys.exit("bench/run.py: the peak probe printed no summary line")
    return summary, cpu, text


def plan_info(build, threads, descriptors):
    exe = os.path.join(build, "bench", "convbwd_bench_info")
    if not os.path.exists(exe):
        sys.exit(f"bench/run.py: {exe} is missing; build it: cmake --build {build} --target convbwd_bench_info")
    out = subprocess.run([exe, "--threads", str(threads)] + descriptors, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def read_suite(path):
    rows = []
    for line in open(path):
        text, _, comment = line.partition("#")
        desc = text.strip()
        if not desc:
            continue
        name = comment.split(":", 1)[0].strip() or desc
        rows.append((name, desc))
    return rows


def add_selection_args(ap):
    """The options that pick rows and threads (shared with bench/memory.py)."""
    ap.add_argument("--suite", action="append", help="suite file(s); default bench/suites/all.txt")
    ap.add_argument("--filter", default="", help="regex on the row name or descriptor")
    ap.add_argument("--dtype", default="", help="only these dtypes, comma-separated: fp32,bf16,fp16")
    ap.add_argument("--threads", type=int, default=2, help="threads of both sides (default 2)")


def selected_rows(args):
    """(name, descriptor) of the suite rows that --suite and --filter select."""
    rows = []
    for path in args.suite or [os.path.join(HERE, "suites", "all.txt")]:
        rows += read_suite(path)
    pattern = re.compile(args.filter)
    return [(n, d) for n, d in rows if pattern.search(n) or pattern.search(d)]


# --------------------------------------------------------------------------- main

def fmt_ms(seconds):
    return f"{seconds * 1e3:.3f}" if seconds < 1 else f"{seconds * 1e3:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection_args(ap)
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds per row (default 7)")
    ap.add_argument("--block", type=int, default=3,
                    help="calls of one side in a row within a round (default 3); all are timed")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="ms to wait before switching sides, so that the other side's threads have gone idle "
                         "(default 10: libgomp's spin-wait lasts a few ms)")
    ap.add_argument("--samples", action="store_true", help="also print every timed call of each side, in order")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds a row may take: fewer rounds (at least 1) when the warm-up says it would exceed")
    ap.add_argument("--build", default=None, help="build directory (default: build)")
    ap.add_argument("--lib", default=None, help="path of libconvbwd.so (default: <build>/libconvbwd.so)")
    ap.add_argument("--peak-file", default=None, help="reuse a saved convbwd_peak output instead of probing")
    ap.add_argument("--ours-only", action="store_true", help="do not run PyTorch (no ratios, no checks)")
    ap.add_argument("--no-check", action="store_true", help="skip the fp64 reference check")
    ap.add_argument("--split", action="store_true",
                    help="also time gradInput alone (_mask100) and gradWeight alone (_mask010) for each row")
    ap.add_argument("--scaling", action="store_true",
                    help="also time ours on 1 thread and print the speed-up of --threads over 1")
    ap.add_argument("--markdown", default=None, help="also write the table as Markdown to this file")
    ap.add_argument("--tier", default=None,
                    help="convbwd's ISA tier(s), comma-separated (CONVBWD_ISA, e.g. scalar,avx2,avx512): "
                         "one table per tier, each from a run of its own")
    ap.add_argument("--torch-python", default=None, metavar="PATH",
                    help="the interpreter whose PyTorch is the peer (the harness runs under it): "
                         "/usr/bin/python3 for Debian's 1.13, bench/.venv/bin/python for PyPI's "
                         "(scripts/bench_venv.sh); default: this interpreter")
    args = ap.parse_args()
    tiers = [t for t in (args.tier or "").split(",") if t]
    if len(tiers) > 1:
        return run_tiers(tiers, args)
    if tiers:
        # Read by the library when it first plans, and by convbwd_bench_info.
        os.environ["CONVBWD_ISA"] = tiers[0]

    build = os.path.abspath(args.build or os.path.join(ROOT, "build"))
    lib_path = args.lib or os.path.join(build, "libconvbwd.so")
    args.lib_path = lib_path
    if not os.path.exists(lib_path):
        sys.exit(f"bench/run.py: {lib_path} is missing. Build first:\n"
                 f"    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build\n"
                 f"or name the build with --build DIR")
    torch = None
    if not args.ours_only:
        try:
            import torch  # noqa: F811
        except ImportError:
            sys.exit(f"bench/run.py: PyTorch is not importable from {sys.executable}.\n{INSTALL_HINT}\n"
                     f"(or pass --ours-only to time convbwd alone)")
        torch.set_num_threads(args.threads)

    # Our thread count must be in the environment before the library's pool starts.
    os.environ["CONVBWD_NUM_THREADS"] = str(args.threads)
    wanted_dtypes = set()
    for d in filter(None, args.dtype.split(",")):
        if d not in DTYPE_ALIASES:
            sys.exit(f"bench/run.py: --dtype {d} is unknown; expected fp32, bf16 or fp16")
        wanted_dtypes.add(DTYPE_ALIASES[d])

    rows = selected_rows(args)
    if args.split:
        rows = [r for n, d in rows for r in ((n, d), (n + ".dgrad", d + "_mask100"), (n + ".wgrad", d + "_mask010"))]
    infos = plan_info(build, args.threads, [d for _, d in rows])
    selected = []
    for (name, desc), info in zip(rows, infos):
        if wanted_dtypes and "dtypes" in info and info["dtypes"][0] not in wanted_dtypes:
            continue
        selected.append((name, desc, info))
    if not selected:
        sys.exit("bench/run.py: no suite row matches --filter / --dtype")
    isa = next((info["isa"] for _, _, info in selected if "isa" in info), "?")
    if tiers and isa != tiers[0]:
        sys.exit(f"bench/run.py: --tier {tiers[0]}: convbwd runs {isa} with CONVBWD_ISA={tiers[0]}; "
                 f"this CPU lacks the tier or the library does not know its name")

    peak, cpu, probe_text = run_peak(build, args.threads, args.peak_file)
    fp32_peak = float(peak["fp32_gflops"])
    bf16_peak = float(peak["bf16_gflops"])
    triad = float(peak["triad_gbs"])
    lib = Library(lib_path)

    print(f"# convbwd vs PyTorch {torch.__version__ if torch else '(not run)'}, threads {args.threads}, "
          f"rounds {args.repeats} of {args.block} calls per side, {args.settle:g} ms settle, isa {isa}")
    print(f"# machine: {machine()}")
    print(f"# {tier_line(isa)}")
    print(f"# {torch_info(torch)}")
    print(f"# probe cpu: {cpu}")
    print(f"# peaks ({args.threads} threads): fp32 {fp32_peak:.1f} GFLOP/s, bf16 {bf16_peak:.1f} GFLOP/s "
          f"({peak['bf16_source']}), triad {triad:.1f} GB/s")
    print("# ms = median per call (ours: plan + run); ratio = torch / ours; "
          "errors are max |x - ref| / tolerance vs an fp64 reference (<= 1 passes)")
    cols = ("layer", "dtype", "ours ms", "min", "torch ms", "min", "ratio", "r(min)", "GF/s", "%peak", "%bound",
            "plan us", "ws MiB", "err", "err torch", "agree", "rounds", "impl (dgrad / wgrad / bias)")
    widths = (34, 5, 9, 9, 9, 9, 7, 7, 7, 6, 7, 8, 7, 7, 9, 6, 6, 0)
    if args.scaling:
        cols, widths = cols[:-1] + ("x1->N",) + cols[-1:], widths[:-1] + (6,) + widths[-1:]
    header = " ".join(c.ljust(w) if w else c for c, w in zip(cols, widths))
    print(header)
    table = []
    ratios = {}
    ref_cache = {}

    for name, desc, info in selected:
        if "error" in info:
            print(f"{name:34} error: {info['error']}")
            table.append({"name": name, "error": info["error"]})
            continue
        dt = info["dtypes"][0]
        row = {"name": name, "desc": desc, "dtype": DTYPE_SHOW.get(dt, dt), "impl": info["implementations"]}
        # The same values for every dtype and mask of a layer, so that one fp64
        # reference serves all its rows.
        key = layer_key(info)
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        go = Operand(representable_everywhere(rng, info["grad_output"]), info["dtypes"][0])
        x = Operand(representable_everywhere(rng, info["input"]), info["dtypes"][1])
        w = Operand(representable_everywhere(rng, info["weight"]), info["dtypes"][2])
        shapes = (info["input"], info["weight"], [info["grad_output"][1]])
        outs = [aligned_empty(shapes[i], storage_dtype(info["gradient_dtypes"][i])) for i in range(3)]
        for o in outs:
            o.view(np.uint8)[...] = 0xA5  # a canary: a value left unwritten shows up as an error
        call = OurCall(lib, info, go.array, x.array, w.array, outs)

        try:
            t0 = time.perf_counter()
            call.plan()
            call.run()
            warm_ours = time.perf_counter() - t0
        except RuntimeError as e:
            print(f"{name:34} {row['dtype']:5} ours failed: {e}")
            row["error"] = f"ours failed: {e}"
            table.append(row)
            call.close()
            continue
        ours_results = [to_float64(outs[i], info["gradient_dtypes"][i]) if info["mask"][i] else None
                        for i in range(3)]

        torch_ok, torch_why, warm_torch, torch_results = False, "not run", 0.0, None
        if torch is not None:
            tgo, tx, tw = torch_tensor(torch, go), torch_tensor(torch, x), torch_tensor(torch, w)
            try:
                t0 = time.perf_counter()
                res = torch_call(torch, info, tgo, tx, tw)
                warm_torch = time.perf_counter() - t0
                torch_results = [torch_to_float64(torch, r) if info["mask"][i] else None for i, r in enumerate(res)]
                torch_ok = True
                del res
            except RuntimeError as e:
                torch_why = str(e).splitlines()[0][:80]

        # fp64 reference on the very values both sides saw (all three
        # gradients, kept for the layer's other rows); sum|products| from the
        # same convolution on absolute values, in fp32, which is plenty for a
        # tolerance.
        errs = [None, None]
        if torch is not None and not args.no_check:
            if ref_cache.get("key") != key:
                ref_cache.clear()
                full = dict(info, mask=[True, True, True])
                t64 = [torch.from_numpy(a.exact) for a in (go, x, w)]
                try:
                    ref_cache["ref"] = [torch_to_float64(torch, r) for r in torch_call(torch, full, *t64)]
                    ref_cache["abs"] = [torch_to_float64(torch, r) for r in
                                        torch_call(torch, full, *[t.abs().float() for t in t64])]
                except RuntimeError as e:
                    print(f"{name:34} no fp64 reference: {str(e).splitlines()[0][:100]}")
                ref_cache["key"] = key
                del t64
            ref, absr = ref_cache.get("ref"), ref_cache.get("abs")
            ns = reduction_lengths(info)
            for side, results in enumerate((ours_results, torch_results)):
                if results is None or ref is None:
                    continue
                worst = 0.0
                for i in range(3):
                    if info["mask"][i]:
                        worst = max(worst, scaled_error(results[i], ref[i], absr[i], ns[i],
                                                        info["gradient_dtypes"][i]))
                errs[side] = worst

        # Timed rounds, alternating which side goes first. A round runs each
        # side --block times back to back (a training loop's steady state),
        # then waits --settle ms before the other side: PyTorch's OpenMP
        # workers spin-wait after each call (libgomp's default policy), and
        # that spinning shares the cores with whatever runs next. Measured on
        # the Zen 5 machine, 3x3 128@28 fp32, 2 threads, sides run one call
        # each with no pause: ours median 7.9-10.1 ms against 4.9-5.4 ms
        # this way; torch's medians moved only within the noise (our pool's
        # workers sleep after a 0.2 ms spin). bench/README.md has the figures.
        rounds = args.repeats
        per_round = (warm_ours + warm_torch) * args.block
        if per_round * rounds > args.budget:
            rounds = max(1, int(args.budget / max(per_round, 1e-9)))
        ours_t, plan_t, torch_t, one_t = [], [], [], []
        ws_bytes = 0  # of the N-thread plan (the 1-thread plan of --scaling needs less)
        last_side = None
        for r in range(rounds):
            order = ("ours", "torch") if r % 2 == 0 else ("torch", "ours")
            if args.scaling:
                order = order + ("ours1",)
            for side in (s for s in order for _ in range(args.block)):
                if side != last_side:
                    time.sleep(args.settle * 1e-3)
                last_side = side
                if side == "ours1":
                    # Plans read CONVBWD_NUM_THREADS when they are created.
                    os.environ["CONVBWD_NUM_THREADS"] = "1"
                    t0 = time.perf_counter()
                    call.plan()
                    os.environ["CONVBWD_NUM_THREADS"] = str(args.threads)
                    call.run()
                    one_t.append(time.perf_counter() - t0)
                elif side == "ours":
                    t0 = time.perf_counter()
                    call.plan()
                    t1 = time.perf_counter()
                    call.run()
                    t2 = time.perf_counter()
                    ours_t.append(t2 - t0)
                    plan_t.append(t1 - t0)
                    ws_bytes = call.ws_bytes
                elif torch_ok:
                    t0 = time.perf_counter()
                    res = torch_call(torch, info, tgo, tx, tw)
                    torch_t.append(time.perf_counter() - t0)
                    del res
        call.close()
        if args.samples:
            print(f"# samples {name}: ours ms {' '.join(f'{v * 1e3:.3f}' for v in ours_t)}; "
                  f"torch ms {' '.join(f'{v * 1e3:.3f}' for v in torch_t)}")

        ours_med, ours_min = statistics.median(ours_t), min(ours_t)
        flops = float(info["flops"])
        gflops = flops / ours_med * 1e-9
        peak_g = bf16_peak if dt == "bf16" else fp32_peak
        # Least bytes a backward pass moves: read the operands it needs, write
        # the gradients once; the bound is the slower of FMA peak and triad.
        esz = {"f32": 4, "f16": 2, "bf16": 2}
        m = info["mask"]
        nbytes = (math.prod(info["grad_output"]) * esz[info["dtypes"][0]]
                  + (math.prod(info["input"]) * esz[info["dtypes"][1]] if m[1] else 0)
                  + (math.prod(info["weight"]) * esz[info["dtypes"][2]] if m[0] else 0)
                  + sum(math.prod(shapes[i]) * esz[info["gradient_dtypes"][i]] for i in range(3) if m[i]))
        t_flop = flops / (peak_g * 1e9)
        t_mem = nbytes / (triad * 1e9)
        row.update(ours_ms=ours_med * 1e3, ours_min_ms=ours_min * 1e3, gflops=gflops,
                   pct_peak=100 * gflops / peak_g, pct_bound=100 * max(t_flop, t_mem) / ours_med,
                   bound="M" if t_mem > t_flop else "F", plan_us=statistics.median(plan_t) * 1e6,
                   ws_mib=ws_bytes / 2 ** 20, err=errs[0], err_torch=errs[1], rounds=rounds,
                   torch_ok=torch_ok, torch_why=torch_why,
                   scaling=statistics.median(one_t) / ours_med if one_t else None)
        if torch_ok:
            torch_med, torch_min = statistics.median(torch_t), min(torch_t)
            row.update(torch_ms=torch_med * 1e3, torch_min_ms=torch_min * 1e3, ratio=torch_med / ours_med,
                       ratio_min=torch_min / ours_min)
            if not (args.split and name.endswith((".dgrad", ".wgrad"))):  # the geomean is over whole layers
                ratios.setdefault(row["dtype"], []).append(row["ratio"])
        # "agree" judges ours: within the tolerance of the fp64 reference. Torch's
        # own error is reported beside it, not judged: its bf16 paths round
        # partial sums to bf16 and land far outside an fp32-accumulation bound.
        row["agree"] = "n/a" if errs[0] is None else ("yes" if errs[0] <= 1 else "NO")
        table.append(row)

        def e(v):
            return "-" if v is None else f"{v:.3f}" if v < 100 else f"{v:.2g}"
        torch_cols = ((fmt_ms(row["torch_ms"] / 1e3), fmt_ms(row["torch_min_ms"] / 1e3), f"{row['ratio']:.2f}",
                       f"{row['ratio_min']:.2f}") if torch_ok else
                      ("unsupp.", "-", "-", "-") if torch is not None else ("not run", "-", "-", "-"))
        cells = (name, row["dtype"], fmt_ms(ours_med), fmt_ms(ours_min)) + torch_cols + (
            f"{gflops:.3g}", f"{row['pct_peak']:.0f}", f"{row['pct_bound']:.0f}{row['bound']}",
            f"{row['plan_us']:.0f}", f"{row['ws_mib']:.2f}", e(errs[0]), e(errs[1]), row["agree"], str(rounds))
        if args.scaling:
            cells += (f"{row['scaling']:.2f}",)
        cells += (" / ".join(i or "-" for i in info["implementations"]),)
        print(" ".join(c.ljust(w) if w else c for c, w in zip(cells, widths)), flush=True)
        if not torch_ok and torch is not None:
            print(f"{'':34}   torch: unsupported ({torch_why})", flush=True)

    print()
    for dtype in ("fp32", "bf16", "fp16"):
        rs = ratios.get(dtype, [])
        n_rows = sum(1 for r in table if r.get("dtype") == dtype and "error" not in r
                     and not (args.split and r["name"].endswith((".dgrad", ".wgrad"))))
        if rs:
            g = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geomean ratio {dtype}: {g:.2f}x over {len(rs)} rows"
                  + (f" ({n_rows - len(rs)} rows torch: unsupported, excluded)" if n_rows > len(rs) else ""))
        elif n_rows:
            why = "torch not run" if torch is None else f"torch: unsupported on all {n_rows} rows"
            print(f"geomean ratio {dtype}: n/a ({why})")
    bad = [r["name"] + "." + r.get("dtype", "?") for r in table if r.get("agree") == "NO" or "error" in r]
    checked = sum(1 for r in table if r.get("agree") in ("yes", "NO"))
    if bad:
        print(f"agreement: FAILED: {', '.join(bad)}")
    else:
        print(f"agreement: {checked} of {len(table)} rows checked against the fp64 reference, all within tolerance")

    if args.markdown:
        write_markdown(args.markdown, table, ratios, cpu, peak, probe_text, torch, isa, args)
    return 1 if bad else 0


def run_tiers(tiers, args):
    """One run of this script per tier (CONVBWD_ISA is read once per process),
    one after the other, each printing its table; with --markdown, the tables
    are joined into one file under a heading per tier. A tier that cannot run
    here is reported and left unmeasured."""
    _, rest = option_values(sys.argv[1:], "--tier")
    _, rest = option_values(rest, "--markdown")
    parts, status = [], 0
    for t in tiers:
        print(f"## tier {t}", flush=True)
        md = f"{args.markdown}.{t}.tmp" if args.markdown else None
        cmd = [sys.executable, os.path.abspath(__file__)] + rest + ["--tier", t] + (["--markdown", md] if md else [])
        # The Markdown names the command as it was typed, not the child's.
        env = dict(os.environ, CONVBWD_BENCH_COMMAND=" ".join(sys.argv[1:]))
        rc = subprocess.run(cmd, env=env).returncode
        print(flush=True)
        status = max(status, rc)
        body = ""
        if md and os.path.exists(md):
            body = open(md).read()
            os.remove(md)
        if not body:
            body = f"Not measured: the run for tier `{t}` exited with status {rc} (its message is in the run's output).\n"
        parts.append(f"## Tier `{t}`\n\n{body}")
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(parts))
    return status


# The CPU flags that decide convbwd's tiers and oneDNN's kernels.
TIER_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16", "avx512_fp16",
              "amx_bf16", "amx_tile")


def machine():
    """lscpu's model, family/model, CPU count, and which of TIER_FLAGS the CPU
    has and lacks."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown (no lscpu)"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = set(fields.get("Flags", "").split())
    have = [f for f in TIER_FLAGS if f in flags]
    lack = [f for f in TIER_FLAGS if f not in flags]
    return (f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs "
            f"(family {fields.get('CPU family', '?').strip()}, model {fields.get('Model', '?').strip()}), "
            f"flags: {' '.join(have) or 'none'}" + (f" (lacks {' '.join(lack)})" if lack else ""))


def torch_info(torch):
    """PyTorch's version and interpreter, its oneDNN version and ATen's CPU
    capability, from torch.__config__.show() (the same text in 1.13 and 2.x)."""
    if torch is None:
        return "PyTorch not run"
    show = torch.__config__.show()
    m = re.search(r"(?:MKL-DNN|oneDNN)\D*?v?(\d+(?:\.\d+)+)", show)
    onednn = m.group(1) if m else "version unknown"
    if not torch.backends.mkldnn.is_available():
        onednn += " (not available)"
    cap = re.search(r"CPU capability usage:\s*(\S+)", show)
    return (f"PyTorch {torch.__version__} ({sys.executable}), oneDNN {onednn}, "
            f"ATen CPU capability {cap.group(1) if cap else 'unknown'}")


def tier_line(isa):
    return f"convbwd isa {isa} (CONVBWD_ISA={os.environ.get('CONVBWD_ISA') or 'unset'})"


def source_commit(lib_path):
    """The git commit of the source tree the library was built from, when the
    build directory's CMakeCache names one that is a git checkout."""
    cache = os.path.join(os.path.dirname(os.path.abspath(lib_path)), "CMakeCache.txt")
    src = ROOT
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                src = line.split("=", 1)[1].strip()
    r = subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"], capture_output=True, text=True)
    if r.returncode == 0:
        return r.stdout.strip()
    stamp = os.path.join(src, "SOURCE_COMMIT")
    return open(stamp).read().strip() if os.path.exists(stamp) else "unknown"


def write_markdown(path, table, ratios, cpu, peak, probe_text, torch, isa, args):
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    lines = [f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Library: `{args.lib_path}`"
             f" (source commit {source_commit(args.lib_path)}).", "",
             f"Machine: {machine()}.", "",
             f"Command: `/usr/bin/python3 bench/run.py "
             f"{os.environ.get('CONVBWD_BENCH_COMMAND') or ' '.join(sys.argv[1:])}`", "",
             f"Threads {args.threads}, up to {args.repeats} rounds (median; min in brackets), "
             f"{tier_line(isa)}.", "",
             f"Peer: {torch_info(torch)}.", "",
             f"Probe CPU line: {cpu}", "",
             f"Peaks ({args.threads} threads, bench/peak): fp32 {peak['fp32_gflops']} GFLOP/s "
             f"({peak['fp32_gflops_per_core']} per core), bf16 {peak['bf16_gflops']} GFLOP/s ({peak['bf16_source']}), "
             f"triad {peak['triad_gbs']} GB/s. The probe's output:", "", "```", probe_text.strip(), "```", "",
             "| layer | dtype | ours ms | torch ms | ratio | GFLOP/s | % peak | % bound | plan µs | ws MiB "
             "| err | err torch | agree | " + ("1→N threads | " if args.scaling else "") + "implementations |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.scaling else "") + "---|"]
    for r in table:
        if "ours_ms" not in r:
            lines.append(f"| {r['name']} | {r.get('dtype', '')} | error: {r.get('error', '')} |||||||||||| |")
            continue
        torch_cell = (f"{r['torch_ms']:.2f} ({r['torch_min_ms']:.2f})" if r["torch_ok"] else "unsupported")
        ratio_cell = (f"{r['ratio']:.2f} ({r['ratio_min']:.2f})" if r["torch_ok"] else "-")
        lines.append(f"| {r['name']} | {r['dtype']} | {r['ours_ms']:.2f} ({r['ours_min_ms']:.2f}) | {torch_cell} "
                     f"| {ratio_cell} | {r['gflops']:.3g} | {r['pct_peak']:.0f} | {r['pct_bound']:.0f} {r['bound']} "
                     f"| {r['plan_us']:.0f} | {r['ws_mib']:.2f} | {f(r['err'], '.3f')} | {f(r['err_torch'], '.3f')} "
                     f"| {r['agree']} | " + (f"{r['scaling']:.2f} | " if args.scaling else "")
                     + f"{' / '.join(i or '-' for i in r['impl'])} |")
    lines.append("")
    for dtype in ("fp32", "bf16", "fp16"):
        rs = ratios.get(dtype, [])
        if rs:
            g = math.exp(sum(math.log(x) for x in rs) / len(rs))
            lines.append(f"- geomean ratio {dtype}: **{g:.2f}x** over {len(rs)} rows (torch-unsupported rows excluded)")
        else:
            lines.append(f"- geomean ratio {dtype}: n/a (torch: unsupported)")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
