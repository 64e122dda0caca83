#!/usr/bin/env bash
# tools/plot_runs.sh OUT.png RUN_DIR... — training loss (running mean over 10 steps) against step
# for several runs, from their metrics.tsv, with gnuplot. Used for docs/results.md.
set -euo pipefail
out=$1; shift
[ $# -gt 0 ] || { echo "usage: tools/plot_runs.sh OUT.png RUN_DIR..." >&2; exit 2; }
tmp=$(mktemp -d)
plot=""
for d in "$@"; do
  name=$(basename "$d")
  awk -F'\t' '$3 == "train" && $4 != "-" { s[NR % 10] = $4; n++; k = n < 10 ? n : 10; t = 0;
       for (i in s) t += s[i]; print $1 "\t" t / k }' "$d/metrics.tsv" > "$tmp/$name.tsv"
  plot+="${plot:+, }'$tmp/$name.tsv' using 1:2 with lines lw 2 title '$name'"
done
gnuplot <<GP
set terminal pngcairo size 900,540
set output '$out'
set xlabel 'step'
set ylabel 'training loss (nats/token, mean of last 10 steps)'
set key top right
set grid
plot $plot
GP
rm -rf "$tmp"
echo "wrote $out"
