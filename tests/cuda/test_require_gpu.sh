#!/usr/bin/env bash
# test_require_gpu.sh GF_TESTS — a missing GPU cannot look like a green suite cuda:
#  - where the suite's gate closes it, its SKIP line gives the probe's reason (not a bare
#    "no CUDA device visible"), and with GF_REQUIRE_GPU=1 the same run fails (exit 1, a FAIL line);
#  - where the gate opens (a GPU, or the emulator) there is nothing to check here: exit 77.
set -uo pipefail
t=$1
out=$("$t" --suite cuda nothing-matches-this 2>&1); rc=$?
if [ "$rc" != 77 ]; then echo "SKIP: suite cuda's gate opens here (rc $rc)"; exit 77; fi
fail=0
line=$(grep '^SKIP cuda: ' <<<"$out")
if [[ "$line" == "SKIP cuda: built without CUDA" ]] || [[ "$line" =~ ^SKIP\ cuda:\ no\ CUDA\ device\ visible:\ .{8,} ]]; then
  echo "ok   the SKIP line says why: $line"
else
  echo "FAIL the SKIP line gives no reason: '$line'"; fail=1
fi
out=$(GF_REQUIRE_GPU=1 "$t" --suite cuda nothing-matches-this 2>&1); rc=$?
if [ "$rc" = 1 ] && grep -q '^FAIL  cuda: GF_REQUIRE_GPU=1' <<<"$out" && grep -q '^0 passed, 1 failed$' <<<"$out"; then
  echo "ok   GF_REQUIRE_GPU=1 turns the closed gate into a failure"
else
  echo "FAIL GF_REQUIRE_GPU=1: rc $rc, output:"; echo "$out"; fail=1
fi
out=$(GF_REQUIRE_GPU=0 "$t" --suite cuda nothing-matches-this 2>&1); rc=$?
if [ "$rc" = 77 ]; then echo "ok   GF_REQUIRE_GPU=0 leaves it a skip"; else echo "FAIL GF_REQUIRE_GPU=0: rc $rc"; fail=1; fi
exit $fail
