#!/usr/bin/env bash
# CI's fuzzing step: builds the libFuzzer targets of tests/fuzz/ with clang
# under AddressSanitizer + UndefinedBehaviorSanitizer (coverage-instrumented
# library included) in their own build directory, runs each for FUZZ_SECONDS
# (default 60), and fails on any crash, sanitizer report, leak, timeout or
# broken promise. Every target's execution count is printed.
#
#   FUZZ_SECONDS=600 scripts/fuzz.sh          # longer runs
#   FUZZ_TARGETS="capi" scripts/fuzz.sh       # a subset
#   FUZZ_SEED=0 scripts/fuzz.sh               # a random seed (new ground each run)
#
# CI uses a fixed seed (1): libFuzzer then tries the same inputs in the same
# order every run, so a slower machine explores a prefix of what a passing
# run here explored, and a red CI always means a reproducible finding rather
# than the luck of the draw. Longer, random campaigns find new ground.
#
# New interesting inputs go to $build/fuzz-work/<target>/corpus (not into the
# repository). A crash leaves its input in $build/fuzz-work/<target>/; after
# the fix, copy it into tests/fuzz/regressions/<target>/ so that
# fuzz_replay_test replays it on every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
seed=${FUZZ_SEED:-1}
# The same build directory and options as the ASan step of
# scripts/sanitize.sh: clang, ASan+UBSan, fuzz targets on. CI builds it once.
build=${FUZZ_BUILD_DIR:-build-asan}
targets=${FUZZ_TARGETS:-capi descriptor plan npy}
if [ ! -f tools/convbwd/npy.cpp ]; then targets=${targets//npy/}; fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCONVBWD_SANITIZE=address,undefined -DCONVBWD_FUZZ=ON -DCONVBWD_BUILD_BENCH=OFF -DCONVBWD_BUILD_PYTHON=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize-link-c++-runtime -lstdc++" >/dev/null
bins=()
for t in $targets; do bins+=("fuzz_$t"); done
cmake --build "$build" -j "$(nproc)" --target "${bins[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
summary=""
for t in $targets; do
  work="$build/fuzz-work/$t"
  mkdir -p "$work/corpus"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  echo "== fuzz_$t for ${seconds}s"
  set +e
  "$build/tests/fuzz/fuzz_$t" "$work/corpus" "tests/fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -seed="$seed" -timeout=20 -rss_limit_mb=3072 -max_len=4096 \
    -artifact_prefix="$work/" -print_final_stats=1 >"$work/log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || echo "?")
  if [ $rc -ne 0 ]; then
    echo "fuzz_$t FAILED (exit $rc) after $execs executions; input and log in $work/:"
    grep -E "convbwd fuzz failure|ERROR: |runtime error|SUMMARY" "$work/log" | head -20 || true
    # The input itself, so that CI's log alone reproduces the finding:
    # printf '%s' <base64> | base64 -d > input && $build/tests/fuzz/fuzz_<target> input
    for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
      [ -f "$f" ] || continue
      echo "$f ($(wc -c <"$f") bytes), base64: $(head -c 3000 "$f" | base64 -w0)"
    done
    status=1
  else
    echo "fuzz_$t: $execs executions, no failure"
  fi
  summary+="fuzz_$t: $execs executions in ${seconds}s, exit $rc"$'\n'
done
printf '%s' "$summary"
exit $status
