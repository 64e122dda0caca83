#!/usr/bin/env bash
# tools/bench.sh — gflow vs PyTorch on the same model, batch and threads, back to back in ONE run
# (both see the same machine load), repeated; prints both sides' fields and the ratios.
#   tools/bench.sh [RECIPE] [options]
#     --threads T (2)  --batch B / --seq-len L (recipe's)  --reps N (2)
#     --steps N (gflow, 5)  --torch-steps N (3)  --warmup W (2)  --set k=v (both sides)
#     --native         also run gflow with OPENBLAS_CORETYPE unset (OpenBLAS's native kernel)
#     --ranks N        run gflow as N MPI ranks on this host (mpirun -np N), T/N threads each;
#                      its tokens/s are the job's, its peak RSS the sum over ranks
#   env BUILD (build) picks the build dir holding ./gflow.
# OMP_WAIT_POLICY defaults to passive and OPENBLAS_THREAD_TIMEOUT to 4 for BOTH sides (export to override):
# on this 2-core machine spinning OpenMP workers fight OpenBLAS's own threads and other jobs
# (docs/performance.md, "Threads").
set -uo pipefail
cd "$(dirname "$0")/.."
recipe=recipes/wikitext2.ini
threads=2 reps=2 steps=5 tsteps=3 warmup=2 native=0 ranks=1
extra=()
[ $# -gt 0 ] && [ "${1#-}" = "$1" ] && { recipe=$1; shift; }
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --torch-steps) tsteps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --batch|--seq-len|--set) extra+=("$1" "$2"); shift 2 ;;
    --native) native=1; shift ;;
    --ranks) ranks=$2; shift 2 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# gflow sets OPENBLAS_THREAD_TIMEOUT=4 for itself when unset (src/cli/main.c); PyTorch's OpenBLAS
# gets the same so that neither side spins after its GEMMs
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
gflow=${BUILD:-build}/gflow
[ -x "$gflow" ] || { echo "bench.sh: $gflow not built (ninja -C ${BUILD:-build})" >&2; exit 1; }
launch=()
gthreads=$threads
if [ "$ranks" -gt 1 ]; then
  launch=(mpirun -np "$ranks" --bind-to none)
  [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
  gthreads=$(( threads / ranks > 0 ? threads / ranks : 1 ))
fi
field() { grep -E "^$1: " | head -1 | sed -E "s/^$1: ([0-9.eE+-]+).*/\1/"; }

echo "# bench.sh $recipe threads=$threads ranks=$ranks ${extra[*]:-} | $(date -u +%FT%TZ) | $(nproc) cores | load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# env: ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-<unset>} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-<unset>} OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT"
for ((r = 1; r <= reps; r++)); do
  echo "## rep $r (load before: $(cut -d' ' -f1 /proc/loadavg))"
  g=$("${launch[@]}" "$gflow" bench "$recipe" --threads "$gthreads" --steps "$steps" --warmup "$warmup" "${extra[@]}") || exit 1
  echo "$g" | sed 's/^/gflow  | /'
  if [ "$native" = 1 ]; then
    gn=$(env -u OPENBLAS_CORETYPE "$gflow" bench "$recipe" --threads "$threads" --steps "$steps" --warmup "$warmup" "${extra[@]}") || exit 1
    echo "$gn" | grep -E "tokens_per_s|mfu_pct|sgemm_peak|ms_per_step" | sed 's/^/gflow(native blas) | /'
  fi
  t=$(/usr/bin/python3 tools/bench_torch.py "$recipe" --threads "$threads" --steps "$tsteps" --warmup "$warmup" "${extra[@]}") || exit 1
  echo "$t" | sed 's/^/torch  | /'
  gt=$(echo "$g" | field tokens_per_s) tt=$(echo "$t" | field tokens_per_s)
  gr=$(echo "$g" | field peak_rss_mb) tr=$(echo "$t" | field peak_rss_mb)
  gm=$(echo "$g" | field mfu_pct) tm=$(echo "$t" | field mfu_pct)
  awk -v gt="$gt" -v tt="$tt" -v gr="$gr" -v tr="$tr" -v gm="$gm" -v tm="$tm" -v r="$r" 'BEGIN {
    printf "RESULT rep %d: tokens/s gflow %.1f torch %.1f ratio %.2fx | MFU gflow %.1f%% torch %.1f%% | peak RSS gflow %.0f MB torch %.0f MB ratio %.3f\n",
      r, gt, tt, gt / tt, gm, tm, gr, tr, gr / tr }'
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
