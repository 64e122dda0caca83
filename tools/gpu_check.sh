#!/usr/bin/env bash
# tools/gpu_check.sh — the one device call that verifies the CUDA backend on a GPU (issue 31,
# docs/cuda.md "First thing on a GPU"). Here, first: tools/gpu_pack.sh. Then, on the lent GPU:
#
#   run(command="tools/gpu_check.sh $OUT", carry=[".gpu/pack.tar.xz"], timeout_s=540)
#
#   tools/gpu_check.sh OUTDIR [--pack FILE | --build DIR] [--budget S]
#     --pack FILE   the archive of tools/gpu_pack.sh (default .gpu/pack.tar.xz), unpacked and put
#                   in the environment by tools/gpu_env.sh
#     --build DIR   use a meson build directory instead (DIR/gflow, DIR/tests/gf_tests; the
#                   datasets from $GFLOW_DATA_MIRROR): how CI runs the no-GPU path
#     --budget S    wall seconds for everything (default 480): each step is capped so the whole
#                   fits; a step that no longer fits is reported NOT REACHED, never as passed
#
# In order, each step's output in one file under OUTDIR (8 files at most come back):
#   env.txt        nvidia-smi (GPU, driver), gflow --version, compute-sanitizer --version
#   cuda.log       suite cuda with GF_REQUIRE_GPU=1 (a closed gate is a failure)
#   rerun.log      each failed test once more with CUDA_LAUNCH_BLOCKING=1 GF_CUDA_SYNC=1, so the log
#                  names the kernel and its launch's file:line
#   sanitizer.log  compute-sanitizer memcheck, then racecheck, on `gflow bench` of the four model
#                  kinds (GrassmannLM, Transformer LM, both NLI heads): 2 layers, batch 2, L 32,
#                  2 steps, the arena's debug mode (GF_CUDA_ARENA_DEBUG=1: one cudaMalloc a tensor)
#   train.log      recipes/quickstart.ini for 20 steps on the real data, and every metrics.tsv loss
#                  of two runs compared, four times: train20, the GPU (CUDA graphs on, the default)
#                  against the CPU in fp32 (relative 1e-4: the bound suite cuda's
#                  train_steps_match_cpu_* holds the first 20 steps to); graph20, the GPU with graphs
#                  against without (the same printed losses and gradient norms, and the same bytes of
#                  the weights after 20 steps, as cuda/graph_steps_match_uncaptured_bitwise holds on
#                  the emulator); bf16_20, GPU bf16 against CPU bf16 (3e-3, suite cuda's
#                  train_steps_match_cpu_grassmann_bf16); tf32_20, GPU TF32 against CPU fp32 (1e-2:
#                  this script's own bound, the products' inputs rounded to 10 mantissa bits on one
#                  side only; the worst difference is printed for docs/cuda.md)
#   bench.log      gflow bench of the paper's GrassmannLM (recipes/wikitext2.ini) on the GPU: steps
#                  timed by CUDA events, then as many queued as gflow train queues them, as graphs
#   summary.txt    a few lines: what passed, what failed and where, what was not reached
# Without a GPU it says so in summary.txt after the first two steps, runs nothing else, and
# exits 3. Exit 0 only when every step passed; 1 when one failed or was not reached.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

out="" packf=.gpu/pack.tar.xz build="" budget=480
while [ $# -gt 0 ]; do
  case $1 in
    --pack) packf=${2:?--pack needs a file}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "gpu_check: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || { echo "gpu_check: one OUTDIR only" >&2; usage; }; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
[[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge 30 ] || { echo "gpu_check: --budget must be a whole number of seconds >= 30" >&2; exit 2; }
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
T0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - T0) )); }
declare -a SUMMARY=()
FAILED=0 NOTREACHED=0
say() { SUMMARY+=("$1"); echo "gpu_check: $1" >&2; }
verdict() { # verdict STEP STATUS DETAIL: STATUS PASS, FAIL or NOT REACHED
  case $2 in FAIL) FAILED=1 ;; "NOT REACHED") NOTREACHED=1 ;; esac
  say "$(printf '%-12s %-11s %s' "$1" "$2" "$3")"
}
# cap SECONDS: at most that, and at most what is left less 10 s for the summary; 0 when under 15
cap() { local l; l=$(( $(left) - 10 )); [ "$l" -lt "$1" ] && set -- "$l"; [ "$1" -lt 15 ] && echo 0 || echo "$1"; }
finish() {
  {
    echo "gpu_check summary ($(date -u +%FT%TZ), $(( $(date +%s) - T0 )) s of a ${budget} s budget)"
    echo "device: ${GPU_NAME:-none}"
    printf '%s\n' "${SUMMARY[@]}"
  } >"$out/summary.txt"
  echo "=== summary.txt"; cat "$out/summary.txt"
  exit "$1"
}

# ---- the binaries -------------------------------------------------------------------------------
if [ -n "$build" ]; then
  export GFLOW=$build/gflow GFLOW_EXE=$build/gflow GF_TESTS=$build/tests/gf_tests GF_SOURCE_ROOT=$PWD
  [ -x "$GFLOW" ] && [ -x "$GF_TESTS" ] || { echo "gpu_check: no gflow or tests/gf_tests in $build" >&2; exit 2; }
else
  # shellcheck source=tools/gpu_env.sh
  source tools/gpu_env.sh "$(dirname "$packf")" || { verdict setup FAIL "cannot unpack $packf (tools/gpu_pack.sh here first, then carry it)"; finish 1; }
fi
export GFLOW_DATA_MIRROR=${GFLOW_DATA_MIRROR:-../shared/datasets}

# ---- 1. the machine -----------------------------------------------------------------------------
{
  echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) CPUs"
  nvidia-smi 2>&1 || echo "(nvidia-smi: not available)"
  echo; "$GFLOW" --version 2>&1
  echo; command -v compute-sanitizer >/dev/null && compute-sanitizer --version 2>&1 | head -3 || echo "(compute-sanitizer: not on PATH)"
} >"$out/env.txt" 2>&1
GPU_NAME=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
"$GFLOW" --version >/dev/null 2>&1 && verdict env PASS "$(grep -m1 '^options' "$out/env.txt" | grep -o 'cuda [^)]*)\?' | head -1)" ||
  verdict env FAIL "gflow --version failed (env.txt)"

# ---- 2. suite cuda ------------------------------------------------------------------------------
c=$(cap 210)
if [ "$c" = 0 ]; then verdict "suite cuda" "NOT REACHED" "out of time"; else
  GF_REQUIRE_GPU=1 timeout -k 5 "$c" "$GF_TESTS" --suite cuda >"$out/cuda.log" 2>&1; rc=$?
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/cuda.log" | tail -1)
  if grep -q '^SKIP cuda: ' "$out/cuda.log"; then
    verdict "suite cuda" FAIL "$(grep -m1 '^SKIP cuda: ' "$out/cuda.log")"
    say "NO GPU: the CUDA backend was not checked; nothing else runs"
    finish 3
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict "suite cuda" "NOT REACHED" "stopped after ${c} s: $(grep -cE '^ok ' "$out/cuda.log") ok, $(grep -cE '^FAIL ' "$out/cuda.log") FAIL so far"
  elif [ "$rc" = 0 ] && [[ "$last" =~ ^[1-9][0-9]*\ passed,\ 0\ failed ]]; then
    verdict "suite cuda" PASS "$last"
  else
    verdict "suite cuda" FAIL "${last:-no summary line (rc $rc)}: $(grep -E '^FAIL ' "$out/cuda.log" | sed 's/^FAIL *//; s/ (.*//' | head -8 | tr '\n' ' ')"
  fi
fi

# ---- 3. the failed tests again, synchronising after every launch ------------------------------------
mapfile -t failed < <(grep -E '^FAIL  cuda/' "$out/cuda.log" 2>/dev/null | sed 's/^FAIL  cuda\///; s/ (.*//' | head -6)
: >"$out/rerun.log"
if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    c=$(cap 40)
    [ "$c" = 0 ] && { echo "=== $t: NOT REACHED (out of time)" >>"$out/rerun.log"; continue; }
    echo "=== $t (CUDA_LAUNCH_BLOCKING=1 GF_CUDA_SYNC=1)" >>"$out/rerun.log"
    CUDA_LAUNCH_BLOCKING=1 GF_CUDA_SYNC=1 timeout -k 5 "$c" "$GF_TESTS" --suite cuda "$t" >>"$out/rerun.log" 2>&1
  done
  verdict rerun "-" "${#failed[@]} failed test(s) re-run with the sync debug mode: rerun.log"
fi

# ---- 4. compute-sanitizer on the four model kinds ---------------------------------------------------
S=$(command -v compute-sanitizer)
kinds=("quickstart.ini" "wikitext2-transformer.ini" "snli.ini" "snli-transformer.ini")
small=(--steps 2 --warmup 0 --batch 2 --seq-len 32 --peak-n 256 --set run.device=cuda --set model.n_layers=2)
: >"$out/sanitizer.log"
for tool in memcheck racecheck; do
  if [ -z "$S" ]; then verdict "$tool" FAIL "compute-sanitizer not found (tools/cuda_libs.sh)"; continue; fi
  bad="" reached=0
  for k in "${kinds[@]}"; do
    c=$(cap 75)
    [ "$c" = 0 ] && { echo "=== $tool $k: NOT REACHED (out of time)" >>"$out/sanitizer.log"; continue; }
    echo "=== $tool $k" >>"$out/sanitizer.log"
    GF_CUDA_ARENA_DEBUG=1 timeout -k 5 "$c" "$S" --tool "$tool" --target-processes all --error-exitcode 97 \
      --print-limit 20 "$GFLOW" bench "recipes/$k" "${small[@]}" >>"$out/sanitizer.log" 2>&1; rc=$?
    reached=$((reached + 1))
    summ=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer.log" | tail -1)
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then bad+="$k: stopped after ${c} s; "
    elif [ "$rc" != 0 ]; then bad+="$k: rc $rc ${summ#========= }; "; fi
  done
  if [ "$reached" -lt ${#kinds[@]} ]; then verdict "$tool" "NOT REACHED" "$reached of ${#kinds[@]} models run${bad:+; $bad}"
  elif [ -n "$bad" ]; then verdict "$tool" FAIL "$bad(sanitizer.log)"
  else verdict "$tool" PASS "no error in ${#kinds[@]} models (2 steps each, arena debug mode)"; fi
done

# ---- 5. 20 training steps on the real data: GPU against CPU, graphs on and off, bf16, TF32 ----------
runs=$(mktemp -d)
declare -A trc=()
: >"$out/train.log"
# run20 NAME DEVICE [--set ...]: recipes/quickstart.ini for 20 steps into $runs/NAME (rc in trc[NAME])
run20() {
  local name=$1 dev=$2 c; shift 2
  c=$(cap 100)
  if [ "$c" = 0 ]; then trc[$name]="not reached"; return; fi
  echo "=== quickstart, 20 steps, $name: device $dev $* (at most ${c} s)" >>"$out/train.log"
  timeout -k 5 "$c" "$GFLOW" train recipes/quickstart.ini --quiet --overwrite --set run.device="$dev" \
    --set train.max_steps=20 --set run.name=check --set run.out_dir="$runs/$name" "$@" >>"$out/train.log" 2>&1
  trc[$name]=$?
  echo "rc ${trc[$name]}" >>"$out/train.log"
  cat "$runs/$name/check/metrics.tsv" >>"$out/train.log" 2>/dev/null
}
# the weights' bytes of a run's best checkpoint (gflow export, less the header, which names the recipe)
weights_sha() {
  "$GFLOW" export "$runs/$1/check" "$runs/$1.safetensors" >/dev/null 2>&1 || { echo none; return; }
  local n; n=$(od -An -t u8 -N8 "$runs/$1.safetensors" | tr -d ' ')
  tail -c +$((9 + n)) "$runs/$1.safetensors" | sha256sum | cut -c1-16
}
# compare20 STEP A B TOL WHAT: every metrics.tsv loss of run A against run B's (rows matched by step and
# split), relative difference at most TOL; TOL 0: the same printed losses and gradient norms, and the
# same weights' bytes after the 20 steps
compare20() {
  local step=$1 a=$2 b=$3 tol=$4 what=$5 cmp n rest worst at valid sa sb
  if [ "${trc[$a]}" = "not reached" ] || [ "${trc[$b]}" = "not reached" ]; then
    verdict "$step" "NOT REACHED" "out of time ($a: rc ${trc[$a]}, $b: rc ${trc[$b]})"; return
  elif [ "${trc[$a]}" != 0 ] || [ "${trc[$b]}" != 0 ]; then
    verdict "$step" FAIL "$a rc ${trc[$a]}, $b rc ${trc[$b]} (124: out of time; train.log)"; return
  fi
  # rows matched by (step, split); loss relative difference, worst first; both must hold a valid row
  cmp=$(awk -F'\t' 'NR==FNR { if (FNR > 1) { ref[$1 FS $3] = $4; gn[$1 FS $3] = $9 } next }
        FNR > 1 && ($1 FS $3) in ref { n++; r = ref[$1 FS $3]; d = ($4 - r) / (r < 0 ? -r : r); d = d < 0 ? -d : d;
          if ($9 != gn[$1 FS $3]) g++
          if (d >= worst) { worst = d; at = "step " $1 " " $3 } if ($3 == "valid") v = $4 " (against " r ")" }
        END { printf "%d %.3g %d %s|%s\n", n, worst, g, at, v }' "$runs/$b/check/metrics.tsv" "$runs/$a/check/metrics.tsv")
  n=${cmp%% *}; rest=${cmp#* }; worst=${rest%% *}; rest=${rest#* }; gdiff=${rest%% *}; valid=${cmp#*|}
  at=${rest#* }; at=${at%%|*}
  echo "$step: $a against $b: compared $n rows; worst relative loss difference $worst (at $at); gradient norms differing in $gdiff rows; validation $valid" >>"$out/train.log"
  if [ "$tol" = 0 ]; then
    sa=$(weights_sha "$a") sb=$(weights_sha "$b")
    echo "$step: weights after 20 steps: $a $sa, $b $sb" >>"$out/train.log"
    if [ "$n" -ge 20 ] && [ -n "$valid" ] && [ "$worst" = 0 ] && [ "$gdiff" = 0 ] && [ "$sa" != none ] && [ "$sa" = "$sb" ]; then
      verdict "$step" PASS "$what: $n metrics rows and the weights' bytes the same ($sa)"
    else verdict "$step" FAIL "$what: $n rows, worst relative loss difference $worst, $gdiff gradient norms differ, weights $sa against $sb (train.log)"; fi
  elif [ "$n" -ge 20 ] && [ -n "$valid" ] && awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w <= t) }'; then
    verdict "$step" PASS "$what: $n metrics rows within $tol (worst $worst); validation $valid"
  else verdict "$step" FAIL "$what: $n rows compared, worst relative loss difference $worst > $tol, validation '${valid}' (train.log)"; fi
}
run20 gpu cuda
run20 cpu cpu
compare20 train20 gpu cpu 1e-4 "GPU (graphs on, the default) against CPU, fp32"
run20 gpu-nograph cuda --set run.cuda_graph=false
compare20 graph20 gpu gpu-nograph 0 "GPU with CUDA graphs against without"
run20 gpu-bf16 cuda --set run.precision=bf16
run20 cpu-bf16 cpu --set run.precision=bf16
compare20 bf16_20 gpu-bf16 cpu-bf16 3e-3 "GPU bf16 against CPU bf16"
run20 gpu-tf32 cuda --set run.tf32=true
compare20 tf32_20 gpu-tf32 cpu 1e-2 "GPU TF32 against CPU fp32"
rm -rf "$runs"

# ---- 6. the paper's GrassmannLM on the GPU -----------------------------------------------------------
c=$(cap 90)
if [ "$c" = 0 ]; then verdict bench "NOT REACHED" "out of time"; else
  timeout -k 5 "$c" "$GFLOW" bench recipes/wikitext2.ini --set run.device=cuda --steps 20 --warmup 3 >"$out/bench.log" 2>&1; rc=$?
  tps=$(grep -m1 '^tokens_per_s:' "$out/bench.log" | awk '{print $2}')
  # the event-timed steps, then the same number queued as gflow train queues them (CUDA graphs)
  bq=$(grep -m1 '^queued_tokens_per_s:' "$out/bench.log" | awk '{print $2}')
  bg=$(grep -m1 '^cuda_graphs:' "$out/bench.log" | sed 's/^cuda_graphs: //; s/ (in the queued steps)//')
  # the host's pass per queued step against the queued step: equal means the host limits it
  bh=$(grep -m1 '^queued_host_ms_per_step:' "$out/bench.log" | awk '{print $2}')
  bw=$(grep -m1 '^queued_ms_per_step:' "$out/bench.log" | awk '{print $2}')
  if [ "$rc" = 0 ] && [ -n "$tps" ]; then verdict bench PASS "paper GrassmannLM (fp32): $tps tokens/s, $(grep -m1 '^ms_per_step:' "$out/bench.log"); queued ${bq:-?} tokens/s (${bw:-?} ms a step, host ${bh:-?} ms of it), graphs: ${bg:-?}"
  else verdict bench FAIL "rc $rc (bench.log)"; fi
fi

if [ "$FAILED" = 1 ] || [ "$NOTREACHED" = 1 ]; then finish 1; fi
say "ALL PASSED on this GPU"
finish 0
