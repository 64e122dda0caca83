#!/usr/bin/env bash
# tools/gpu_bench.sh — issue 21's GPU benchmark in one command on a machine with an NVIDIA GPU:
# `gflow bench --set run.device=cuda` and `tools/bench_torch.py --device cuda` (eager, then
# torch.compile) for the paper's GrassmannLM (recipes/wikitext2.ini) and the Transformer
# (recipes/wikitext2-transformer.ini), on the same GPU, one after the other; then a Markdown
# table for docs/performance.md, with the GPU and its driver named.
#
#   tools/gpu_bench.sh pack [DIR]
#       Here (the build machine): tools/gpu_pack.sh DIR (default .gpu): a portable CUDA build of
#       gflow and gf_tests with the shared libraries ldd lists and the datasets, in DIR/pack.tar.xz.
#       cuBLAS is not packed (600 MB): gflow loads it when the GPU is first used, from the GPU
#       machine's CUDA 13 (found by `run`).
#   tools/gpu_bench.sh run OUTDIR [--pack FILE] [--gflow PATH] [--steps N] [--warmup W]
#                                 [--torch-steps N] [--torch-warmup W] [--budget S] [--no-compile] [--tf32]
#                                 [--bf16] [--long] [--no-main]
#       There: unpack FILE (default .gpu/pack.tar.xz, by tools/gpu_env.sh; or use an already built
#       --gflow PATH, with GFLOW_DATA_MIRROR set),
#       run everything and write three files: OUTDIR/gpu_bench.log (every command line and its
#       whole output), OUTDIR/summary.md (the table) and OUTDIR/env.txt (nvidia-smi, gflow
#       --version, torch). Needs no network and no packages: bash, coreutils, tar, python3 with
#       PyTorch 2.x. Defaults: --steps 50 --warmup 5 (gflow), --torch-steps 30 --torch-warmup 3,
#       --budget 540 seconds for everything (each command is capped so that the whole fits a
#       10-minute device call; what no longer fits is skipped and says so in the log and the table).
#       --tf32: gflow also times its GEMM peaks in TF32 (gflow bench --tf32); the main runs stay
#       FP32 on both sides. TF32 for gflow's model needs the recipe key [run] tf32: when
#       src/recipe/schema.c has it (TF32_KEY below), --tf32 then runs both models again in TF32 on
#       both sides (gflow --set run.tf32=true; bench_torch --tf32, eager and compile); without it
#       the log says so. MARKED OPTION: nothing else to change here once the key exists.
#       --bf16: both models again with bf16 matrix products on both sides, after everything else
#       (gflow --set run.precision=bf16: cublasGemmEx; bench_torch --set run.precision=bf16:
#       torch.autocast(bfloat16), eager and compile).
#       --long: both models again at L 1,024 and 2,048 (batch 4 and 2: the 4,096 tokens a step of the
#       paper's shape, so tokens/s shows how each model's cost grows with L), gflow and PyTorch
#       eager, then torch.compile where time is left, after the FP32 runs. --no-main skips the runs
#       at the paper's shape (e.g. a second call for --long or --bf16 alone).
#       Last, with what time is left, the profile step below (--no-profile: not).
#   tools/gpu_bench.sh profile OUTDIR [--pack FILE] [--gflow PATH] [--budget S]
#       The profile step alone: one short `gflow bench` of the GrassmannLM (3 steps after 2) under
#       `nsys profile --stats=true` where nsys is on PATH (or in CUDA's folders), else one step under `ncu` (kernel
#       durations), and one file OUTDIR/profile.md (tools/gpu_profile_summary.py): the ten kernels
#       taking most GPU time, kernel launches per step, host time per step against GPU time; the
#       profiler's whole output goes to OUTDIR/gpu_bench.log. Neither tool on PATH: profile.md and
#       stderr say so and the exit status is 4 (run goes on: its table does not need it).
#   env PYTHON (python3) is the interpreter with PyTorch.
#
# The device tool (this workplace's lent GPU): pack here (.gpu/ is git-ignored), then carry it:
#   tools/gpu_bench.sh pack
#   run(command="tools/gpu_bench.sh run $OUT", carry=[".gpu/pack.tar.xz"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
TF32_KEY='K(run, tf32'   # how schema.c declares the key, once it exists

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
pack() { exec tools/gpu_pack.sh "$@"; }  # one packer: the build, its libraries, gf_tests, the datasets

# ---------------------------------------------------------------------------------------------
out="" packf=.gpu/pack.tar.xz gflow="" steps=50 warmup=5 tsteps=30 twarmup=3 budget=540 compile=1 tf32=0 bf16=0
long=0 main=1 prof=1
PY=${PYTHON:-python3}
T0=$(date +%s)
LOG="" RES="" cub=""

left() { echo $(( budget - ($(date +%s) - T0) )); }

# step NAME CAP CMD...: run CMD with at most min(CAP, time left - 15 s), log it, keep its output in $RES/NAME
step() {
  local name=$1 cap=$2; shift 2
  local l; l=$(left)
  [ $(( l - 15 )) -lt "$cap" ] && cap=$(( l - 15 ))
  { echo; echo "=== $name | $(date -u +%T) | $*"; } >>"$LOG"
  if [ "$cap" -lt 20 ]; then
    echo "SKIPPED: out of time (budget ${budget}s)" | tee "$RES/$name" >>"$LOG"
    return 1
  fi
  echo "gpu_bench: $name (at most ${cap}s)" >&2
  local t; t=$(date +%s)
  timeout -k 5 "$cap" "$@" >"$RES/$name" 2>&1
  local rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && echo "TIMED OUT after ${cap}s" >>"$RES/$name"
  cat "$RES/$name" >>"$LOG"
  echo "=== $name: exit $rc after $(( $(date +%s) - t ))s" >>"$LOG"
  return $rc
}

# field FILE KEY [BLOCK]: KEY's value in the output (first block, or the Nth of bench_torch --mode both)
field() { grep -E "^$2: " "$1" 2>/dev/null | sed -n "${3:-1}p" | sed -E "s/^$2: ([0-9.eE+-]+).*/\1/"; }

# shellcheck source=tools/cuda_libs.sh
source "$(dirname "$0")/cuda_libs.sh"  # gf_find_cublas

row() {  # row MODEL RUN FILE [RATIO]: one table line from a bench output (its first block)
  local f=$3 tps mem why
  tps=$(field "$f" tokens_per_s)
  if [ -z "$tps" ]; then
    why=$(grep -v '^[[:space:]]*$' "$f" 2>/dev/null | tail -1 | cut -c1-110 | tr '|' '/')  # the error's line
    echo "| $1 | $2 | ${why:-no result (gpu_bench.log)} | | | | | | | | |"
    return
  fi
  mem=$(field "$f" peak_device_mb); [ -n "$mem" ] || mem="$(field "$f" device_taken_mb) (after)"
  # gflow only: its steps pushed as gflow train pushes them (no wait per step, CUDA graphs)
  echo "| $1 | $2 | $tps | $(field "$f" queued_tokens_per_s) | $(field "$f" ms_per_step) | $(field "$f" ms_forward) |" \
       "$(field "$f" ms_backward) | $(field "$f" ms_optimizer) | $(field "$f" mfu_pct) | ${mem:-?} | ${4:-} |"
}

# the options of run and profile (profile takes --pack, --gflow and --budget)
opts() {
  while [ $# -gt 0 ]; do
    case $1 in
      --pack) packf=$2; shift 2 ;;
      --gflow) gflow=$2; shift 2 ;;
      --steps) steps=$2; shift 2 ;;
      --warmup) warmup=$2; shift 2 ;;
      --torch-steps) tsteps=$2; shift 2 ;;
      --torch-warmup) twarmup=$2; shift 2 ;;
      --budget) budget=$2; shift 2 ;;
      --no-compile) compile=0; shift ;;
      --tf32) tf32=1; shift ;;
      --bf16) bf16=1; shift ;;
      --long) long=1; shift ;;
      --no-main) main=0; shift ;;
      --no-profile) prof=0; shift ;;
      *) echo "gpu_bench: unknown option $1" >&2; usage ;;
    esac
  done
  case $budget in ''|*[!0-9]*) echo "gpu_bench: --budget $budget: seconds, a whole number" >&2; usage ;; esac
}

# the output folder, the log, gflow (unpacked from the pack unless --gflow) and cuBLAS's path
setup() {
  mkdir -p "$out" || exit 1
  LOG=$out/gpu_bench.log
  : >"$LOG"
  if [ -z "$gflow" ]; then
    # shellcheck source=tools/gpu_env.sh
    source tools/gpu_env.sh "$(dirname "$packf")" || exit 1  # unpacks once; sets GFLOW, GFLOW_DATA_MIRROR
    gflow=$GFLOW
  fi
  cub=$(gf_find_cublas)
  [ -n "$cub" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cub
  return 0
}

# the profile step: OUTDIR/profile.md; 4 when neither nsys nor ncu is on PATH
profile_step() {
  local pw=2 ps=3 tool="" tmp; tmp=$(mktemp -d)
  local gb=("$gflow" bench recipes/wikitext2.ini --set run.device=cuda --peak-n 0) d
  for d in /usr/local/cuda/bin /opt/nvidia/nsight-systems/*/bin /opt/nvidia/nsight-compute/*; do  # CUDA's own folders
    [ -d "$d" ] && PATH=$PATH:$d
  done
  if command -v nsys >/dev/null 2>&1; then
    tool=nsys
    # kernels inside the CUDA graphs of the queued steps traced one by one (node), not as one graph
    step profile-nsys 240 nsys profile --stats=true --cuda-graph-trace=node --force-overwrite=true \
      -o "$tmp/prof" "${gb[@]}" --steps "$ps" --warmup "$pw"
    step profile-kernels 60 nsys stats --report cuda_gpu_kern_sum --format csv --output - "$tmp/prof.nsys-rep"
    cp "$RES/profile-nsys" "$tmp/bench.txt" 2>/dev/null
  elif command -v ncu >/dev/null 2>&1; then
    tool=ncu ps=1 pw=0  # ncu replays every kernel: one timed step (and its queued twin)
    step profile-ncu 300 ncu --csv --metrics gpu__time_duration.sum --log-file "$tmp/ncu.csv" "${gb[@]}" \
      --steps "$ps" --warmup "$pw"
    cp "$RES/profile-ncu" "$tmp/bench.txt" 2>/dev/null
    cp "$tmp/ncu.csv" "$RES/profile-kernels" 2>/dev/null
  else
    echo "# GPU profile: not run" >"$out/profile.md"
    echo "gpu_bench: profile: neither nsys nor ncu is on PATH (PATH=$PATH): no profile" | tee -a "$out/profile.md" "$LOG" >&2
    rm -rf "$tmp"
    return 4
  fi
  # the bench's process ran warm-up, timed and as many queued steps
  if ! "$PY" tools/gpu_profile_summary.py --tool "$tool" --kernels "$RES/profile-kernels" --bench "$tmp/bench.txt" \
      --steps $(( pw + 2 * ps )) >"$out/profile.md" 2>"$tmp/err"; then
    { echo "# GPU profile ($tool): no summary"; cat "$tmp/err"; } >"$out/profile.md"
    cat "$tmp/err" >&2
    rm -rf "$tmp"
    return 1
  fi
  cat "$out/profile.md" >>"$LOG"
  rm -rf "$tmp"
}

profile() {
  [ $# -ge 1 ] || usage
  out=$1; shift
  opts "$@"
  setup
  RES=$(mktemp -d)
  profile_step; local rc=$?
  rm -rf "$RES"
  return $rc
}

run() {
  [ $# -ge 1 ] || usage
  out=$1; shift
  opts "$@"
  setup
  RES=$(mktemp -d)
  {
    echo "# gpu_bench.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) cores"
    echo "# steps: gflow $steps after $warmup, torch $tsteps after $twarmup; budget ${budget}s; cuBLAS from ${cub:-the path gflow was configured with}"
    echo "## nvidia-smi"; nvidia-smi 2>&1
    echo "## gflow --version"; "$gflow" --version 2>&1
    echo "## ldd gflow"; ldd "$gflow" 2>&1
    echo "## torch"; "$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1
  } >"$out/env.txt"
  cat "$out/env.txt" >>"$LOG"

  local g=recipes/wikitext2.ini t=recipes/wikitext2-transformer.ini gt32=()
  [ "$tf32" = 1 ] && gt32=(--tf32)
  local gb=("$gflow" bench --set run.device=cuda --steps "$steps" --warmup "$warmup" "${gt32[@]}")
  local tb=("$PY" tools/bench_torch.py --device cuda --steps "$tsteps" --warmup "$twarmup")
  local have_tf32=0 m r L B
  if [ "$main" = 1 ]; then
    # the numbers that must come back first, then torch.compile (minutes of compilation)
    step gflow-grassmann 120 "${gb[@]:0:2}" "$g" "${gb[@]:2}"
    step gflow-transformer 120 "${gb[@]:0:2}" "$t" "${gb[@]:2}"
    # the CUDA graph's gain: the same queued steps without graphs
    step gflow-grassmann-nograph 120 "${gb[@]:0:2}" "$g" "${gb[@]:2}" --set run.cuda_graph=false
    step torch-eager-grassmann 150 "${tb[@]:0:2}" "$g" "${tb[@]:2}" --mode eager
    step torch-eager-transformer 150 "${tb[@]:0:2}" "$t" "${tb[@]:2}" --mode eager
    if [ "$compile" = 1 ]; then
      step torch-compile-grassmann 300 "${tb[@]:0:2}" "$g" "${tb[@]:2}" --mode compile
      step torch-compile-transformer 300 "${tb[@]:0:2}" "$t" "${tb[@]:2}" --mode compile
    fi
  fi
  if [ "$long" = 1 ]; then  # L 1,024 and 2,048 at the paper's 4,096 tokens a step
    for L in 1024 2048; do
      B=$(( 4096 / L ))
      for m in grassmann transformer; do
        r=$g; [ $m = transformer ] && r=$t
        step "gflow-$m-L$L" 120 "${gb[@]:0:2}" "$r" "${gb[@]:2}" --seq-len "$L" --batch "$B"
        step "torch-eager-$m-L$L" 150 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode eager --seq-len "$L" --batch "$B"
      done
    done
    if [ "$compile" = 1 ]; then
      for L in 1024 2048; do
        B=$(( 4096 / L ))
        for m in grassmann transformer; do
          r=$g; [ $m = transformer ] && r=$t
          step "torch-compile-$m-L$L" 300 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode compile --seq-len "$L" --batch "$B"
        done
      done
    fi
  fi
  grep -qF "$TF32_KEY" src/recipe/schema.c && have_tf32=1
  if [ "$tf32" = 1 ]; then
    if [ "$have_tf32" = 1 ]; then  # the same runs in TF32 on both sides, last (what time is left)
      for m in grassmann transformer; do
        r=$g; [ $m = transformer ] && r=$t
        step "gflow-$m-tf32" 120 "${gb[@]:0:2}" "$r" "${gb[@]:2}" --set run.tf32=true
        step "torch-eager-$m-tf32" 150 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode eager --tf32
        [ "$compile" = 1 ] && step "torch-compile-$m-tf32" 300 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode compile --tf32
      done
    else
      echo "=== TF32 model runs: the recipe key [run] tf32 does not exist yet (src/recipe/schema.c); only the GEMM peaks were timed in TF32" >>"$LOG"
    fi
  fi

  if [ "$bf16" = 1 ]; then  # bf16 products on both sides, last (what time is left)
    for m in grassmann transformer; do
      r=$g; [ $m = transformer ] && r=$t
      step "gflow-$m-bf16" 120 "${gb[@]:0:2}" "$r" "${gb[@]:2}" --set run.precision=bf16
      step "torch-eager-$m-bf16" 150 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode eager --set run.precision=bf16
      [ "$compile" = 1 ] && step "torch-compile-$m-bf16" 300 "${tb[@]:0:2}" "$r" "${tb[@]:2}" --mode compile --set run.precision=bf16
    done
  fi

  # ---- the table ----
  local R=$RES gpu peak shape m f name label gt tt ratio first
  gpu=$(cat "$R"/gflow-* "$R"/torch-* 2>/dev/null | grep -m1 '^gpu: ' | sed 's/^gpu: //')
  for first in "$R"/gflow-grassmann "$R"/gflow-grassmann-*; do [ -f "$first" ] && break; done
  peak=$(grep -m1 '^sgemm_peak_gflops: ' "$first" 2>/dev/null | sed 's/^sgemm_peak_gflops: //')
  shape=$(grep -m1 '^bench: ' "$R/gflow-grassmann" 2>/dev/null | sed -E 's/^bench: [^ ]+ //')
  {
    echo "GPU: ${gpu:-unknown}. $(date -u +%F); $("$gflow" --version 2>/dev/null | head -1);" \
         "$("$PY" -c 'import torch; print("PyTorch", torch.__version__)' 2>/dev/null)."
    echo "gflow GrassmannLM: ${shape:-?}. Steps timed with CUDA events: gflow $steps after $warmup warm-up," \
         "PyTorch $tsteps after $twarmup; FP32$([ "$tf32" = 1 ] && echo ' (GEMM peaks also in TF32)')." \
         "Queued tokens/s (gflow): $steps more steps pushed as gflow train pushes them, no wait per step, each a CUDA graph" \
         "(the cuda_graphs line of its output); the ratios use the event-timed tokens/s, one step at a time on both sides."
    echo "MFU: gflow against cublasSgemm on the same GPU, ${peak:-?}; PyTorch against torch.matmul 8192^3." \
         "Device memory: gflow the true peak of its own cudaMalloc'd memory over the timed and queued steps (peak_device_mb;" \
         "an older build's cudaMemGetInfo snapshot is marked after), PyTorch torch.cuda.max_memory_allocated."
    echo
    echo "| model | run | tokens/s | queued tokens/s | ms/step | forward | backward | optimizer | MFU % | peak device MB | gflow ÷ this |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    local p sfx ps
    for ps in ":FP32" "-tf32:TF32" "-bf16:BF16" "-L1024:FP32, L 1,024 × batch 4" "-L2048:FP32, L 2,048 × batch 2"; do
      sfx=${ps%%:*} p=${ps#*:}
      for m in grassmann transformer; do
        [ -f "$R/gflow-$m$sfx" ] || continue
        name=GrassmannLM; [ $m = transformer ] && name=TransformerLM
        gt=$(field "$R/gflow-$m$sfx" tokens_per_s)
        row "$name" "gflow (CUDA, $p)" "$R/gflow-$m$sfx"
        for f in eager compile; do
          [ -f "$R/torch-$f-$m$sfx" ] || continue
          tt=$(field "$R/torch-$f-$m$sfx" tokens_per_s)
          label="PyTorch eager"; [ $f = compile ] && label="PyTorch torch.compile"
          [ $m = transformer ] && label="$label, SDPA"
          ratio=""
          [ -n "$gt" ] && [ -n "$tt" ] && ratio=$(awk -v a="$gt" -v b="$tt" 'BEGIN { printf "%.2f×", a / b }')
          row "$name" "$label ($p)" "$R/torch-$f-$m$sfx" "$ratio"
        done
      done
    done
    echo
    echo "Targets (issue 32, same GPU and precision): GrassmannLM ≥ 3× PyTorch eager and ≥ 1.5× torch.compile;" \
         "the Transformer at least level with PyTorch eager; the 30-epoch paper run (67.5 M tokens) under 5 minutes" \
         "per model (67.5e6 / tokens/s ≤ 300 s: at least 225,000 tokens/s)."
    echo
    for f in "$R"/torch-compile-*; do
      [ -f "$f" ] && grep -m1 '^warmup_s: ' "$f" | sed "s|^|- $(basename "$f") |"
    done
    grep -h -E '^sgemm_(peak|head|ffn|peak_tf32)_gflops: ' "$R/gflow-grassmann" 2>/dev/null | sed 's/^/- gflow GrassmannLM /'
    local qg qn
    qg=$(field "$R/gflow-grassmann" queued_tokens_per_s) qn=$(field "$R/gflow-grassmann-nograph" queued_tokens_per_s)
    if [ -n "$qg" ] && [ -n "$qn" ]; then
      echo "- gflow GrassmannLM (FP32) queued steps: $qg tokens/s with CUDA graphs, $qn without" \
           "($(awk -v a="$qg" -v b="$qn" 'BEGIN { printf "%.2f×", a / b }')); $(grep -m1 '^cuda_graphs: ' "$R/gflow-grassmann")"
    fi
  } >"$out/summary.md"
  cat "$out/summary.md"
  [ "$prof" = 1 ] && profile_step
  echo "=== done after $(( $(date +%s) - T0 ))s" >>"$LOG"
  rm -rf "$RES"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  profile) shift; profile "$@"; exit $? ;;
  *) usage ;;
esac
