#!/usr/bin/env bash
# test_blas_kernel.sh GFLOW — the OpenBLAS kernel gflow runs with (`gflow --version`: "kernel X"):
# on a CPU with AVX2 and FMA it is never one of OpenBLAS's pre-AVX2 kernels, which OpenBLAS 0.3.21
# falls back to on processors newer than its tables (seen: a Xeon, family 6 model 207, taking
# Prescott's SSE3 kernels at a ninth of the speed: gf_blas_better_core); and a kernel the user
# names in OPENBLAS_CORETYPE is kept.
set -uo pipefail
g=$1 fail=0
k=$(env -u OPENBLAS_CORETYPE "$g" --version | grep -o 'kernel [A-Za-z0-9]*' | cut -d' ' -f2)
echo "kernel: ${k:-?} ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  case $k in
    Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai|Coppermine|Northwood|Banias|Sandybridge|"")
      echo "FAIL a CPU with AVX2 and FMA runs OpenBLAS's '$k' kernel"; fail=1 ;;
    *) echo "ok   not a pre-AVX2 kernel" ;;
  esac
fi
k=$(OPENBLAS_CORETYPE=Haswell "$g" --version | grep -o 'kernel [A-Za-z0-9]*' | cut -d' ' -f2)
if [ "$k" = Haswell ]; then echo "ok   OPENBLAS_CORETYPE=Haswell is kept"; else echo "FAIL OPENBLAS_CORETYPE=Haswell gave '$k'"; fail=1; fi
exit $fail
