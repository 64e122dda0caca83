#!/usr/bin/env bash
# test_gpu_profile.sh SOURCE_ROOT GFLOW — tools/gpu_bench.sh's profile step on the CPU: without
# nsys and ncu it fails plainly (exit 4, profile.md and stderr say so, one file besides the log);
# bad options are usage errors (exit 2); tools/gpu_profile_summary.py turns an nsys kernel table,
# an ncu one and a bench output into the summary (the ten longest kernels in order, launches,
# host against GPU time) and refuses a file that is no table, naming it. Exit 77 where nsys or
# ncu is installed (the missing-tool path cannot be shown there).
set -uo pipefail
root=$1 gflow=$(realpath "$2")
cd "$root" || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
S=tools/gpu_profile_summary.py

# ---- the summary, from fixtures ----
{
  echo "Processing [prof.sqlite] with [cuda_gpu_kern_sum.py]... "
  echo '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"'
  for i in $(seq 1 12); do
    echo "1.0,\"$(( i * 1000 )),000\",$(( 2 * i )),1.0,1.0,1,1,0.0,\"void k$i(float *, const float *, long)\""
  done
} >"$tmp/nsys.csv"
printf 'ms_per_step: 12.000\nhost_ms_per_step: 0.500 (the host)\nkernel_launches_per_step: 70.0 (gflow'"'"'s kernels 50.0, cuBLAS calls 20.0; x)\n' >"$tmp/bench.txt"
python3 $S --tool nsys --kernels "$tmp/nsys.csv" --bench "$tmp/bench.txt" --steps 8 >"$tmp/p.md"; rc=$?
check "nsys summary: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "the ten longest kernels, longest first" \
  '[ "$(grep -o "^| \`void k[0-9]*" "$tmp/p.md" | sed "s/.*k//" | tr "\n" " ")" = "12 11 10 9 8 7 6 5 4 3 " ]'
check "a kernel's share, total and launches" 'grep -q "^| \`void k12(float \*, const float \*, long)\` | 15.4 | 12.000 | 24 | 500.0 |" "$tmp/p.md"'
check "launches a step from the profile (156 / 8)" 'grep -q "12 distinct, 156 launches, 19.5 a step" "$tmp/p.md"'
check "gflow's launch count quoted" 'grep -q "^- kernel_launches_per_step: 70.0 (gflow" "$tmp/p.md"'
check "GPU busy per step (78 ms / 8)" 'grep -q "GPU busy in kernels: 9.750 ms a step" "$tmp/p.md"'
check "host against GPU time" 'grep -q "host_ms_per_step: 0.5; ms_per_step (CUDA events): 12.0; kernels fill 81% of the step, the host.s share is 4%" "$tmp/p.md"'
{
  echo "==PROF== Connected to process"
  echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"'
  echo '"0","1","gflow","h","gelu_fwd(float *, const float *, long)","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","2.50"'
  echo '"1","1","gflow","h","gelu_fwd(float *, const float *, long)","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","1.50"'
  echo '"2","1","gflow","h","sgemm_128x64","1","7","Command line profiler metrics","gpu__time_duration.sum","nsecond","9,000"'
} >"$tmp/ncu.csv"
python3 $S --tool ncu --kernels "$tmp/ncu.csv" --bench "$tmp/bench.txt" --steps 2 >"$tmp/n.md"; rc=$?
check "ncu summary: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "ncu rows summed per kernel, units read" \
  'grep -q "^| \`sgemm_128x64\` | 69.2 | 0.009 | 1 | 9.0 |" "$tmp/n.md" && grep -q "^| \`gelu_fwd(float \*, const float \*, long)\` | 30.8 | 0.004 | 2 | 2.0 |" "$tmp/n.md"'
echo "no table here" >"$tmp/bad.csv"
python3 $S --tool nsys --kernels "$tmp/bad.csv" --bench "$tmp/bench.txt" --steps 1 >/dev/null 2>"$tmp/e"; rc=$?
check "not a table: exit 2 naming the file (got $rc)" '[ "$rc" = 2 ] && grep -q "bad.csv: no cuda_gpu_kern_sum table" "$tmp/e"'
python3 $S --tool nsys --kernels "$tmp/nsys.csv" --bench "$tmp/bench.txt" --steps 0 >/dev/null 2>&1; rc=$?
check "--steps 0: exit 2 (got $rc)" '[ "$rc" = 2 ]'

# ---- tools/gpu_bench.sh profile ----
tools/gpu_bench.sh profile "$tmp/o1" --nope >/dev/null 2>&1; rc=$?
check "unknown option: exit 2 (got $rc)" '[ "$rc" = 2 ]'
tools/gpu_bench.sh profile "$tmp/o2" --budget 1x --gflow "$gflow" >/dev/null 2>&1; rc=$?
check "--budget 1x: exit 2 (got $rc)" '[ "$rc" = 2 ]'
tools/gpu_bench.sh profile >/dev/null 2>&1; rc=$?
check "no OUTDIR: exit 2 (got $rc)" '[ "$rc" = 2 ]'
if PATH=$PATH:/usr/local/cuda/bin command -v nsys >/dev/null 2>&1 || PATH=$PATH:/usr/local/cuda/bin command -v ncu >/dev/null 2>&1 ||
   compgen -G "/opt/nvidia/nsight-*" >/dev/null; then
  echo "SKIP: nsys or ncu is installed here"
  [ "$fail" = 0 ] && exit 77
  exit 1
fi
tools/gpu_bench.sh profile "$tmp/o3" --gflow "$gflow" >"$tmp/log" 2>&1; rc=$?
check "neither tool: exit 4 (got $rc)" '[ "$rc" = 4 ]'
check "stderr says so" 'grep -q "neither nsys nor ncu is on PATH" "$tmp/log"'
check "profile.md says so" 'grep -q "^# GPU profile: not run" "$tmp/o3/profile.md" && grep -q "neither nsys nor ncu" "$tmp/o3/profile.md"'
check "two files: the log and profile.md" '[ "$(ls "$tmp/o3" | tr "\n" " ")" = "gpu_bench.log profile.md " ]'
[ "$fail" = 0 ] || cat "$tmp/log"
exit $fail
