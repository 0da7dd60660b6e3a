#!/usr/bin/env bash
# Creates bench/.venv, a virtual environment of the benchmark's own holding
# the PyTorch a user installs today (the current 2.x from PyPI) and NumPy, so
# that bench/run.py can compare convbwd with it as well as with Debian's
# python3-torch (1.13). Idempotent: an existing environment is upgraded in
# place. PyPI's Linux wheel of torch depends on the CUDA runtime packages
# (nvidia-*, cuda-toolkit, triton: 5.4 GB installed, 4.5 minutes on the
# development machine). They are installed as pip resolves them, because that
# is the PyTorch people run; no GPU is needed: without one, torch runs its CPU
# (oneDNN) kernels.
#
#   scripts/bench_venv.sh                     # bench/.venv from /usr/bin/python3
#   PYTHON=python3.12 VENV=/tmp/v scripts/bench_venv.sh
#   /usr/bin/python3 bench/run.py --torch-python bench/.venv/bin/python ...
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
VENV=${VENV:-bench/.venv}
# Debian splits venv out of python3.
if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade --quiet pip
"$VENV/bin/python" -m pip install --upgrade torch numpy
"$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "oneDNN", torch.backends.mkldnn.is_available())'
