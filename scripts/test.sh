#!/usr/bin/env bash
# Builds everything and runs every test: the unit and property tests (on each
# ISA path this CPU has), the Python package's tests, then the sanitizer
# and fuzzing steps if present. build/ is configured with the tests on
# (scripts/run.sh leaves them off), and every ctest call fails when it finds
# no test rather than passing silently.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVBWD_WERROR=ON -DCONVBWD_BUILD_TESTS=ON -DCONVBWD_BUILD_PYTHON=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error
# The Python package, imported from the build tree by Debian's interpreter
# (the one with Debian's PyTorch). pytest exits 5 when it collects nothing,
# which must fail the run as loudly as a failing test.
echo "== Python tests"
rc=0
PYTHONPATH="$PWD/build/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 5 ] && echo "scripts/test.sh: pytest collected no tests under python/tests" >&2
  exit "$rc"
fi
# Every other tier this machine runs, natively or emulated (SIMDe), forced
# through the environment: the list comes from the build, so a rerun that
# would run the default code again is not made and a new tier joins itself.
build/tests/convbwd_rerun_tiers > build/rerun_tiers.txt
while read -r tier_env; do
  echo "== tests with $tier_env"
  env $tier_env ctest --test-dir build -j "$jobs" --output-on-failure --no-tests=error -L isa < /dev/null
done < build/rerun_tiers.txt
for step in scripts/sanitize.sh scripts/fuzz.sh; do
  if [ -x "$step" ]; then echo "== $step"; "$step"; fi
done
echo "scripts/test.sh: all steps passed"
