#!/usr/bin/env bash
# tools/scaling.sh — gflow training throughput and peak RSS against sequence length for both
# families at a fixed number of tokens per step (B = TOKENS / L), written as a table
# (docs/scaling.tsv) and a plot (docs/scaling.png); prints the crossover length where the
# GrassmannLM becomes faster than the TransformerLM.
#   tools/scaling.sh [--tokens 4096] [--vocab 8192] [--threads 2] [--steps 2] [--warmup 2]
#                    [--lens "128 256 512 1024 2048 4096"] [--out docs]
# The vocabulary is reduced (default 8192) so that the tied head, identical in both families
# and linear in L, does not hide the mixers' scaling; --vocab 30522 gives the paper's size.
#   env BUILD (build) picks the build dir holding ./gflow.
set -uo pipefail
cd "$(dirname "$0")/.."
tokens=4096 vocab=8192 threads=2 steps=2 warmup=2 lens="128 256 512 1024 2048 4096" out=docs
while [ $# -gt 0 ]; do
  case $1 in
    --tokens) tokens=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --lens) lens=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "scaling.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
gflow=${BUILD:-build}/gflow
[ -x "$gflow" ] || { echo "scaling.sh: $gflow not built" >&2; exit 1; }
field() { grep -E "^$1: " | head -1 | sed -E "s/^$1: ([0-9.eE+-]+).*/\1/"; }
mkdir -p "$out"
tsv=$out/scaling.tsv
{
  echo "# tools/scaling.sh --tokens $tokens --vocab $vocab --threads $threads --steps $steps --warmup $warmup"
  echo "# $(date -u +%FT%TZ) $(nproc) cores, load before $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
  printf "# L\tB\tgrassmann_tok_s\tgrassmann_rss_mb\ttransformer_tok_s\ttransformer_rss_mb\n"
} > "$tsv"
for L in $lens; do
  B=$((tokens / L)); [ "$B" -lt 1 ] && B=1
  row="$L\t$B"
  for fam in grassmann transformer; do
    o=$("$gflow" bench recipes/wikitext2.ini --threads "$threads" --steps "$steps" --warmup "$warmup" --peak-n 0 \
        --no-profile --seq-len "$L" --batch "$B" --set model.family=$fam --set tokenizer.vocab_size="$vocab" \
        --set model.max_len="$L") || exit 1
    row="$row\t$(echo "$o" | field tokens_per_s)\t$(echo "$o" | field peak_rss_mb)"
  done
  printf "$row\n" | tee -a "$tsv"
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$tsv"
# crossover: the smallest measured L from which the Grassmann model is faster at every longer L
cross=$(awk '!/^#/ && $1 ~ /^[0-9]+$/ { if ($3 > $5) { if (c == "") c = $1 } else c = "" } END { print c }' "$tsv")
echo "# crossover: GrassmannLM faster than TransformerLM from L = ${cross:-none of the lengths measured}" | tee -a "$tsv"
if command -v gnuplot >/dev/null; then
  . tools/gnuplot_lib.sh # (the script runs from the source root)
  # the table inline and the title quoted: --out and the numbers given reach gnuplot as text only
  data=$(grep -v '^#' "$tsv" | gp_block s)
  title=$(gp_quote "gflow, $threads threads, V = $vocab, $tokens tokens/step")
  xlabel=$(gp_quote "sequence length L (B = $tokens / L)")
  gp_png "$out/scaling.png" <<GP && echo "plot: $out/scaling.png"
set terminal pngcairo size 900,420 font ",10"
$data
set key top right
set logscale x 2
set xlabel $xlabel
set multiplot layout 1,2 title $title
set ylabel "training tokens/s"
plot \$s using 1:3 with linespoints title "GrassmannLM", \$s using 1:5 with linespoints title "TransformerLM"
set ylabel "peak RSS (MB)"
plot \$s using 1:4 with linespoints title "GrassmannLM", \$s using 1:6 with linespoints title "TransformerLM"
unset multiplot
GP
fi
