#!/usr/bin/env bash
# tools/gpu_many.sh — how many runs at once pay on one GPU: aggregate tokens/s of N concurrent
# `gflow bench` processes of the paper's GrassmannLM, N = 1, 2, 4, 8, without and with the CUDA
# MPS daemon, in one device call (issue 45; the study tool runs that many at once).
#
#   tools/gpu_many.sh OUTDIR [--pack FILE] [--recipe R] [--steps S] [--warmup W] [--ns "1 2 4 8"]
#                            [--budget SECONDS] [--device cuda|cpu] [--no-mps] [--set key=value]...
#     --pack FILE   tools/gpu_pack.sh's archive (default .gpu/pack.tar.xz; with GFLOW set, that
#                   gflow instead: the test, tests/tools/test_gpu_many.sh, runs it so on the CPU)
#     --recipe R    default recipes/wikitext2.ini (the paper's GrassmannLM, 4,096 tokens a step)
#     --steps S     steps each process queues as `gflow train` does (default 150; --warmup 10)
#     --budget S    wall seconds for everything (default 220): a configuration that no longer fits
#                   is NOT REACHED, never guessed
#     --device D    cuda (default); cpu only for the test
#     --no-mps      only the runs without MPS
#
# Each configuration starts N processes together and waits for all. Two aggregates, both in the
# table: "sum", the processes' own queued tokens/s added up (each times only its own queued steps,
# so it is right when their timed steps overlap, which the table's "overlap" column checks: the
# shortest process's wall over the longest's); "wall", every step's tokens (the warm-up, the timed
# and, on a GPU, the queued steps) of all N over the wall time from the first start to the last
# end, start-up included (a lower bound). "speed-up" is sum over
# N = 1's. MPS: `nvidia-cuda-mps-control -d` with its pipe and log directories under OUTDIR's
# temporary folder (nothing global is touched; it is shut down with `quit`); when it cannot start,
# the table says so and why.
# Files: OUTDIR/many.log (every command and its output), OUTDIR/many.md (the table).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

out="" packf=.gpu/pack.tar.xz recipe=recipes/wikitext2.ini steps=150 warmup=10 ns="1 2 4 8" budget=220
device=cuda mps=1 sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --pack) packf=${2:?--pack needs a file}; shift 2 ;;
    --recipe) recipe=${2:?--recipe needs a file}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --ns) ns=${2:?}; shift 2 ;;
    --budget) budget=${2:?}; shift 2 ;;
    --device) device=${2:?}; shift 2 ;;
    --no-mps) mps=0; shift ;;
    --set) sets+=(--set "${2:?--set needs key=value}"); shift 2 ;;
    -h|--help) usage ;;
    -*) echo "gpu_many: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || { echo "gpu_many: one OUTDIR only" >&2; usage; }; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
for v in "$steps" "$warmup" "$budget"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "gpu_many: --steps, --warmup and --budget take whole numbers (got '$v')" >&2; exit 2; }
done
[ "$steps" -ge 1 ] || { echo "gpu_many: --steps must be at least 1" >&2; exit 2; }
for n in $ns; do [[ "$n" =~ ^[1-9][0-9]?$ ]] || { echo "gpu_many: --ns takes counts 1-99 (got '$n')" >&2; exit 2; }; done
case $device in cuda|cpu) ;; *) echo "gpu_many: --device cuda or cpu (got '$device')" >&2; exit 2 ;; esac
[ -f "$recipe" ] || { echo "gpu_many: $recipe: no such recipe" >&2; exit 2; }
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -n "${GFLOW:-}" ] || source tools/gpu_env.sh "$(dirname "$packf")" || exit 1
T0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - T0) )); }
log=$out/many.log tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'
  "$GFLOW" --version; } >"$log" 2>&1
rows=() one=""

# config MODE N: N processes at once; appends a table row
config() {
  local mode=$1 n=$2 i cap s0 s1 res total=$((warmup + steps))
  [ "$device" = cuda ] && total=$((warmup + 2 * steps))   # bench on a GPU also queues --steps more
  cap=$(( $(left) - 10 ))
  if [ "$cap" -lt 20 ]; then rows+=("| $mode | $n | NOT REACHED (out of time) | | | | |"); return; fi
  echo "=== $mode, $n at once (at most $cap s each)" >>"$log"
  s0=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do
    ( a=$(date +%s.%N)
      timeout -k 5 "$cap" "$GFLOW" bench "$recipe" --set run.device="$device" --steps "$steps" --warmup "$warmup" \
        --peak-n 0 --no-profile "${sets[@]}" >"$tmp/$mode-$n-$i.out" 2>&1
      echo "exit $? wall $a $(date +%s.%N)" >>"$tmp/$mode-$n-$i.out" ) &
  done
  wait
  s1=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do { echo "--- process $i"; cat "$tmp/$mode-$n-$i.out"; } >>"$log"; done
  # per process: queued tokens/s (the CPU has none: its timed tokens/s), tokens a step (B L), wall
  res=$(for ((i = 0; i < n; i++)); do cat "$tmp/$mode-$n-$i.out"; echo "--"; done |
    awk -v n="$n" -v steps="$total" -v s0="$s0" -v s1="$s1" -v one="$one" '
      /^bench: / { for (k = 1; k <= NF; k++) { if ($k ~ /^L=/) L = substr($k, 3); if ($k ~ /^B=/) B = substr($k, 3) } }
      /^tokens_per_s:/ { t = $2 } /^queued_tokens_per_s:/ { q = $2 }
      /^exit 0 wall / { w = $5 - $4 }
      /^--$/ { r = (q != "" ? q : t); if (r != "" && w != "") { ok++; sum += r; if (mn == "" || w < mn) mn = w; if (w > mx) mx = w }
               q = ""; t = ""; w = "" }
      END { if (ok != n) { printf "FAILED %d\n", ok; exit }
            wall = s1 - s0; agg = n * steps * B * L / wall
            printf "%.0f|%.0f|%s|%.2f|%.1f\n", sum, agg, (one != "" ? sprintf("%.2f×", sum / one) : (n == 1 ? "1.00×" : "-")), mn / mx, wall }')
  if [[ "$res" == FAILED* ]]; then
    rows+=("| $mode | $n | FAILED: ${res#FAILED } of $n finished (many.log) | | | | |"); return
  fi
  [ "$n" = 1 ] && [ "$mode" = "no MPS" ] && one=${res%%|*}
  rows+=("| $mode | $n | ${res//|/ | } |")
}

for n in $ns; do config "no MPS" "$n"; done
if [ "$mps" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    rows+=("| MPS | - | not run: nvidia-cuda-mps-control is not on PATH | | | | |")
  elif ! msg=$(nvidia-cuda-mps-control -d 2>&1); then
    rows+=("| MPS | - | not run: the daemon did not start: $(echo "$msg" | tr '\n|' ' /') | | | | |")
  else
    echo "=== MPS daemon started ($CUDA_MPS_PIPE_DIRECTORY)" >>"$log"
    for n in $ns; do config MPS "$n"; done
    echo quit | nvidia-cuda-mps-control >>"$log" 2>&1
    cat "$CUDA_MPS_LOG_DIRECTORY"/control.log >>"$log" 2>/dev/null
  fi
fi
{
  echo "# Runs at once on one GPU ($(date -u +%F), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "device $device"))"
  echo
  echo "\`tools/gpu_many.sh OUT --recipe $recipe --steps $steps --warmup $warmup${sets[*]:+ ${sets[*]}}\`: $(basename "$recipe"), device $device."
  echo
  echo "| MPS | runs at once | tokens/s, sum | tokens/s, wall | speed-up (sum over one run) | overlap | wall s |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} >"$out/many.md"
cat "$out/many.md"
