#!/usr/bin/env bash
# test_gpu_study.sh SOURCE_ROOT GFLOW — tools/gpu_study.sh (the study's next runs in one GPU call) on
# the CPU with tiny ablation files: the plan lists every run in the files' order (base first, then
# the variants, seeds variant-major); a run whose resolved recipe is committed under --results, by
# any name, is done and not run; finished runs come back in study.tar.gz with their probe tables;
# a second call on the results of the first runs nothing; the build check (--repro) keeps a done
# run of another build that this build reproduces byte for byte, and runs one it does not again;
# a bad key is exit 2.
set -uo pipefail
# shellcheck source=tests/tools/tiny_lm.sh
source "$1/tests/tools/tiny_lm.sh"
tool_test "$1" "$2"
tiny_lm "$tmp" 2 1   # two layers: probe curvature needs them
mkdir -p "$tmp/abl"
cat >"$tmp/abl/one.ini" <<INI
# a comment
[ablation]
name = one
base = ../tiny.ini

[variant no-gate]
model.gate = false
INI
cat >"$tmp/abl/two.ini" <<INI
[ablation]
name = two
base = $tmp/tiny.ini
seeds = 2, 3
[variant transformer]
model.family = transformer
INI
cpu=(--set run.device=cpu)
# a committed run of the base recipe under another name and directory: one-base is done
mkdir -p "$tmp/results/old-name"
"$gflow" info "$tmp/tiny.ini" --recipe --set train.log_every=100 --set run.name=old-name --set run.out_dir=/elsewhere |
  sed -n '/^# resolved gflow recipe/,$p' >"$tmp/results/old-name/recipe.ini"
S=("$root/tools/gpu_study.sh")
"${S[@]}" "$tmp/o0" "$tmp/abl/one.ini" "$tmp/abl/two.ini" --results "$tmp/results" --dry-run "${cpu[@]}" >"$tmp/log0" 2>&1; rc=$?
check "dry run: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "the plan in order: base, variants, seeds variant-major" '[ "$(awk "NR > 1 {print \$1}" "$tmp/o0/study.txt" | tr "\n" " ")" = "one-base one-no-gate two-base-seed2 two-base-seed3 two-transformer-seed2 two-transformer-seed3 " ]'
check "a committed run with the same recipe is done" 'grep -q "one-base .*done: $tmp/results/old-name" "$tmp/o0/study.txt"'
check "the others are to run, with their keys" 'grep -q "one-no-gate .*to run: .*model.gate=false" "$tmp/o0/study.txt" && grep -q "two-transformer-seed3 .*model.family=transformer run.seed=3" "$tmp/o0/study.txt"'
check "nothing trained in a dry run" '[ ! -d "$tmp/runs" ] && [ ! -e "$tmp/o0/study.tar.gz" ]'
"${S[@]}" "$tmp/o1" "$tmp/abl/one.ini" --results "$tmp/results" --budget 400 --at-once 1 "${cpu[@]}" >"$tmp/log1" 2>&1; rc=$?
check "a call: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "two files back" '[ "$(ls "$tmp/o1" | tr "\n" " ")" = "study.tar.gz study.txt " ]'
check "the run finished and was probed" 'grep -q "one-no-gate: finished (rc 0), probed" "$tmp/o1/study.txt"'
check "the done run was not trained" '[ ! -d "$tmp/runs/one-base" ]'
tar -tzf "$tmp/o1/study.tar.gz" | sort >"$tmp/list"
check "study.tar.gz: the run's files, probe tables and log" 'grep -q "^./one-no-gate/metrics.tsv$" "$tmp/list" && grep -q "^./one-no-gate/recipe.ini$" "$tmp/list" && grep -q "^./one-no-gate/probe-curvature.tsv$" "$tmp/list" && grep -q "^./one-no-gate/probe-pca.tsv$" "$tmp/list" && grep -q "^./one-no-gate.log$" "$tmp/list"'
tar -C "$tmp/results" -xzf "$tmp/o1/study.tar.gz"
"${S[@]}" "$tmp/o2" "$tmp/abl/one.ini" --results "$tmp/results" --dry-run "${cpu[@]}" >"$tmp/log2" 2>&1
check "unpacked results: the next call has nothing to run" '! grep -q "to run" "$tmp/o2/study.txt" && grep -q "one-no-gate .*done: $tmp/results/one-no-gate" "$tmp/o2/study.txt"'
# the build check: one-no-gate's log names another build; this build reproduces its metrics.tsv
sed -i 's/^build: .*/build: 0123456789ab/' "$tmp/results/one-no-gate.log"
"${S[@]}" "$tmp/o6" "$tmp/abl/one.ini" --results "$tmp/results" --dry-run "${cpu[@]}" >"$tmp/log6" 2>&1
check "dry run: the build check is planned, the done run's build named" 'grep -q "build check: $tmp/results/one-no-gate (build 0123456789ab) trained for 30 s" "$tmp/o6/study.txt" && grep -q "one-no-gate .*done: .* (build 0123456789ab)" "$tmp/o6/study.txt"'
"${S[@]}" "$tmp/o7" "$tmp/abl/one.ini" --results "$tmp/results" --budget 400 "${cpu[@]}" >"$tmp/log7" 2>&1; rc=$?
check "another build that reproduces the committed run: recorded, nothing run again (got $rc)" '[ "$rc" = 0 ] && grep -q "reproduces $tmp/results/one-no-gate/metrics.tsv (build 0123456789ab), its first [0-9]* lines, byte for byte" "$tmp/o7/study.txt" && ! grep -q "to run" "$tmp/o7/study.txt" && [ ! -e "$tmp/o7/study.tar.gz" ]'
# one loss changed in the committed file: as if it came from a build with other numerics
cp "$tmp/results/one-no-gate/metrics.tsv" "$tmp/metrics.keep"
awk -F'\t' -v OFS='\t' 'NR == 5 {$4 = $4 + 0.5} {print}' "$tmp/metrics.keep" >"$tmp/results/one-no-gate/metrics.tsv"
"${S[@]}" "$tmp/o8" "$tmp/abl/one.ini" --results "$tmp/results" --budget 400 "${cpu[@]}" >"$tmp/log8" 2>&1; rc=$?
check "a build that does not reproduce it: said, with the line, and the run trained again (got $rc)" '[ "$rc" = 0 ] && grep -q "does NOT reproduce $tmp/results/one-no-gate/metrics.tsv (build 0123456789ab), first at line 5" "$tmp/o8/study.txt" && grep -q "one-no-gate .*to run again: .*model.gate=false (done: $tmp/results/one-no-gate, build 0123456789ab)" "$tmp/o8/study.txt" && grep -q "one-no-gate: finished (rc 0)" "$tmp/o8/study.txt"'
check "... and a done run whose build no log names, too" 'grep -q "one-base .*to run again: .*(done: $tmp/results/old-name, build unknown)" "$tmp/o8/study.txt" && grep -q "one-base: finished (rc 0)" "$tmp/o8/study.txt"'
check "the run trained again: this build's rows, identical to the untouched file" 'tar -xzOf "$tmp/o8/study.tar.gz" ./one-no-gate/metrics.tsv | cmp -s - "$tmp/metrics.keep"'
"${S[@]}" "$tmp/o9" "$tmp/abl/one.ini" --results "$tmp/results" --repro 0 --dry-run "${cpu[@]}" >"$tmp/log9" 2>&1
check "--repro 0: no check, said so" 'grep -q "build check: none (--repro 0)" "$tmp/o9/study.txt" && ! grep -q "to run" "$tmp/o9/study.txt"'
"${S[@]}" "$tmp/o9" "$tmp/abl/one.ini" --repro 1.5 --dry-run >/dev/null 2>&1; rc=$?
check "--repro 1.5: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"${S[@]}" "$tmp/o5" "$tmp/abl/two.ini" --results "$tmp/results" --budget 400 --at-once 2 "${cpu[@]}" >"$tmp/log5" 2>&1; rc=$?
check "two at once: all four runs finished, reported in order (got $rc)" '[ "$rc" = 0 ] && [ "$(grep -c ": finished (rc 0), probed" "$tmp/o5/study.txt")" = 4 ] && [ "$(grep ": finished" "$tmp/o5/study.txt" | awk "{print \$1}" | tr "\n" " ")" = "two-base-seed2: two-base-seed3: two-transformer-seed2: two-transformer-seed3: " ]'
printf '[ablation]\nname = bad\nbase = ../tiny.ini\n[variant x]\nmodel.nope = 1\n' >"$tmp/abl/bad.ini"
"${S[@]}" "$tmp/o3" "$tmp/abl/bad.ini" --dry-run "${cpu[@]}" >"$tmp/log3" 2>&1; rc=$?
check "a bad key: exit 2 naming the run (got $rc)" '[ "$rc" = 2 ] && grep -q "bad-x" "$tmp/log3"'
"${S[@]}" "$tmp/o4" >/dev/null 2>&1; rc=$?
check "no ablation file: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"${S[@]}" "$tmp/o4" "$tmp/abl/one.ini" --at-once 0 >/dev/null 2>&1; rc=$?
check "--at-once 0: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || cat "$tmp/log0" "$tmp/log1" "$tmp"/o*/study.txt
exit $fail
