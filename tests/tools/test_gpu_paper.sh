#!/usr/bin/env bash
# test_gpu_paper.sh SOURCE_ROOT GFLOW — tools/gpu_paper.sh (one paper-scale run per GPU call) on a
# tiny recipe, on the CPU: the run's files come back in OUT/RUN.tar.gz and OUT/RUN.log (device,
# build, command, exit); the run directory follows --set run.name/run.out_dir; GF_PAPER_LIMIT
# stops a run (SIGTERM), its files still come back, and the next call resumes it to its end;
# a bad recipe or a missing argument is exit 2.
set -uo pipefail
# shellcheck source=tests/tools/tiny_lm.sh
source "$1/tests/tools/tiny_lm.sh"
tool_test "$1" "$2"
tiny_lm "$tmp"
cpu=(--set run.device=cpu)
"$root/tools/gpu_paper.sh" "$tmp/out" "$tmp/tiny.ini" "${cpu[@]}" --set run.name=t1 >"$tmp/log1" 2>&1; rc=$?
check "a whole run: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "RUN.log names build, command and exit" 'grep -q "^build: " "$tmp/out/t1.log" && grep -q "^gflow train .*tiny.ini --overwrite --set run.device=cuda" "$tmp/out/t1.log" && grep -q "^rc 0, " "$tmp/out/t1.log"'
check "RUN.tar.gz holds the five files" '[ "$(tar -tzf "$tmp/out/t1.tar.gz" | sort | tr "\n" " ")" = "t1/metrics.tsv t1/recipe.ini t1/speed.tsv t1/summary.tsv t1/train.log " ]'
check "nothing else in OUT" '[ "$(ls "$tmp/out" | tr "\n" " ")" = "t1.log t1.tar.gz " ]'
check "the test row is in the returned metrics" 'tar -xOzf "$tmp/out/t1.tar.gz" t1/metrics.tsv | grep -q "	test	"'
# GF_PAPER_LIMIT: SIGTERM, the run checkpoints, the next call resumes it to the end
GF_PAPER_LIMIT=1 "$root/tools/gpu_paper.sh" "$tmp/out3" "$tmp/tiny.ini" "${cpu[@]}" --set run.name=t3 --set train.epochs=400 >"$tmp/log3" 2>&1
check "a stopped run keeps last.ckpt and no summary" '[ -f "$tmp/runs/t3/last.ckpt" ] && [ ! -f "$tmp/runs/t3/summary.tsv" ]'
check "a stopped run still returns its files" '[ "$(tar -tzf "$tmp/out3/t3.tar.gz" | grep -c "^t3/metrics.tsv$")" = 1 ]'
"$root/tools/gpu_paper.sh" "$tmp/out4" "$tmp/tiny.ini" "${cpu[@]}" --set run.name=t3 --set train.epochs=400 >"$tmp/log4" 2>&1; rc=$?
check "the next call resumes it to the end (exit $rc)" '[ "$rc" = 0 ] && grep -q "^gflow train --resume $tmp/runs/t3\$" "$tmp/out4/t3.log" && [ -f "$tmp/runs/t3/summary.tsv" ]'
check "the resumed run's console log is appended" 'grep -q "^stopped at step" "$tmp/runs/t3/train.log" && grep -q "^done: " "$tmp/runs/t3/train.log"'
"$root/tools/gpu_paper.sh" "$tmp/o5" "$tmp/none.ini" >"$tmp/log5" 2>&1; rc=$?
check "a missing recipe: exit 2 (got $rc)" '[ "$rc" = 2 ] && grep -q "none.ini" "$tmp/log5"'
"$root/tools/gpu_paper.sh" "$tmp/o6" >/dev/null 2>&1; rc=$?
check "no recipe: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || tail -n 20 "$tmp"/log*
exit $fail
