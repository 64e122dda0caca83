#!/usr/bin/env bash
# tools/test_cuda_emu.sh [BUILD_DIR] — suite cuda on gflow's CUDA emulator (a build configured with
# -Demulate_cuda=true; docs/cuda.md "The emulator"), twice and at once: the blocks and the threads
# of each block in index order, and last first (GF_CUDA_EMU_ORDER=reverse), since each order exposes
# the shared-memory reads without a barrier that the other hides (and a "last block" taken by
# index). The second also sums each product's terms last first (GF_CUDA_EMU_GEMM=reverse_k), so the
# suite's CUDA-against-CPU tolerances hold for products that are not the CPU's bits, as cuBLAS's
# are not on a GPU. Prints one summed "N passed, M failed" last; non-zero exit on any failure.
# Default BUILD_DIR: build-emu
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-emu}
if ! grep -q '"name": "emulate_cuda", "value": true' "$build/meson-info/intro-buildoptions.json" 2>/dev/null; then
  echo "test_cuda_emu: $build is not configured with -Demulate_cuda=true"; echo "0 passed, 1 failed"; exit 1
fi
ninja -C "$build" >/dev/null || { echo "test_cuda_emu: build failed"; echo "0 passed, 1 failed"; exit 1; }
export GF_SOURCE_ROOT=$PWD
P=0; F=0; rc=0
# The two orders run at once, each in its own process (the emulator runs a kernel's blocks on one
# thread: the two take ~60 % of their time one after the other); their logs print in order after.
# The CPU side of the tests uses 2 threads (the test recipes' [run] threads); between its parallel
# regions OpenMP's and OpenBLAS's idle threads would spin, taking the core the other pass runs on
# (passive, and OpenBLAS's shortest spin: they sleep at once; the two passes under ASan on a 2-core
# AMD EPYC Zen 3, 2026-11-29: 286 s with them spinning, 247 s without).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
orders=(index reverse)
declare -A log pid gemm=([index]=blas [reverse]=reverse_k)
for order in "${orders[@]}"; do
  log[$order]=$(mktemp)
  GF_CUDA_EMU_ORDER=$order GF_CUDA_EMU_GEMM=${gemm[$order]} "$build/tests/gf_tests" --suite cuda >"${log[$order]}" 2>&1 &
  pid[$order]=$!
done
for order in "${orders[@]}"; do
  wait "${pid[$order]}"; r=$?
  echo "--- suite cuda on the emulator, threads in $order order, products GF_CUDA_EMU_GEMM=${gemm[$order]}"
  cat "${log[$order]}"
  read -r p f < <(grep -E '^[0-9]+ passed, [0-9]+ failed$' "${log[$order]}" | tail -1 | awk '{print $1, $3}')
  rm -f "${log[$order]}"
  p=${p:-0}; f=${f:-0}
  if [ "$r" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  P=$((P + p)); F=$((F + f)); [ "$r" = 0 ] || rc=1
done
echo "$P passed, $F failed"
[ "$rc" = 0 ] && [ "$F" = 0 ]
