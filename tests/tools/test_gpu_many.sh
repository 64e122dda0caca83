#!/usr/bin/env bash
# test_gpu_many.sh SOURCE_ROOT GFLOW — tools/gpu_many.sh (N runs at once on one GPU) on the CPU with
# a tiny recipe: one table row per count with both aggregates, the speed-up over one run and the
# overlap; a process that fails makes its row FAILED (never a number); a configuration past the
# budget is NOT REACHED; bad options are exit 2.
set -uo pipefail
# shellcheck source=tests/tools/tiny_lm.sh
source "$1/tests/tools/tiny_lm.sh"
tool_test "$1" "$2"
tiny_lm "$tmp"
m=(--recipe "$tmp/tiny.ini" --device cpu --no-mps --steps 3 --warmup 1)
"$root/tools/gpu_many.sh" "$tmp/o1" "${m[@]}" --ns "1 2" --budget 120 >"$tmp/log1" 2>&1; rc=$?
t=$tmp/o1/many.md
check "exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "a row for 1 at once, speed-up 1.00x" 'grep -Eq "^\| no MPS \| 1 \| [0-9]+ \| [0-9]+ \| 1\.00× \| 1\.00 \| [0-9.]+ \|$" "$t"'
check "a row for 2 at once, both aggregates, speed-up and overlap" 'grep -Eq "^\| no MPS \| 2 \| [0-9]+ \| [0-9]+ \| [0-9]+\.[0-9]{2}× \| [01]\.[0-9]{2} \| [0-9.]+ \|$" "$t"'
check "the log holds every process's output" '[ "$(grep -c "^--- process" "$tmp/o1/many.log")" = 3 ] && grep -q "^tokens_per_s:" "$tmp/o1/many.log"'
"$root/tools/gpu_many.sh" "$tmp/o2" "${m[@]}" --ns 2 --set model.r=99 >"$tmp/log2" 2>&1
check "a failing process: the row says FAILED" 'grep -q "^| no MPS | 2 | FAILED: 0 of 2 finished" "$tmp/o2/many.md" && ! grep -Eq "\| [0-9]+\.[0-9]{2}× " "$tmp/o2/many.md"'
"$root/tools/gpu_many.sh" "$tmp/o3" "${m[@]}" --ns 1 --budget 25 >"$tmp/log3" 2>&1
check "past the budget: NOT REACHED" 'grep -q "^| no MPS | 1 | NOT REACHED" "$tmp/o3/many.md"'
for bad in "--steps x" "--ns 0" "--device gpu" "--budget -1" "--nope"; do
  # shellcheck disable=SC2086
  "$root/tools/gpu_many.sh" "$tmp/o4" --recipe "$tmp/tiny.ini" $bad >/dev/null 2>&1; rc=$?
  check "$bad: exit 2 (got $rc)" '[ "$rc" = 2 ]'
done
"$root/tools/gpu_many.sh" >/dev/null 2>&1; rc=$?
check "no OUTDIR: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || { cat "$tmp/log1" "$tmp/log2"; }
exit $fail
