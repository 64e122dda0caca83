#!/usr/bin/env bash
# tools/test.sh — run every test suite through `meson test` and print, last, the one
# summary line "N passed, M failed" summed over suites. Exit status non-zero on any failure.
#   tools/test.sh [BUILD_DIR]          default BUILD_DIR: build
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ -z "${GFLOW_DATA_MIRROR:-}" ] && [ -d ../shared/datasets ]; then
  export GFLOW_DATA_MIRROR=$(cd ../shared/datasets && pwd)
fi
log=$(mktemp)
ninja -C "$build" >/dev/null || { echo "test: build failed"; echo "0 passed, 1 failed"; exit 1; }
meson test -C "$build" --no-rebuild --print-errorlogs -v --num-processes 1 \
  --suite unit --suite grad --suite golden --suite data --suite smoke --suite mpi --suite cuda 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
read -r p f < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" |
                awk '{p += $1; f += $3} END {print p + 0, f + 0}')
rm -f "$log"
# The PyTorch side of the golden tests: regenerate every fixture in memory and compare with the
# committed files (skipped, and said so, when Debian's python3-torch is not installed).
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  for fx in tools/make_fixtures.py tools/make_fixtures_nli.py; do
    if /usr/bin/python3 "$fx" --check; then echo "ok    python/$fx --check"; p=$((p + 1))
    else echo "FAIL  python/$fx --check"; f=$((f + 1)); fi
  done
else
  echo "SKIP  python fixture checks: /usr/bin/python3 lacks torch/numpy (apt-get install python3-torch)"
fi
if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi   # a crashed suite counts as a failure
echo "$p passed, $f failed"
[ "$rc" = 0 ] && [ "$f" = 0 ]
