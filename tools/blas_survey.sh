#!/usr/bin/env bash
# tools/blas_survey.sh — which tests depend on the BLAS kernel or the thread count (issue 36).
#
#   tools/blas_survey.sh [BUILD_DIR] [--kernels "Haswell SkylakeX Zen"] [--threads "1 2"] [--suites "unit grad golden data"]
#
# Runs the numeric suites of gf_tests once per OpenBLAS kernel (OPENBLAS_CORETYPE: what OpenBLAS's
# DYNAMIC_ARCH would pick on another processor) and thread count (OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS), and prints one line per combination with its counts and the tests that
# failed in it, then the tests that failed anywhere. A kernel the processor cannot run (AVX-512 on
# a CPU without it) is skipped, and said so. Exit 1 if any test failed in any combination.
# Not part of tools/test.sh (minutes per combination): run it on a new processor.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build kernels="Haswell SkylakeX Zen" threads="1 2" suites="unit grad golden data"
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) kernels=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --suites) suites=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "blas_survey: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
t=$build/tests/gf_tests
[ -x "$t" ] || { echo "blas_survey: $t not built (ninja -C $build)" >&2; exit 2; }
[ -n "${GFLOW_DATA_MIRROR:-}" ] || { [ -d ../shared/datasets ] && export GFLOW_DATA_MIRROR=$(cd ../shared/datasets && pwd); }
export GF_SOURCE_ROOT=$PWD
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), flags with avx512f: $(grep -c avx512f /proc/cpuinfo | head -1)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
all=""
for k in $kernels; do
  if [ "$k" = SkylakeX ] && ! grep -q avx512f /proc/cpuinfo; then echo "$k: skipped (no AVX-512 here)"; continue; fi
  for n in $threads; do
    log=$tmp/$k-$n
    : >"$log"
    for s in $suites; do
      OPENBLAS_CORETYPE=$k OMP_NUM_THREADS=$n OPENBLAS_NUM_THREADS=$n "$t" --suite "$s" >>"$log" 2>&1
    done
    p=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | awk '{p += $1} END {print p + 0}')
    f=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | awk '{f += $3} END {print f + 0}')
    names=$(grep -E '^FAIL ' "$log" | awk '{print $2}' | tr '\n' ' ')
    all="$all $names"
    printf '%-9s %s threads: %4d passed, %d failed %s\n' "$k" "$n" "$p" "$f" "${names:+($names)}"
  done
done
u=$(echo "$all" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
echo "failed anywhere: ${u:-none}"
[ -z "$u" ]
