#!/usr/bin/env bash
# Two convbwd CLIs side by side: the way bench/RESULTS.md judges a change on
# a shared, noisy machine. For each descriptor the two sides run alternately
# ALT times (old, new, old, new, ...), each call REP timed runs after one
# warm-up; every call's minimum is kept. Printed per descriptor: each side's
# least minimum and the ratio old/new of those, then the medians of the
# per-call minima and their ratio (> 1: NEW is faster). A change shows in
# both ratios or it is noise: one lone pair of times proves nothing here.
#
#   bench/alternate.sh OLD NEW THREADS DESC...
#   ALT=12 REP=5 bench/alternate.sh /tmp/old/build/tools/convbwd/convbwd \
#       build/tools/convbwd/convbwd 2 mb8ic256ih56oc64kh1_mask100
#
# OLD and NEW may carry environment assignments, so that one binary can be
# compared with itself on two tiers:
#   bench/alternate.sh "CONVBWD_ISA=avx512 build/tools/convbwd/convbwd" \
#       build/tools/convbwd/convbwd 2 mb4g8ic128ih28oc128kh3ph1_dtbf16
# Every call runs a fresh copy of its side's executable (see copy_path below).
# ENVX adds assignments to both sides (e.g. ENVX=GLIBC_TUNABLES=...), CLIX
# options to both CLIs (e.g. CLIX=--cold-cache).
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
old=$1 new=$2 threads=$3
shift 3
# Each call runs a fresh copy of its side's executable, both sides at
# paths of the same length. Where a binary's file lies in memory matters:
# the same binary ran 1.11x faster as a `cp` of itself than as the file the
# linker wrote (dw s2 192@28 fp16, Zen 4, alternated), and two copies of one
# file can differ too, so a comparison of two long-lived files measures their
# placement along with their code. A new copy per call samples placements
# on both sides alike.
copies=$(mktemp -d)
trap 'rm -rf "$copies"' EXIT
# The side's words with its executable (the first word that is not an
# assignment) replaced by $copies/$2/convbwd; the executable's own path is
# kept in $copies/$2/source.
copy_path() {
  local words=() w exe=""
  for w in $1; do
    if [ -z "$exe" ] && [[ $w != *=* ]]; then
      exe=$(command -v "$w") || { echo "bench/alternate.sh: no executable '$w'" >&2; exit 2; }
      mkdir -p "$copies/$2"
      echo "$exe" >"$copies/$2/source"
      w=$copies/$2/convbwd
    fi
    words+=("$w")
  done
  echo "${words[*]}"
}
old=$(copy_path "$old" old)
new=$(copy_path "$new" new)
ALT=${ALT:-8} REP=${REP:-5}
# One call's minimum in ms, or the CLI's complaint on stderr and an exit.
call_min() {
  local out
  cp --remove-destination "$(cat "$copies/$3/source")" "$copies/$3/convbwd"
  # shellcheck disable=SC2086  # the side and ENVX/CLIX are word lists on purpose
  out=$(env ${ENVX:-} $1 --mode=perf --repeats="$REP" --warmup=1 --threads="$threads" ${CLIX:-} "$2" 2>&1) || {
    echo "bench/alternate.sh: '$1 ... $2' failed:" >&2
    echo "$out" >&2
    exit 1
  }
  grep -o 'min [0-9.e+-]* ms' <<<"$out" | head -1 | awk '{print $2}'
}
for desc in "$@"; do
  olds=() news=()
  for _ in $(seq "$ALT"); do
    olds+=("$(call_min "$old" "$desc" old)")
    news+=("$(call_min "$new" "$desc" new)")
  done
  /usr/bin/python3 - "$desc" "${olds[*]}" "${news[*]}" <<'PY'
import statistics, sys
desc, o, n = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
print(f"{desc:45s} min {min(o):9.4f} {min(n):9.4f} {min(o) / min(n):6.3f}   "
      f"median {statistics.median(o):9.4f} {statistics.median(n):9.4f} "
      f"{statistics.median(o) / statistics.median(n):6.3f}")
PY
done
