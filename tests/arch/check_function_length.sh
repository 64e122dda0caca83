#!/usr/bin/env bash
# tests/arch/check_function_length.sh SRC_ROOT [MAX] — fails, naming file:line, on any function
# longer than MAX lines (default 80) in src/train, src/nn and src/cli (docs/architecture.md).
# A function runs from its signature (a name and "(" at column 0, the "{" ending it or a
# following line) to the next "}" at column 0.
set -uo pipefail
root=${1:?usage: check_function_length.sh SRC_ROOT [MAX]}
max=${2:-80}
bad=0
for f in "$root"/src/train/*.c "$root"/src/nn/*.c "$root"/src/cli/*.c; do
  out=$(awk -v max="$max" -v file="${f#$root/}" '
    # a signature starts at column 0 with a name and "(", possibly over several lines
    !start && !cand && /^[A-Za-z_][A-Za-z0-9_ *]*\(/ && !/^(typedef|struct|enum|union)/ && !/;[ ]*$/ { cand = NR; name = $0 }
    cand && !start && /\{[ ]*$/ { start = cand; cand = 0; next }
    cand && !start && /;[ ]*$/ { cand = 0 }
    start && /^\}/ { n = NR - start + 1; if (n > max) printf "%s:%d: function of %d lines (max %d): %s\n", file, start, n, max, name; start = 0 }
  ' "$f")
  if [ -n "$out" ]; then echo "$out"; bad=1; fi
done
if [ $bad = 0 ]; then echo "ok: no function over $max lines in src/train, src/nn, src/cli"; echo "1 passed, 0 failed"
else echo "0 passed, 1 failed"; fi
exit $bad
