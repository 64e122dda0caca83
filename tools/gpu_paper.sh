#!/usr/bin/env bash
# gpu_paper.sh — one paper-scale run (docs/results.md, "Paper scale") on a lent GPU, in one call.
#
#   tools/gpu_paper.sh OUT RECIPE [--set key=value ...]
#
# Runs `gflow train RECIPE --set run.device=cuda [--set ...]` with the pack's build
# (tools/gpu_pack.sh; carry .gpu/pack.tar.xz; with GFLOW set, that gflow instead: the test,
# tests/tools/test_gpu_paper.sh, runs a tiny recipe on the CPU so), then packs what the results
# need into OUT/RUN.tar.gz (metrics.tsv, summary.tsv, recipe.ini, speed.tsv, train.log: the checkpoints,
# ~150 MB, cannot come back) and OUT/RUN.log (device, driver, build). A run that is stopped
# (timeout, SIGTERM) keeps its last.ckpt on that machine: calling again with the same arguments
# on the still-warm machine resumes it. GF_PAPER_LIMIT=SECONDS stops the run (SIGTERM, so it
# checkpoints) after that long, leaving the call time to pack what it has. One run per call: a
# 30-epoch paper run is ~4.5 min alone on an H200 (two at once share the GPU and take as long as one after the other).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: tools/gpu_paper.sh OUT RECIPE [--set key=value ...]" >&2; exit 2; }
OUT=$(realpath -m "$1") RECIPE=$(realpath -m "$2")
shift 2
cd "$(dirname "$0")/.." || exit 1
[ -n "${GFLOW:-}" ] || source tools/gpu_env.sh .gpu || exit 1
mkdir -p "$OUT" || exit 1
# the run's directory, from the resolved recipe (--set run.name / run.out_dir included)
resolved=$($GFLOW info "$RECIPE" "$@" --recipe 2>&1) || { echo "$resolved" >&2; exit 2; }
key() { awk -F' = ' -v k="$1" '/^\[/{s=$0} s=="[run]" && $1==k{print $2; exit}' <<<"$resolved"; }
run=$(key name) outdir=$(key out_dir)
[ -n "$run" ] && [ -n "$outdir" ] || { echo "gpu_paper: no [run] name/out_dir in the resolved $RECIPE" >&2; exit 2; }
log="$OUT/$run.log"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'; $GFLOW --version; date -u; } >"$log" 2>&1
dir=$outdir/$run
if [ -f "$dir/last.ckpt" ] && [ ! -f "$dir/summary.tsv" ]; then
    args=(train --resume "$dir")
else
    args=(train "$RECIPE" --overwrite --set run.device=cuda --set train.log_every=100 "$@")
fi
echo "gflow ${args[*]}" >>"$log"
start=$(date +%s)
${GF_PAPER_LIMIT:+timeout -s TERM $GF_PAPER_LIMIT} $GFLOW "${args[@]}" >"$OUT/$run.out" 2>&1
rc=$?
echo "rc $rc, $(($(date +%s) - start)) s" >>"$log"
tail -4 "$OUT/$run.out" >>"$log"
# the console log beside the run's files (appended to when the call resumed the run)
if [ "${args[1]}" = --resume ]; then cat "$OUT/$run.out" >>"$dir/train.log"; else cp "$OUT/$run.out" "$dir/train.log"; fi 2>/dev/null
files=()
for f in metrics.tsv summary.tsv recipe.ini speed.tsv train.log; do [ -f "$dir/$f" ] && files+=("$run/$f"); done
[ ${#files[@]} -gt 0 ] && tar -C "$outdir" -czf "$OUT/$run.tar.gz" "${files[@]}"
rm -f "$OUT/$run.out"
cat "$log"
[ -f "$dir/summary.tsv" ] && cat "$dir/summary.tsv"
exit $rc
