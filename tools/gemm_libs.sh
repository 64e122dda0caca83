#!/usr/bin/env bash
# tools/gemm_libs.sh [BUILD_DIR] [--reps R] [--threads N] — the matrix products of one step of the
# paper's GrassmannLM on each library the build reaches (gflow's gf_gemm fp32 and bf16, oneDNN's
# sgemm, libxsmm fp32 and bf16 where libxsmm-dev is installed): GFLOP/s, whether a library's bits
# depend on the thread count, and each library's seconds for the step (tools/gemm_libs.c says how
# to read it). Issue 49; docs/performance.md "Matrix products by library". Default BUILD_DIR: build.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
ninja -C "$build" gemm_libs >/dev/null
echo "# $(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); $(date -u +%FT%TZ)"
exec "$build/gemm_libs" "$@"
