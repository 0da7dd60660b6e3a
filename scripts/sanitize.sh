#!/usr/bin/env bash
# CI's sanitizer step, in build directories of its own:
#   1. the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#      (LeakSanitizer included: every test process must exit leak-free);
#   2. the stream, thread and concurrency tests under ThreadSanitizer.
# Any report fails the step (-fno-sanitize-recover=all, halt_on_error).
#
#   SANITIZE_STEPS="asan" scripts/sanitize.sh   # one half only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
steps=${SANITIZE_STEPS:-asan tsan}
# The >2 GiB test takes minutes under a sanitizer; it runs in the plain build.
export CONVBWD_SKIP_LARGE_TESTS=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [[ " $steps " == *" asan "* ]]; then
  echo "== ASan+UBSan: whole test suite (build-asan)"
  # clang, with the fuzz targets on: scripts/fuzz.sh reuses this build. The C
  # example links with clang, whose UBSan runtime for C lacks the C++ parts
  # (vptr checks) the library needs: -fsanitize-link-c++-runtime and
  # -lstdc++ add them (checked: example_c_api_smoke then links and passes).
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCONVBWD_SANITIZE=address,undefined -DCONVBWD_FUZZ=ON -DCONVBWD_BUILD_BENCH=OFF -DCONVBWD_BUILD_PYTHON=OFF \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize-link-c++-runtime -lstdc++" >/dev/null
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:check_initialization_order=1:detect_stack_use_after_return=1} \
    ctest --test-dir build-asan -j "$jobs" --output-on-failure --no-tests=error
fi

if [[ " $steps " == *" tsan "* ]]; then
  echo "== TSan: stream, thread and concurrency tests (build-tsan)"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONVBWD_SANITIZE=thread \
    -DCONVBWD_BUILD_BENCH=OFF -DCONVBWD_BUILD_TOOLS=OFF -DCONVBWD_BUILD_EXAMPLES=OFF -DCONVBWD_BUILD_PYTHON=OFF >/dev/null
  # The executables whose tests start threads or streams; each runs the
  # filter's tests only (the rest is single-threaded and covered by ASan).
  declare -A filters=(
    [capi_stream_test]='*'
    [capi_event_test]='*'
    [reliability_concurrency_test]='*'
    [runtime_thread_pool_test]='*'
    [reliability_determinism_test]='*CApi*'  # the full matrix takes minutes under TSan; thread counts are in property_test
    [capi_conv_backward_test]='*Stream*:*Executor*:*Synchronize*'
    [property_test]='*ThreadCount*'
    [impl_gemm_test]='*ChosenByThePlan*:*Groups*'
    [impl_depthwise_test]='*ThreadCount*'
  )
  targets=()
  for t in "${!filters[@]}"; do
    [ -f "tests/$t.cpp" ] && targets+=("$t")
  done
  cmake --build build-tsan -j "$jobs" --target "${targets[@]}"
  for t in "${targets[@]}"; do
    echo "-- $t (${filters[$t]})"
    TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
      "build-tsan/tests/$t" --gtest_filter="${filters[$t]}" --gtest_brief=1
  done
fi
echo "scripts/sanitize.sh: $steps passed"
