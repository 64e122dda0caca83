#!/usr/bin/env bash
# test_gpu_check.sh SOURCE_ROOT BUILD_DIR — tools/gpu_check.sh where no GPU is visible (CI): it runs
# to its end, says plainly that there was none (summary.txt: suite cuda FAIL with the probe's
# reason, "NO GPU"), reports nothing as passed but the environment, runs nothing after suite
# cuda, and exits 3; bad options are usage errors (exit 2). Where a GPU (or the emulator) opens
# suite cuda there is nothing to check here: exit 77.
set -uo pipefail
root=$1 build=$(cd "$2" && pwd)
cd "$root" || exit 1
"$build/tests/gf_tests" --suite cuda nothing-matches-this >/dev/null 2>&1
[ $? = 77 ] || { echo "SKIP: suite cuda opens here"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
tools/gpu_check.sh "$tmp/out" --build "$build" --budget 120 >"$tmp/log" 2>&1; rc=$?
check "exit 3 without a GPU (got $rc)" '[ "$rc" = 3 ]'
s="$tmp/out/summary.txt"
check "summary.txt written" '[ -s "$s" ]'
check "summary says NO GPU" 'grep -q "^NO GPU: the CUDA backend was not checked" "$s"'
check "suite cuda FAIL with the reason" 'grep -Eq "^suite cuda +FAIL +SKIP cuda: (no CUDA device visible: .+|built without CUDA)" "$s"'
check "nothing but env passed" '[ "$(grep -c " PASS " "$s")" = 1 ] && grep -q "^env  *PASS" "$s" && ! grep -q "ALL PASSED" "$s"'
check "nothing ran after suite cuda" '[ "$(ls "$tmp/out" | tr "\n" " ")" = "cuda.log env.txt summary.txt " ]'
tools/gpu_check.sh "$tmp/o2" --nope >/dev/null 2>&1; rc=$?
check "unknown option: exit 2 (got $rc)" '[ "$rc" = 2 ]'
tools/gpu_check.sh "$tmp/o3" --budget 1x >/dev/null 2>&1; rc=$?
check "--budget 1x: exit 2 (got $rc)" '[ "$rc" = 2 ]'
tools/gpu_check.sh "$tmp/o4" --build "$tmp/none" >/dev/null 2>&1; rc=$?
check "--build without binaries: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || cat "$tmp/log"
exit $fail
