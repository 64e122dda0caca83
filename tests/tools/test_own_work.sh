#!/usr/bin/env bash
# test_own_work.sh SOURCE_ROOT — tools/own_work.py (issue 49's own-work share from perf samples) on a
# fixture: the window is the last STEPS x MS_PER_STEP ms, oneDNN's brgemm/matmul JIT kernels,
# libdnnl, OpenBLAS and unnamed JIT code (libxsmm's) count as products (OpenBLAS and the unnamed
# JIT code as own with --blas-is-own), oneDNN's reorders,
# gflow, libc and the kernel as own; bad arguments exit 2, no sample exits 1. And
# tools/own_work.sh's argument errors (exit 2, before perf is needed).
set -uo pipefail
root=$1
py=$root/tools/own_work.py
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
# 1.0 s: setup (outside a 2-step window of 100 ms); then 10 samples inside it
cat >"$tmp/s" <<'TXT'
  100 1000.000000:      7f0000000000 clear_page_erms ([kernel.kallsyms])
  100 1000.850000:      7f0000000001 jit_brgemm_kernel_t (/tmp/perf-100.map)
  100 1000.900000:      7f0000000002 jit_brgemm_kernel_t (/tmp/perf-100.map)
  101 1000.910000:      7f0000000003 jit_brgemm_matmul_copy_a_transposed_impl_t (/tmp/perf-100.map)
  100 1000.920000:      7f0000000004 jit_uni_reorder_kernel_f32 (/tmp/perf-100.map)
  101 1000.930000:      7f0000000005 gf_gelu_backward_span (/work/main/build/gflow)
  100 1000.940000:      7f0000000006 [unknown] (/usr/lib/x86_64-linux-gnu/libdnnl.so.2.6)
  101 1000.950000:      7f0000000007 sgemm_kernel_COOPERLAKE (/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0)
  100 1000.960000:      7f0000000008 __memset_avx512_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)
  101 1000.970000:      7f0000000009 pvm_irq_enable ([kernel.kallsyms])
  101 1000.980000:      7f000000000b [unknown] (/tmp/perf-100.map)
  100 1001.000000:      7f000000000a exp_row (/work/main/build/gflow)
TXT
out=$(python3 "$py" "$tmp/s" --ms-per-step 100 --steps 2); rc=$?
check "fixture: exit 0 (got $rc)" '[ "$rc" = 0 ]'
check "fixture: 11 samples in the window, 5 own ($out)" '[[ "$out" == "own_share 0.455  own_ms 45.5  product_share 0.545  samples 11" ]]'
out=$(python3 "$py" "$tmp/s" --ms-per-step 100 --steps 2 --blas-is-own)
check "--blas-is-own: OpenBLAS and the unnamed JIT code own ($out)" '[[ "$out" == "own_share 0.636  own_ms 63.6  product_share 0.364  samples 11" ]]'
out=$(python3 "$py" "$tmp/s" --ms-per-step 100 --steps 2 --top 2 | sed -n 2,3p | tr '\n' '|')
check "--top 2: the two own symbols with most samples, ties by name ($out)" '[[ "$out" == "own_sym 9.1 0.091 __memset_avx512_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)|own_sym 9.1 0.091 exp_row (/work/main/build/gflow)|" ]]'
python3 "$py" "$tmp/s" --ms-per-step 100 --steps 2 --top -1 >/dev/null 2>&1; rc=$?
check "--top -1: exit 2 (got $rc)" '[ "$rc" = 2 ]'
out=$(python3 "$py" - --ms-per-step 1000 --steps 1 <"$tmp/s")
check "standard input, a window with the setup sample ($out)" '[[ "$out" == own_share\ 0.500* ]]'
python3 "$py" "$tmp/s" --ms-per-step 0 --steps 2 >/dev/null 2>&1; rc=$?
check "--ms-per-step 0: exit 2 (got $rc)" '[ "$rc" = 2 ]'
python3 "$py" "$tmp/s" --steps 2 >/dev/null 2>&1; rc=$?
check "no --ms-per-step: exit 2 (got $rc)" '[ "$rc" = 2 ]'
: >"$tmp/empty"
python3 "$py" "$tmp/empty" --ms-per-step 100 --steps 2 >/dev/null 2>&1; rc=$?
check "no samples: exit 1 (got $rc)" '[ "$rc" = 1 ]'
sh=$root/tools/own_work.sh
"$sh" --top x "$root/recipes/wikitext2.ini" >/dev/null 2>&1; rc=$?
check "own_work.sh --top x: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$sh" --steps 0 "$root/recipes/wikitext2.ini" >/dev/null 2>&1; rc=$?
check "own_work.sh --steps 0: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$sh" "$tmp/none.ini" >/dev/null 2>&1; rc=$?
check "own_work.sh, no recipe: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$sh" --gflow "$tmp/none" "$root/recipes/wikitext2.ini" >/dev/null 2>&1; rc=$?
check "own_work.sh, no gflow: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$sh" --nope >/dev/null 2>&1; rc=$?
check "own_work.sh, unknown option: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$sh" --help | grep -q 'own_work.sh' && rc=0 || rc=1
check "own_work.sh --help" '[ "$rc" = 0 ]'
exit $fail
