#!/usr/bin/env bash
# Builds everything and runs every test: the unit and property tests (on each
# ISA path this CPU has), then the sanitizer and fuzzing steps if present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVBWD_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -j "$jobs" --output-on-failure
# Every other tier this machine runs, natively or emulated (SIMDe), forced
# through the environment: the list comes from the build, so a rerun that
# would run the default code again is not made and a new tier joins itself.
build/tests/convbwd_rerun_tiers > build/rerun_tiers.txt
while read -r tier_env; do
  echo "== tests with $tier_env"
  env $tier_env ctest --test-dir build -j "$jobs" --output-on-failure -L isa < /dev/null
done < build/rerun_tiers.txt
for step in scripts/sanitize.sh scripts/fuzz.sh; do
  if [ -x "$step" ]; then echo "== $step"; "$step"; fi
done
echo "scripts/test.sh: all steps passed"
