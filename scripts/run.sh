#!/usr/bin/env bash
# The main job: build the library and the CLI, then run the CLI's built-in
# default (the CANN 2D sample's problem, checked against the reference and timed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVBWD_BUILD_TESTS=OFF >/dev/null
cmake --build build --target convbwd_cli
build/tools/convbwd/convbwd "$@"
