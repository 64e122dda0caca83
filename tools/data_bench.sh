#!/usr/bin/env bash
# tools/data_bench.sh — dataset = text at scale: tokenization MB/s into the token cache with 1
# and 2 threads, SentencePiece's own spm_encode on the same file, peak RSS while tokenizing and
# while training (beside the same model on WikiText-2), and the time to the first training step
# with the cache warm; prints a markdown table (also written to DIR/table.md).
#   tools/data_bench.sh [--size MB] [--corpus FILE] [--work DIR] [--steps N]
# --size (default 50): the corpus is made by tools/make_corpus.sh (shuffled copies of WikiText-2
# train) as DIR/corpus.txt, unless --corpus names one. The text recipe splits it 98/1/1 % and
# reads it through the SentencePiece BPE 8,192 tokenizer trained on WikiText-2 train (cached after
# the first run), the quickstart model (2 layers, d 128, L 64, batch 16) trains N steps (default
# 20). Tokenizing: a cold `gflow train --set train.max_steps=1`, its caches deleted first; the MB/s
# are the train part's bytes over the seconds its `data:` line reports (sha256, tokenizing,
# writing, checking and mapping the cache); its peak RSS is that process's. Needs /usr/bin/time
# (Debian time) and spm_encode (Debian sentencepiece). env BUILD (build) picks the build dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
size=50 corpus="" work=/tmp/gflow-data-bench steps=20
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "data_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
gflow=$root/${BUILD:-build}/gflow
[ -x "$gflow" ] || { echo "data_bench.sh: $gflow not built" >&2; exit 1; }
for t in /usr/bin/time spm_encode; do command -v $t > /dev/null || { echo "data_bench.sh: $t not installed (tools/setup.sh)" >&2; exit 1; }; done
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -rf "$work/runs"
if [ -z "$corpus" ]; then
  corpus=$work/corpus.txt
  want=$((size * 1000000))
  [ -f "$corpus" ] && [ "$(stat -c %s "$corpus")" -ge "$want" ] && [ "$(stat -c %s "$corpus")" -lt $((want + 2000000)) ] ||
    "$root/tools/make_corpus.sh" "$corpus" "$size"
fi
corpus=$(cd "$(dirname "$corpus")" && pwd)/$(basename "$corpus")
wt=$("$gflow" data dir | awk -F'\t' '$1 == "data" {print $2}')/wikitext-2/wiki.train.tokens
[ -n "${GFLOW_DATA_MIRROR:-}" ] && wt=$GFLOW_DATA_MIRROR/wikitext-2/wiki.train.tokens
[ -f "$wt" ] || { echo "data_bench.sh: $wt not found (gflow data fetch wikitext2, or set GFLOW_DATA_MIRROR)" >&2; exit 1; }
wt=$(cd "$(dirname "$wt")" && pwd)/$(basename "$wt") # a relative mirror would resolve under each recipe's data dir

recipe() { # dataset-lines
  cat <<INI
[run]
name = bench
out_dir = $work/runs
threads = 2
[data]
$1
seq_len = 64
[tokenizer]
kind = spm
vocab_size = 8192
train_file = $wt
cache_dir = $work/cache
[model]
family = grassmann
n_layers = 2
d_model = 128
d_ff = 512
r = 16
[optim]
lr = 3e-3
[train]
epochs = 1
batch_size = 16
max_steps = $steps
log_every = 1
eval_batches = 1
INI
}
recipe "dataset = text
dir = $(dirname "$corpus")
file = $(basename "$corpus")
valid_fraction = 0.01
test_fraction = 0.01" > "$work/text.ini"
recipe "dataset = wikitext2" > "$work/wikitext2.ini"

"$gflow" data encode "$work/text.ini" < /dev/null > /dev/null # split the corpus, train or load the tokenizer
part=$(ls -d "$work"/cache/text/"$(basename "$corpus")".*/ | head -1)train.txt
bytes=$(stat -c %s "$part")
model=$(ls "$work"/cache/spm-bpe-8192-*.model | head -1)
rss() { awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$1"; }

# run NAME RECIPE [--set ...]: gflow train under /usr/bin/time -v; $work/NAME.{log,time,first}
run() {
  local name=$1 ini=$2 t0
  shift 2
  t0=$(date +%s.%N)
  /usr/bin/time -v -o "$work/$name.time" "$gflow" train "$ini" --set run.name="$name" "$@" 2>&1 >/dev/null |
    while IFS= read -r l; do
      echo "$l" >> "$work/$name.log"
      case $l in "step 1/"*) awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}' > "$work/$name.first" ;; esac
    done
}
rm -f "$work"/{tok1,tok2,warm,wt2}.{log,first} # only its own: a log of the caller's may sit beside them
declare -A mbs rs
for th in 1 2; do
  rm -f "$work"/cache/*.tok
  run tok$th "$work/text.ini" --set run.threads=$th --set train.max_steps=1
  secs=$(grep -E "train.txt: [0-9]+ tokens \(tokenized" "$work/tok$th.log" | sed -E 's/.*tokenized, ([0-9.]+) s\).*/\1/')
  mbs[$th]=$(awk -v b="$bytes" -v s="$secs" 'BEGIN {printf "%.1f", b / 1e6 / s}')
  rs[$th]=$(rss "$work/tok$th.time")
done
t0=$(date +%s.%N)
spm_encode --model="$model" --output_format=id < "$part" > /dev/null
spm=$(awk -v b="$bytes" -v a="$(date +%s.%N)" -v t="$t0" 'BEGIN {printf "%.1f", b / 1e6 / (a - t)}')
run warm "$work/text.ini"
run wt2 "$work/wikitext2.ini"
tokens=$(grep -oE "train.txt: [0-9]+ tokens" "$work/tok2.log" | grep -oE "[0-9]+" | head -1)

{
  echo "| measure ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB train part, $tokens tokens, $(nproc) cores) | value |"
  echo "|---|---|"
  echo "| gflow tokenization, 1 thread | ${mbs[1]} MB/s |"
  echo "| gflow tokenization, 2 threads | ${mbs[2]} MB/s |"
  echo "| spm_encode (1 process, ids to /dev/null) | $spm MB/s |"
  echo "| peak RSS tokenizing (cold run, 1 / 2 threads) | ${rs[1]} / ${rs[2]} MB |"
  echo "| peak RSS training $steps steps, text (cache warm) | $(rss "$work/warm.time") MB |"
  echo "| peak RSS training $steps steps, WikiText-2 (same model) | $(rss "$work/wt2.time") MB |"
  echo "| time to the first step, cache warm | $(cat "$work/warm.first") s |"
} | tee "$work/table.md"
