#!/usr/bin/env bash
# tools/plot_runs.sh OUT.png RUN_DIR... — training loss (running mean over 10 steps) against step
# for several runs, from their metrics.tsv, with gnuplot. Used for docs/results.md.
# Names and paths reach gnuplot only as quoted titles (tools/gnuplot_lib.sh).
set -euo pipefail
. "$(dirname "$0")/gnuplot_lib.sh"
out=$1; shift
[ $# -gt 0 ] || { echo "usage: tools/plot_runs.sh OUT.png RUN_DIR..." >&2; exit 2; }
data="" plot="" i=0
for d in "$@"; do
  gp_metrics_check "$d/metrics.tsv" || exit 1
  i=$((i + 1))
  data+=$(awk -F'\t' '$3 == "train" && $4 != "-" { s[NR % 10] = $4; n++; k = n < 10 ? n : 10; t = 0;
       for (j in s) t += s[j]; print $1 "\t" t / k }' "$d/metrics.tsv" | gp_block "d$i")$'\n'
  plot+="${plot:+, }\$d$i using 1:2 with lines lw 2 title $(gp_quote "$(basename -- "$d")")"
done
gp_png "$out" <<GP
set terminal pngcairo size 900,540
$data
set xlabel 'step'
set ylabel 'training loss (nats/token, mean of last 10 steps)'
set key top right noenhanced
set grid
plot $plot
GP
echo "wrote $out"
