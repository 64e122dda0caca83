#!/usr/bin/env bash
# test_blas_survey.sh SOURCE_ROOT BUILD_DIR — tools/blas_survey.sh on one small suite: one line per
# kernel and thread count with the suite's counts, "failed anywhere: none", exit 0; a build without
# gf_tests and an unknown option are usage errors (exit 2).
set -uo pipefail
root=$1 build=$(cd "$2" && pwd)
cd "$root" || exit 1
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
out=$(tools/blas_survey.sh "$build" --kernels "Haswell Zen" --threads 1 --suites grad 2>&1); rc=$?
check "exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "one line per kernel" '[ "$(grep -cE "^(Haswell|Zen) +1 threads: +[1-9][0-9]* passed, 0 failed" <<<"$out")" = 2 ]'
check "nothing failed" 'grep -q "^failed anywhere: none$" <<<"$out"'
tools/blas_survey.sh /nonexistent >/dev/null 2>&1; rc=$?
check "no gf_tests: exit 2 (got $rc)" '[ "$rc" = 2 ]'
tools/blas_survey.sh "$build" --nope >/dev/null 2>&1; rc=$?
check "unknown option: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || echo "$out"
exit $fail
