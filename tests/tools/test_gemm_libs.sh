#!/usr/bin/env bash
# test_gemm_libs.sh GEMM_LIBS — tools/gemm_libs.c (issue 49's products by library): a quick run
# prints its three products, gflow's fp32 and bf16 products agree with the fp32 reference on
# their inputs (no "x" in their columns), the step's line closes the table; bad options exit 2.
set -uo pipefail
exe=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
"$exe" --quick --reps 1 >"$tmp/out" 2>&1; rc=$?
check "quick run exits 0 (got $rc)" '[ "$rc" = 0 ]'
check "three products" '[ "$(grep -cE "^w_red (fwd|dX|dW) " "$tmp/out")" = 3 ]'
# a row: name (2 words), M N K t, then one figure per library; the header names each library in two
# words after "product M N K t": library j is header words 6+2j, 7+2j and row field 7+j
hdr=$(grep -m1 '^product' "$tmp/out")
col16=$(echo "$hdr" | awk '{ for (i = 6; i < NF; i += 2) if ($i == "gflow" && $(i + 1) == "bf16") print 7 + (i - 6) / 2 }')
check "gflow's columns in the header" '[ "$(echo "$hdr" | awk "{ print \$6, \$7 }")" = "gflow fp32" ] && [ -n "$col16" ]'
bad=$(grep -E '^w_red ' "$tmp/out" | awk -v c="$col16" '$7 == "x" || $c == "x" { n++ } END { print n + 0 }')
check "gflow fp32 and bf16 agree with the reference ($bad rows off)" '[ "$bad" = 0 ]'
check "the step's line" 'grep -qE "^seconds a step \(these products\) +[0-9.]+ " "$tmp/out"'
"$exe" --reps 0 >/dev/null 2>&1; rc=$?
check "--reps 0: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$exe" --threads x >/dev/null 2>&1; rc=$?
check "--threads x: exit 2 (got $rc)" '[ "$rc" = 2 ]'
"$exe" --nope >/dev/null 2>&1; rc=$?
check "unknown option: exit 2 (got $rc)" '[ "$rc" = 2 ]'
[ "$fail" = 0 ] || cat "$tmp/out"
exit $fail
