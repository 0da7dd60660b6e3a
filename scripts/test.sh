#!/usr/bin/env bash
# Builds everything and runs every test: the unit and property tests (on each
# ISA path this CPU has), then the sanitizer and fuzzing steps if present.
# build/ is configured with the tests on (scripts/run.sh leaves them off), and
# every ctest call fails when it finds no test rather than passing silently.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVBWD_WERROR=ON -DCONVBWD_BUILD_TESTS=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error
# Every lower ISA path, forced through the environment override.
for isa in avx2 scalar; do
  echo "== tests with CONVBWD_ISA=$isa"
  CONVBWD_ISA=$isa ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error -L isa
done
for step in scripts/sanitize.sh scripts/fuzz.sh; do
  if [ -x "$step" ]; then echo "== $step"; "$step"; fi
done
echo "scripts/test.sh: all steps passed"
