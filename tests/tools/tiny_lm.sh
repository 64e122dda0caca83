# tests/tools/tiny_lm.sh — sourced by the tools' tests and tests/mpi/test_mpi.sh: the tiny language
# model they train on the CPU in seconds, and what the tools' tests share.
#
# tool_test ROOT GFLOW sets root, gflow (absolute) and GFLOW (exported, as the tools read it),
# tmp (a directory removed at exit) and fail=0; check NAME CONDITION prints "ok   NAME" or
# "FAIL NAME" (and sets fail=1) as CONDITION, eval'd, holds or not.
tool_test() {
  root=$1 gflow=$(realpath "$2")
  export GFLOW=$gflow
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  fail=0
}
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

# tiny_lm DIR [LAYERS] [EPOCHS] writes DIR/data/{train,valid,test}.txt (three random words and a
# full stop a line) and DIR/tiny.ini (the word tokenizer, a GrassmannLM of LAYERS layers, default
# 1, d 16, L 16, batch 4, EPOCHS epochs, default 2; runs in DIR/runs).
tiny_lm() {
  local dir=$1 layers=${2:-1} epochs=${3:-2} s n i
  local words=(the cat dog sat ran on a mat and then big small red blue)
  mkdir -p "$dir/data"
  for s in train valid test; do
    n=400; [ "$s" = train ] || n=40
    for ((i = 0; i < n; i++)); do echo " ${words[RANDOM % 14]} ${words[RANDOM % 14]} ${words[RANDOM % 14]} . "; done >"$dir/data/$s.txt"
  done
  cat >"$dir/tiny.ini" <<INI
[run]
name = tiny
out_dir = $dir/runs
threads = 1
[data]
dataset = wikitext2
dir = $dir/data
train_file = train.txt
valid_file = valid.txt
test_file = test.txt
seq_len = 16
[tokenizer]
kind = word
train_file = train.txt
cache_dir = $dir/cache
[model]
family = grassmann
n_layers = $layers
d_model = 16
d_ff = 32
r = 4
offsets = 1,2
[optim]
lr = 1e-2
[schedule]
kind = constant
[train]
epochs = $epochs
batch_size = 4
INI
}
