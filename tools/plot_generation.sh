#!/usr/bin/env bash
# tools/plot_generation.sh OUT.png FILE... — decode time per token against the context length
# from the tables that `gflow bench RECIPE --generate` and `tools/bench_torch.py RECIPE
# --generate` print (saved to FILE): one line per table ("generate: family=... impl=..."
# header, then "ctx<TAB>...<TAB>decode_ms_per_step..." rows), log-log, with gnuplot.
# Used for docs/generation.png (docs/performance.md, "Generation"). Titles reach gnuplot only
# quoted, the data inline (tools/gnuplot_lib.sh).
set -euo pipefail
. "$(dirname "$0")/gnuplot_lib.sh"
out=$1; shift
[ $# -gt 0 ] || { echo "usage: tools/plot_generation.sh OUT.png FILE..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k=0 j=0
data="" plot=""
for f in "$@"; do
  [ -f "$f" ] || { echo "plot_generation: $f: no such file" >&2; exit 1; }
  # split the file into one data file per table; title: family, impl (default gflow), rows
  awk -F'\t' -v dir="$tmp" -v base="$k" '
    /^generate: / { n++; fam = "?"; impl = "gflow"; rows = 1
                    for (i = 2; i <= split($0, w, " "); i++) { split(w[i], kv, "=")
                      if (kv[1] == "family") fam = kv[2]; if (kv[1] == "impl") impl = kv[2]; if (kv[1] == "rows") rows = kv[2] }
                    file = dir "/" base "_" n ".tsv"; print "# " fam " " impl (rows > 1 ? " x" rows : "") > file; next }
    /^ctx\t/ { for (i = 1; i <= NF; i++) if ($i == "decode_ms_per_step") col = i; next }
    n && $1 ~ /^[0-9]+$/ && col { print $1 "\t" $col > file }' "$f"
  for d in "$tmp/${k}"_*.tsv; do
    [ -f "$d" ] || continue
    j=$((j + 1))
    data+=$(tail -n +2 "$d" | gp_block "d$j")$'\n'
    plot+="${plot:+, }\$d$j using 1:2 with linespoints lw 2 title $(gp_quote "$(head -1 "$d" | cut -c3-)")"
  done
  k=$((k + 1))
done
[ -n "$plot" ] || { echo "plot_generation: no tables found in $*" >&2; exit 1; }
gp_png "$out" <<GP
set terminal pngcairo size 900,540
$data
set xlabel 'context length (tokens)'
set ylabel 'decode time per step (ms)'
set logscale xy
set key top left
set grid
plot $plot
GP
echo "wrote $out"
