#!/usr/bin/env bash
# tools/valgrind.sh — run the unit suite (core tests) under valgrind memcheck, leaks included.
#   tools/valgrind.sh [BUILD_DIR] [SUITE]      defaults: build-vg unit
# valgrind cannot run AVX-512 code and meson.build adds -march=native, so the default build
# dir build-vg is configured with -mno-avx512f (appended after -march=native).
# gf_tests forks one child per test; --trace-children=yes follows those forks, and
# --trace-children-skip keeps what tests exec native: the `gflow` binary of the reliability tests
# and system()'s shell with its children (a python3 probe for numpy: ld.so's own strncmp reads
# trip memcheck there, outside gflow). Prints valgrind's error summary and, last,
# "N passed, M failed" (M counts a failed test or any memcheck error/leak as one failure).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-vg}; suite=${2:-unit}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dc_args=-mno-avx512f -Dcpp_args=-mno-avx512f >/dev/null || exit 1
fi
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)"; echo "0 passed, 1 failed"; exit 1; }
ninja -C "$build" >/dev/null || { echo "valgrind: build failed"; echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp -d)
OMP_NUM_THREADS=1 valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --trace-children=yes \
  --trace-children-skip='*/gflow,*/python3*,*/sh,*/bash' --child-silent-after-fork=no --log-file="$log/vg.%p" \
  "$build/tests/gf_tests" --suite "$suite" > "$log/out.txt" 2>&1
rc=$?
tail -n 1 "$log/out.txt"
read -r p f < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log/out.txt" | tail -1 | awk '{print $1, $3}')
errs=$(grep -h 'ERROR SUMMARY' "$log"/vg.* | awk '{s += $4} END {print s + 0}')
leaks=$(grep -h -E 'definitely lost: [1-9]|indirectly lost: [1-9]' "$log"/vg.* | wc -l)
echo "valgrind: $(ls "$log"/vg.* | wc -l) processes, $errs memcheck errors, $leaks with leaks (logs: $log)"
if [ "$errs" != 0 ] || [ "$leaks" != 0 ]; then
  grep -l -E 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]|indirectly lost: [1-9]' "$log"/vg.* | head -5 |
    while read -r l; do echo "--- $l"; grep -A12 -m2 -E 'Invalid|uninitialised|definitely lost in' "$l" | head -30; done
  f=$((${f:-0} + 1))
fi
[ "$rc" != 0 ] && [ "${f:-0}" = 0 ] && f=1
echo "${p:-0} passed, ${f:-1} failed"
[ "${f:-1}" = 0 ]
