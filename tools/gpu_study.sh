#!/usr/bin/env bash
# tools/gpu_study.sh — the paper study's next runs on a lent GPU, as many as fit in one call
# (issue 46; docs/results.md "Paper scale").
#
#   tools/gpu_study.sh OUT FILE... [--budget S] [--at-once N] [--results DIR] [--dry-run] [--set k=v]...
#
# FILE...: gflow ablation files (recipes/ablations/paper-*.ini), in the study's order. Their runs,
# in order: per file the implicit variant "base" first, then each [variant], each seed of the
# file's `seeds` list (variant-major, as `gflow ablate` orders them). A run is named
# <ablation name>-<variant>[-seed<N>] and is `gflow train <base> --set <the variant's keys>` (what
# `gflow ablate` runs) through tools/gpu_paper.sh on the GPU.
#   --results DIR  the committed run files (default docs/results/paper): a run is done, and
#                  skipped, when a DIR/*/recipe.ini resolves (by this gflow, defaults filled in) to
#                  the same recipe as the run's, whatever its name, directory, device, threads,
#                  CUDA graphs or token cache folder. So a later call, on another machine, runs
#                  the next runs.
#   --budget S     wall seconds for everything (default 540). Each run gets the time left less
#                  90 s (GF_PAPER_LIMIT: a run stopped so keeps last.ckpt, and the next call on the
#                  still-warm machine resumes it); no run starts with less than 120 s left.
#   --at-once N    runs trained together on the GPU (default 1; tools/gpu_many.sh measures what pays)
#   --repro S      seconds of training for the build check (default 30; 0: none). Every run of a
#                  table comes from one build, or the newer build reproduces a committed run's
#                  metrics.tsv byte for byte (issue 46): when a done run's <run>.log names another
#                  build than this gflow's, the first such run's recipe is trained here for S
#                  seconds first and its metrics.tsv compared with the committed one's first lines.
#                  Identical: the done runs stay done, and study.txt records it. Different: every
#                  done run of another build, or of none named, is run again (this build's rows
#                  replace them).
#   --dry-run      print the plan (done, with the committed run that holds it and its build, or to
#                  run) and exit
#   --set k=v      passed to every run (the test: run.device=cpu)
# A finished run's best checkpoint is probed where it lies (`gflow probe curvature` and `pca`:
# the checkpoint cannot come back), and its files and the probes' tables are packed. Two files
# come back whatever the number of runs: OUT/study.tar.gz (per run: metrics.tsv, summary.tsv,
# recipe.ini, speed.tsv, train.log, probe-*.tsv, and its <run>.log: device, build, command, exit)
# and OUT/study.txt (the plan and what each run reached). Unpack with
#   tar -C docs/results/paper -xzf OUT/study.tar.gz
# Exit 0 when every run started here finished, 1 when one failed or stopped, 2 for bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

out="" files=() budget=540 atonce=1 results=docs/results/paper dry=0 sets=() repro=30
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --at-once) atonce=${2:?--at-once needs a count}; shift 2 ;;
    --results) results=${2:?--results needs a directory}; shift 2 ;;
    --repro) repro=${2:?--repro needs seconds}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --set) sets+=(--set "${2:?--set needs key=value}"); shift 2 ;;
    -h|--help) usage ;;
    -*) echo "gpu_study: unknown option $1" >&2; usage ;;
    *) if [ -z "$out" ]; then out=$1; else files+=("$1"); fi; shift ;;
  esac
done
[ -n "$out" ] && [ ${#files[@]} -gt 0 ] || usage
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_study: --budget takes whole seconds (got '$budget')" >&2; exit 2; }
[[ "$repro" =~ ^[0-9]+$ ]] || { echo "gpu_study: --repro takes whole seconds (got '$repro')" >&2; exit 2; }
[[ "$atonce" =~ ^[1-9]$ ]] || { echo "gpu_study: --at-once takes 1 to 9 (got '$atonce')" >&2; exit 2; }
for f in "${files[@]}"; do [ -f "$f" ] || { echo "gpu_study: $f: no such ablation file" >&2; exit 2; }; done
[ -n "${GFLOW:-}" ] || source tools/gpu_env.sh .gpu || exit 1
T0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - T0) )); }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# One line per run of an ablation file: "<run name>\t<base recipe>\t<key=value>\t..." (in order)
runs_of() {
  awk -v dir="$(dirname "$1")" -v file="$1" '
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    /^[ \t]*([#;]|$)/ { next }
    /^[ \t]*\[/ { s = trim($0); sec = s; if (s ~ /^\[variant[ \t]/) { v = s; sub(/^\[variant[ \t]+/, "", v); sub(/\]$/, "", v)
                  nv++; vname[nv] = trim(v); nset[nv] = 0 } next }
    { i = index($0, "="); if (!i) { printf "%s: bad line: %s\n", file, $0 > "/dev/stderr"; bad = 1; next }
      k = trim(substr($0, 1, i - 1)); val = trim(substr($0, i + 1))
      if (sec == "[ablation]") a[k] = val
      else if (sec ~ /^\[variant/) set[nv, ++nset[nv]] = k "=" val }
    END { if (bad || a["name"] == "" || a["base"] == "") { if (!bad) printf "%s: no [ablation] name and base\n", file > "/dev/stderr"; exit 1 }
          base = a["base"] ~ /^\// ? a["base"] : dir "/" a["base"]
          ns = split(a["seeds"], seeds, /[ \t]*,[ \t]*/)
          vname[0] = "base"; nset[0] = 0
          for (j = 0; j <= nv; j++) for (q = 1; q <= (ns ? ns : 1); q++) {
            line = a["name"] "-" vname[j] (ns ? "-seed" seeds[q] : "") "\t" base
            for (m = 1; m <= nset[j]; m++) line = line "\t" set[j, m]
            if (ns) line = line "\trun.seed=" seeds[q]
            print line } }' "$1"
}
# The recipe a run resolves to, less what does not make another run (stdin: gflow info --recipe)
canon() {
  awk '/^# resolved gflow recipe/ { on = 1; next } on && !/^(name|out_dir|device|threads|cuda_graph|cache_dir) = /' 
}
run_sets() { local s=() kv; for kv in "$@"; do s+=(--set "$kv"); done; printf '%s\n' "${s[@]}"; }

# the committed runs' recipes, resolved by this gflow
n_done=0
for r in "$results"/*/recipe.ini; do
  [ -f "$r" ] || continue
  "$GFLOW" info "$r" --recipe 2>/dev/null | canon >"$tmp/done.$n_done" && echo "$(dirname "$r")" >"$tmp/done.$n_done.dir" &&
    n_done=$((n_done + 1))
done
plan=() bad=0
for f in "${files[@]}"; do
  lines=$(runs_of "$f") || { bad=1; continue; }
  while IFS=$'\t' read -r -a F; do
    name=${F[0]} base=${F[1]} kv=("${F[@]:2}")
    mapfile -t S < <(run_sets "${kv[@]}" train.log_every=100)
    if ! "$GFLOW" info "$base" --recipe "${S[@]}" >"$tmp/info" 2>&1; then
      echo "gpu_study: $f: run $name: $(tail -1 "$tmp/info")" >&2; bad=1; continue
    fi
    canon <"$tmp/info" >"$tmp/want"
    where=""
    for ((i = 0; i < n_done; i++)); do cmp -s "$tmp/want" "$tmp/done.$i" && { where=$(cat "$tmp/done.$i.dir"); break; }; done
    plan+=("$name"$'\t'"$base"$'\t'"${where:--}"$'\t'"$(IFS=$'\x1f'; echo "${kv[*]}")")
  done <<<"$lines"
done
[ "$bad" = 0 ] || exit 2
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

# ---- the build: a done run's build is the "build:" line of its <run>.log beside its directory ---
this_build=$("$GFLOW" --version 2>/dev/null | sed -n 's/^build: //p' | head -1)
build_of() { sed -n 's/^build: //p' "$(dirname "$1")/$(basename "$1").log" 2>/dev/null | head -1; }
ref=""
for p in "${plan[@]}"; do
  IFS=$'\t' read -r n b w k <<<"$p"
  [ "$w" != - ] && [ -f "$w/metrics.tsv" ] || continue
  bw=$(build_of "$w"); [ -n "$bw" ] && [ "$bw" != "$this_build" ] && { ref=$w; break; }
done
# repro: none (no done run of another build), off (--repro 0), planned (dry run), reproduced,
# differs, unchecked (too few lines to compare)
repro_state=none repro_note=""
if [ -n "$ref" ]; then
  if [ "$repro" = 0 ]; then repro_state=off
  elif [ "$dry" = 1 ]; then repro_state=planned
  else
    GF_PAPER_LIMIT=$repro tools/gpu_paper.sh "$tmp/repro-out" "$ref/recipe.ini" --set run.name=repro-check \
      --set "run.out_dir=$tmp/repro" "${sets[@]}" >"$tmp/repro.console" 2>&1
    new=$tmp/repro/repro-check/metrics.tsv
    nl=$(wc -l <"$new" 2>/dev/null || echo 0)
    if [ "$nl" -lt 3 ]; then repro_state=unchecked repro_note="$nl lines of metrics.tsv in $repro s"
    elif head -n "$nl" "$ref/metrics.tsv" | cmp -s - "$new"; then repro_state=reproduced repro_note="its first $nl lines"
    else
      repro_state=differs
      repro_note=$(head -n "$nl" "$ref/metrics.tsv" | cmp - "$new" 2>&1 | sed -n 's/.*\(line [0-9]*\).*/first at \1/p')
    fi
  fi
fi
# a done run of another build is run again when this build does not reproduce the committed rows
stale() { [ "$repro_state" = differs ] && [ "$(build_of "$1")" != "$this_build" ]; }
{
  echo "gpu_study plan ($(date -u +%FT%TZ)): ${files[*]}; done = a committed run under $results with the same recipe"
  case $repro_state in
    planned) echo "  build check: $ref (build $(build_of "$ref")) trained for $repro s with this build ($this_build) before the runs" ;;
    off) echo "  build check: none (--repro 0): done runs of other builds than $this_build count as done" ;;
    reproduced) echo "  build check: this build ($this_build) reproduces $ref/metrics.tsv (build $(build_of "$ref")), $repro_note, byte for byte: done runs stay done" ;;
    differs) echo "  build check: this build ($this_build) does NOT reproduce $ref/metrics.tsv (build $(build_of "$ref")), $repro_note: done runs of other builds run again" ;;
    unchecked) echo "  build check: NOT CHECKED, $repro_note (--repro $repro too short?): done runs of other builds count as done" ;;
  esac
  for p in "${plan[@]}"; do
    IFS=$'\t' read -r n b w k <<<"$p"
    bw=""; [ "$w" = - ] || bw=$(build_of "$w")
    if [ "$w" = - ]; then what="to run: $b ${k//$'\x1f'/ }"
    elif stale "$w"; then what="to run again: $b ${k//$'\x1f'/ } (done: $w, build ${bw:-unknown})"
    else what="done: $w (build ${bw:-unknown})"; fi
    printf '  %-40s %s\n' "$n" "$what"
  done
} >"$out/study.txt"
cat "$out/study.txt"
[ "$dry" = 1 ] && exit 0

# ---- the runs, N at once, in the plan's order ---------------------------------------------------
pack=$tmp/pack; mkdir -p "$pack"
started=()
rc_all=0
run_one() {  # run_one NAME BASE KV...: gpu_paper.sh, then the probes if it finished
  local name=$1 base=$2; shift 2
  local lim=$(( $(left) - 90 )) S
  mapfile -t S < <(run_sets "$@" "run.name=$name")
  GF_PAPER_LIMIT=$lim tools/gpu_paper.sh "$tmp/runs-out" "$base" "${S[@]}" "${sets[@]}" >"$tmp/$name.console" 2>&1
  local rc=$? dir
  dir=$(awk -F' = ' '/^\[/{s=$0} s=="[run]" && $1=="out_dir"{print $2; exit}' \
        <("$GFLOW" info "$base" --recipe "${S[@]}" "${sets[@]}" 2>/dev/null))/$name
  if [ -f "$dir/summary.tsv" ]; then
    for kind in curvature pca; do
      timeout -k 5 $(( $(left) > 40 ? 40 : 10 )) "$GFLOW" probe "$kind" "$dir" >>"$tmp/$name.console" 2>&1 ||
        echo "probe $kind: rc $?" >>"$tmp/runs-out/$name.log"
    done
  fi
  mkdir -p "$pack/$name"
  for f in metrics.tsv summary.tsv recipe.ini speed.tsv train.log; do [ -f "$dir/$f" ] && cp "$dir/$f" "$pack/$name/"; done
  cp "$dir"/probe-*.tsv "$pack/$name/" 2>/dev/null
  cp "$tmp/runs-out/$name.log" "$pack/$name.log" 2>/dev/null
  echo "rc $rc" >"$tmp/$name.rc"
}
mkdir -p "$tmp/runs-out"
queue=()
for p in "${plan[@]}"; do IFS=$'\t' read -r n b w k <<<"$p"; { [ "$w" = - ] || stale "$w"; } && queue+=("$p"); done
for p in "${queue[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$atonce" ]; do wait -n; done
  [ "$(left)" -ge 120 ] || { echo "  not started (under 120 s left): ${p%%$'\t'*}" >>"$out/study.txt"; continue; }
  IFS=$'\t' read -r n b w k <<<"$p"
  IFS=$'\x1f' read -r -a kv <<<"$k"
  started+=("$n")
  run_one "$n" "$b" "${kv[@]}" &
done
wait
for n in "${started[@]}"; do
  rc=$(cut -d' ' -f2 "$tmp/$n.rc" 2>/dev/null || echo lost)
  state=stopped; [ -f "$pack/$n/summary.tsv" ] && state=finished
  [ "$rc" = 0 ] && [ "$state" = finished ] || rc_all=1
  echo "  $n: $state (rc $rc)$(ls "$pack/$n"/probe-*.tsv >/dev/null 2>&1 && echo ", probed")" >>"$out/study.txt"
done
[ ${#started[@]} -gt 0 ] && tar -C "$pack" -czf "$out/study.tar.gz" .
echo "--- after $(( $(date +%s) - T0 )) s" >>"$out/study.txt"
hdr=1; [ "$repro_state" = none ] || hdr=2
tail -n +$(( ${#plan[@]} + hdr + 1 )) "$out/study.txt"
exit $rc_all
