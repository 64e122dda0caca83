#!/usr/bin/env bash
# tools/plot_valid.sh OUT.png RUN_DIR... — validation perplexity (every valid row of metrics.tsv,
# per model token) against training tokens seen, for several runs, from their metrics.tsv and
# recipe.ini (tokens = step * batch_size * seq_len), with gnuplot. Used for docs/results.md.
# Names and paths reach gnuplot only as quoted titles (tools/gnuplot_lib.sh).
set -euo pipefail
. "$(dirname "$0")/gnuplot_lib.sh"
out=$1; shift
[ $# -gt 0 ] || { echo "usage: tools/plot_valid.sh OUT.png RUN_DIR..." >&2; exit 2; }
data="" plot="" i=0
for d in "$@"; do
  [ -f "$d/metrics.tsv" ] && [ -f "$d/recipe.ini" ] || { echo "plot_valid: $d: no metrics.tsv/recipe.ini" >&2; exit 1; }
  gp_metrics_check "$d/metrics.tsv" || exit 1
  i=$((i + 1))
  # recipe.ini: "[train]\nbatch_size = B" and "[data]\nseq_len = L"
  tok=$(awk -F' *= *' '/^\[/ { sec = $0 } sec == "[train]" && $1 == "batch_size" { b = $2 }
                       sec == "[data]" && $1 == "seq_len" { l = $2 } END { print b * l }' "$d/recipe.ini")
  # the last valid row at each step (a step can be evaluated twice: mid-epoch and final)
  data+=$(awk -F'\t' -v t="$tok" '$3 == "valid" { v[$1] = $5; if (!($1 in seen)) { seen[$1] = 1; o[n++] = $1 } }
       END { for (i = 0; i < n; i++) print o[i] * t / 1e6 "\t" v[o[i]] }' "$d/metrics.tsv" | gp_block "d$i")$'\n'
  plot+="${plot:+, }\$d$i using 1:2 with linespoints lw 2 title $(gp_quote "$(basename -- "$d")")"
done
gp_png "$out" <<GP
set terminal pngcairo size 900,540
$data
set xlabel 'training tokens seen (millions)'
set ylabel 'validation perplexity (per token)'
set logscale y
set key top right noenhanced
set grid
plot $plot
GP
echo "wrote $out"
