"""`cmake --install --component python` puts a working package under the
prefix (a whole `cmake --install` runs the same rules)."""

import os
import shutil
import subprocess
import sys

import pytest

import convbwd


def build_dir():
    """The CMake build tree this convbwd was imported from, if it was."""
    d = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(convbwd.__file__))))
    return d if os.path.exists(os.path.join(d, "CMakeCache.txt")) else None


@pytest.mark.skipif(build_dir() is None or shutil.which("cmake") is None,
                    reason="convbwd was not imported from a CMake build tree")
def test_installed_package_imports_and_computes(tmp_path):
    prefix = tmp_path / "prefix"
    run = subprocess.run(["cmake", "--install", build_dir(), "--component", "python", "--prefix", str(prefix)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    found = [root for root, _, files in os.walk(prefix) if "__init__.py" in files and root.endswith("convbwd")]
    assert len(found) == 1, found
    site = os.path.dirname(found[0])
    assert os.path.relpath(site, prefix).startswith("lib"), site
    # A clean interpreter with only the installed copy on its path, run from
    # elsewhere so that nothing of the build tree can be imported.
    code = ("import torch, convbwd, convbwd.torch; "
            "g = convbwd.convolution_backward(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 3, 3), torch.ones(1, 1, 1, 1), "
            "[1], 1, 0, 1, False, 0, 1, [True, True, True]); "
            "print(convbwd.__file__, g[1].item(), g[2].item())")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    path, gw, gb = run.stdout.split()
    assert path.startswith(str(prefix))
    assert float(gw) == 9.0 and float(gb) == 9.0  # 9 ones summed
