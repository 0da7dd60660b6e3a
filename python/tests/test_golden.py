"""examples/golden_data.py: each output is the float64 result on the
operands rounded as the cube math type says, rounded once."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import convbwd
from oracle import oracle, params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "golden_data.py")
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bf16": 2.0**-8}


def hf32(a):
    """HF32 by hand: 11 fraction bits, half away from zero (no NaN here)."""
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x800)) & np.uint32(0xFFFFF000)).view(np.float32)


@pytest.mark.parametrize("dtype, mode", [("float32", 1), ("float32", 2), ("float16", 0), ("bf16", 0)])
def test_golden_outputs_are_the_exact_results_rounded_once(tmp_path, dtype, mode):
    rng = np.random.default_rng(7)
    storage = np.float16 if dtype == "float16" else np.float32
    go = rng.standard_normal((2, 6, 4, 4)).astype(storage)
    x = rng.standard_normal((2, 4, 8, 9)).astype(storage)
    w = rng.standard_normal((6, 2, 3, 3)).astype(storage)
    for name, a in (("go", go), ("x", x), ("w", w)):
        np.save(tmp_path / f"{name}.npy", a)
    cmd = [sys.executable, SCRIPT, "--grad-output", str(tmp_path / "go.npy"), "--input", str(tmp_path / "x.npy"),
           "--weight", str(tmp_path / "w.npy"), "--stride", "2", "2", "--padding", "1", "1", "0", "0",
           "--groups", "2", "--cube-math-type", str(mode), "--out-dir", str(tmp_path / "golden")]
    if dtype == "bf16":
        cmd += ["--dtype", "bf16"]
    package_dir = os.path.dirname(os.path.dirname(convbwd.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_dir, os.environ.get("PYTHONPATH")])),
               PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(cmd, env=env, timeout=60, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr

    if dtype == "bf16":
        go, x, w = (torch.from_numpy(a).bfloat16().double().numpy() for a in (go, x, w))
    # gradBias: cube math does not apply (a vector-unit sum of gradOutput).
    bias = go.astype(np.float64).sum(axis=(0, 2, 3))
    # The operands as the NPU's cube unit sees them.
    if mode == 1:
        go, x, w = hf32(go), hf32(x), hf32(w)
    elif mode == 2:
        go, x, w = (a.astype(np.float16) for a in (go, x, w))
    p = params(2, stride=2, padding=[1, 0], groups=2, after=[1, 0])
    exact, _, _ = oracle(*(torch.from_numpy(np.asarray(a, np.float64)) for a in (go, x, w)), p)
    for i, name in enumerate(("gradInput", "gradWeight")):
        got = np.load(tmp_path / "golden" / f"{name}.npy")
        assert got.dtype == storage
        e = exact[i].numpy()
        # Half an ulp of the output dtype, with slack for a near-tie that
        # another fp64 summation order rounds the other way.
        assert np.all(np.abs(got.astype(np.float64) - e) <= UNIT[dtype] * np.abs(e) * 1.01 + 2.0**-24), name
    gb = np.load(tmp_path / "golden" / "gradBias.npy").astype(np.float64)
    assert np.all(np.abs(gb - bias) <= UNIT[dtype] * np.abs(bias) * 1.01 + 2.0**-24)
