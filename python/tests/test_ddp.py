"""examples/ddp_train.py: two processes over gloo on 127.0.0.1 reach the
weights of one process training on the whole batch, and the loss falls."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import torch

import convbwd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "ddp_train.py")
DEADLINE_S = 120  # for all three processes together
STEPS = "8"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                           "MASTER_PORT")}
    # The children import the convbwd this test imported.
    package_dir = os.path.dirname(os.path.dirname(convbwd.__file__))
    env["PYTHONPATH"] = os.pathsep.join([package_dir] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def wait_all(procs, deadline):
    """Waits for every process until the deadline, then kills the rest."""
    try:
        for p in procs:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        pytest.fail(f"training did not finish within {DEADLINE_S} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p in procs:
        out = p.stdout.read()
        assert p.returncode == 0, f"process exited with {p.returncode}:\n{out}"


def test_two_gloo_processes_match_one_process_on_the_whole_batch(tmp_path):
    deadline = time.monotonic() + DEADLINE_S
    port = str(free_port())
    two = str(tmp_path / "two.pt")
    one = str(tmp_path / "one.pt")
    common = [sys.executable, SCRIPT, "--steps", STEPS, "--batch", "16"]
    # Loopback only: the rendezvous address and gloo's interface.
    ranks = [subprocess.Popen(common + (["--out", two] if r == 0 else []), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=environment(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                              MASTER_ADDR="127.0.0.1", MASTER_PORT=port, GLOO_SOCKET_IFNAME="lo"))
             for r in range(2)]
    single = subprocess.Popen(common + ["--out", one], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=environment())
    wait_all(ranks + [single], deadline)

    with open(two + ".json") as f:
        log_two = json.load(f)
    with open(one + ".json") as f:
        log_one = json.load(f)
    assert log_two["processes"] == 2 and log_one["processes"] == 1
    losses = log_two["losses"]
    assert len(losses) == int(STEPS)
    assert losses[-1] < 0.8 * losses[0], f"the loss did not fall: {losses}"
    for a, b in zip(losses, log_one["losses"]):
        assert abs(a - b) <= 1e-4 * abs(b) + 1e-5, (losses, log_one["losses"])

    w_two, w_one = torch.load(two), torch.load(one)
    assert w_two.keys() == w_one.keys()
    for name in w_one:
        assert torch.allclose(w_two[name], w_one[name], rtol=1e-4, atol=1e-5), name
    # The weights moved: the comparison is not between two initial states.
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("ddp_train", SCRIPT)
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    initial = mod.make_model(0).state_dict()
    assert any(not torch.allclose(initial[n], w_one[n], atol=1e-3) for n in w_one)
