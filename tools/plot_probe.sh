#!/usr/bin/env bash
# tools/plot_probe.sh [KIND...] — regenerate docs/probes/ (tables and images of docs/probes.md)
# from the reduced-scale study's checkpoints: `gflow probe KIND A B` for the two pairs of runs
# (pre-ln vs transformer-pre-ln, the comparably trained pair; base vs transformer, both post-LN),
# then copies each run's probe-*.{tsv,png} and the overlays into docs/probes/<run>/ and
# docs/probes/. The plots themselves are drawn by `gflow probe` (gnuplot). KIND defaults to
# "curvature pca hessian"; the Hessian takes ~25 min on 2 busy cores.
set -euo pipefail
cd "$(dirname "$0")/.."
GFLOW=${GFLOW:-build/gflow}
STUDY=${STUDY:-checkpoints/ablations/study}
OUT=docs/probes
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
kinds=${*:-curvature pca hessian}
pairs=("pre-ln transformer-pre-ln" "base transformer")
mkdir -p "$OUT"
for k in $kinds; do
  case $k in curvature|pca|hessian) ;; *) echo "usage: tools/plot_probe.sh [curvature|pca|hessian]..." >&2; exit 2 ;; esac
  for p in "${pairs[@]}"; do
    set -- $p
    start=$(date +%s)
    "$GFLOW" probe "$k" "$STUDY/$1" "$STUDY/$2"
    echo "plot_probe: $k $1 vs $2: $(( $(date +%s) - start )) s" >&2
    for r in "$1" "$2"; do
      mkdir -p "$OUT/$r"
      cp "$STUDY/$r"/probe-"$k"*.tsv "$STUDY/$r"/probe-"$k"*.png "$OUT/$r/" 2>/dev/null || true
      rm -f "$OUT/$r"/probe-"$k"-*-vs-*.*   # overlays go one level up
      rm -f "$OUT/$r"/probe-pca-points.tsv  # the scatter's raw points (700 kB): regenerable
    done
    cp "$STUDY/$1/probe-$k-$1-vs-$2.tsv" "$STUDY/$1/probe-$k-$1-vs-$2.png" "$OUT/"
  done
done
echo "wrote $OUT"
