#!/usr/bin/env bash
# tests/mpi/test_mpi.sh GFLOW mpi|nompi — data-parallel training on loopback (mpirun -np 2 on
# this host); for a build without MPI (nompi), that it refuses to run under a launcher.
# Prints one "ok/FAIL name" line per check and, last, "N passed, M failed".
# --oversubscribe and --allow-run-as-root belong here only: CI runs as root on 2 cores.
set -uo pipefail
gflow=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "ok    mpi/$1"; pass=$((pass + 1)); }
bad() { echo "FAIL  mpi/$1: $2"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

mode=${2:-mpi}
if [ "$mode" = nompi ]; then
  # what mpirun would set: N copies must not each train into the same run directory
  out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$gflow" train /dev/null 2>&1); rc=$?
  if [ $rc = 1 ] && grep -q "built without MPI" <<< "$out"; then ok refuses_launcher_without_mpi
  else bad refuses_launcher_without_mpi "rc $rc: $out"; fi
  finish
fi
if ! command -v mpirun >/dev/null; then
  bad launcher "mpirun not found (apt-get install openmpi-bin)"; finish
fi
mpi() { # mpi N args... — 2 ranks on this host, no core binding (each rank runs OpenMP threads)
  local n=$1; shift
  timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$gflow" "$@"
}

# A small corpus with learnable structure (the grammar of tests/train/test_train.c).
gen() {
  awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed)
    split("the cat|a dog|the old man|my sister|the bird|a child", S, "|")
    split("sees|likes|finds|follows|hears", V, "|")
    split("the ball|a house|the river|some bread|the moon|a tree", O, "|")
    for (i = 0; i < n; i++)
      printf " %s %s %s . and then %s %s %s . \n", S[int(rand()*6)+1], V[int(rand()*5)+1], O[int(rand()*6)+1],
             S[int(rand()*6)+1], V[int(rand()*5)+1], O[int(rand()*6)+1] }'
}
# tiny_lm's recipe (tests/tools/tiny_lm.sh) on this corpus, larger, with dropout off, clipping and a
# cosine schedule, and every core
# shellcheck source=tests/tools/tiny_lm.sh
source "$(dirname "$0")/../tools/tiny_lm.sh"
tiny_lm "$tmp/lm" 2 3
gen 600 1 > "$tmp/lm/data/train.txt"; gen 60 2 > "$tmp/lm/data/valid.txt"; gen 60 3 > "$tmp/lm/data/test.txt"
cat > "$tmp/tiny.ini" <<INI
[run]
base = lm/tiny.ini
seed = 7
out_dir = $tmp/runs
threads = 0
[model]
d_model = 32
d_ff = 64
r = 6
offsets = 1,2,4
dropout = 0
[optim]
clip = 1.0
[schedule]
kind = cosine
warmup_steps = 5
min_lr = 1e-3
[train]
epochs = 3
batch_size = 8
log_every = 1000
eval_every = 10
eval_batches = 3
INI
R=$tmp/runs
sed -e 's/^epochs = 3/epochs = 40/' "$tmp/tiny.ini" > "$tmp/long.ini"

# max relative difference of the loss column over all rows of two metrics.tsv files (same rows)
maxrel() {
  paste "$1" "$2" | awk -F'\t' 'NR > 1 { if ($1 != $10 || $3 != $12) { print "rows differ at line " NR; bad = 1; exit }
      if ($4 == "-") next; d = $4 - $13; if (d < 0) d = -d; r = d / ($4 < 0 ? -$4 : $4); if (r > m) m = r }
      END { if (!bad) printf "%.3g\n", m + 0 }'
}
# rank_pid RANK FILE LINES: once FILE has more than LINES lines, the pid of that rank's gflow
rank_pid() {
  for _ in $(seq 1 600); do
    if [ -f "$2" ] && [ "$(wc -l < "$2")" -gt "$3" ]; then
      for p in $(pgrep -f "$gflow train"); do
        if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
      done
    fi
    sleep 0.05
  done
}
within() { awk -v x="$1" -v t="$2" 'BEGIN { exit !(x + 0 <= t + 0) }'; }

# 1. N=2 reproduces the single-process curve (dropout off; 1b: on): the summation order of the gradient
#    differs, so the loss agrees to float tolerance, not bitwise. Tolerance 1e-4 relative over
#    216 steps (measured: ~1e-6).
"$gflow" train "$tmp/tiny.ini" --set run.name=n1 --quiet || bad single_process "exit $?"
mpi 2 train "$tmp/tiny.ini" --set run.name=n2 --quiet > "$tmp/n2.log" 2>&1
rc=$?
if [ $rc != 0 ]; then bad two_ranks_train "exit $rc: $(tail -3 "$tmp/n2.log")"
else
  d=$(maxrel "$R/n1/metrics.tsv" "$R/n2/metrics.tsv")
  if within "$d" 1e-4 && [ "$(wc -l < "$R/n1/metrics.tsv")" = "$(wc -l < "$R/n2/metrics.tsv")" ]; then
    ok "two_ranks_match_single_process (max rel loss diff $d over $(grep -c train "$R/n2/metrics.tsv") steps)"
  else bad two_ranks_match_single_process "max rel diff $d"; fi
  # a broken reduction (no averaging, or one rank's slice only) moves the loss by far more
  l1=$(awk -F'\t' '$3 == "test" {print $4}' "$R/n1/metrics.tsv"); l2=$(awk -F'\t' '$3 == "test" {print $4}' "$R/n2/metrics.tsv")
  if [ -n "$l2" ] && within "$(awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; print (d < 0 ? -d : d) }')" 1e-4; then
    ok "two_ranks_test_loss ($l1 vs $l2)"; else bad two_ranks_test_loss "single $l1, two ranks $l2"; fi
  # only rank 0 writes: one header, one line per step
  if [ "$(grep -c '^step' "$R/n2/metrics.tsv")" = 1 ] && [ "$(awk -F'\t' '$3 == "train"' "$R/n2/metrics.tsv" | wc -l)" = 216 ]; then
    ok rank0_alone_writes; else bad rank0_alone_writes "metrics.tsv has duplicate lines"; fi
fi

# 1b. The same with dropout on (every shipped recipe): the masks are keyed by the global batch row
#     (src/ops/dropout.c), so 2 ranks draw the single process's masks and stay on its curve; a
#     resume with another N too. Masks drawn per rank instead (before issue 20 item 23) differ
#     from step 1 and reach a relative loss difference of 5e-2 (resumed: 5e-2) in this run.
sed -e 's/^dropout = 0$/dropout = 0.1/' "$tmp/tiny.ini" > "$tmp/drop.ini"
"$gflow" train "$tmp/drop.ini" --set run.name=d1 --quiet || bad dropout_single_process "exit $?"
mpi 2 train "$tmp/drop.ini" --set run.name=d2 --quiet > "$tmp/d2.log" 2>&1
rc=$?
if [ $rc != 0 ]; then bad dropout_two_ranks_train "exit $rc: $(tail -3 "$tmp/d2.log")"
else
  d=$(maxrel "$R/d1/metrics.tsv" "$R/d2/metrics.tsv")
  if within "$d" 1e-4 && [ "$(wc -l < "$R/d1/metrics.tsv")" = "$(wc -l < "$R/d2/metrics.tsv")" ]; then
    ok "dropout_two_ranks_match_single_process (max rel loss diff $d)"
  else bad dropout_two_ranks_match_single_process "max rel diff $d"; fi
fi
mpi 2 train "$tmp/drop.ini" --set run.name=d21 --quiet --stop-after 50 > "$tmp/d21.log" 2>&1
"$gflow" train --resume "$R/d21" --quiet > "$tmp/d21b.log" 2>&1
d=$(maxrel "$R/d1/metrics.tsv" "$R/d21/metrics.tsv")
if within "$d" 1e-4; then ok "dropout_resume_2_ranks_as_1 (max rel diff $d)"
else bad dropout_resume_2_ranks_as_1 "$d; $(tail -2 "$tmp/d21b.log")"; fi

# 2. Resume with a different N: stop N=2 at step 50, continue with N=1 (and the reverse); both
#    end on the uninterrupted curve.
mpi 2 train "$tmp/tiny.ini" --set run.name=r21 --quiet --stop-after 50 > "$tmp/r21.log" 2>&1
"$gflow" train --resume "$R/r21" --quiet > "$tmp/r21b.log" 2>&1
d=$(maxrel "$R/n1/metrics.tsv" "$R/r21/metrics.tsv")
if within "$d" 1e-4; then ok "resume_2_ranks_as_1 (max rel diff $d)"; else bad resume_2_ranks_as_1 "$d; $(tail -2 "$tmp/r21b.log")"; fi
"$gflow" train "$tmp/tiny.ini" --set run.name=r12 --quiet --stop-after 50 > "$tmp/r12.log" 2>&1
mpi 2 train --resume "$R/r12" --quiet > "$tmp/r12b.log" 2>&1
d=$(maxrel "$R/n1/metrics.tsv" "$R/r12/metrics.tsv")
if within "$d" 1e-4; then ok "resume_1_rank_as_2 (max rel diff $d)"; else bad resume_1_rank_as_2 "$d; $(tail -2 "$tmp/r12b.log")"; fi

# 3. A batch that does not divide among the ranks: a clear error, no hang, nothing written.
out=$(mpi 2 train "$tmp/tiny.ini" --set run.name=odd --set train.batch_size=7 2>&1); rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "batch_size = 7 does not divide among 2 ranks" <<< "$out" && [ ! -e "$R/odd/last.ckpt" ]; then
  ok indivisible_batch_refused; else bad indivisible_batch_refused "rc $rc: $out"; fi

# 4. Rank 0 cannot use the run directory (it holds a run): every rank stops, message said once.
out=$(mpi 2 train "$tmp/tiny.ini" --set run.name=n1 2>&1); rc=$?
if [ $rc = 1 ] && [ "$(grep -c 'already holds a run' <<< "$out")" = 1 ] && ! grep -q "MPI_ABORT" <<< "$out"; then
  ok existing_run_refused_once; else bad existing_run_refused_once "rc $rc: $out"; fi

# 4b. Commands that are not data-parallel refuse to run as N copies (they would write the same files).
out=$(mpi 2 eval "$R/n1" 2>&1); rc=$?
if [ $rc = 2 ] && grep -q "only \`train\` and \`bench\` run data-parallel" <<< "$out"; then ok other_commands_refuse_launcher
else bad other_commands_refuse_launcher "rc $rc: $out"; fi

# 5. Ctrl-C reaches one rank only (kill -INT to rank 0): the ranks agree to stop after the same
#    step, last.ckpt is saved, exit 130, and the run resumes to its end.
mpi 2 train "$tmp/long.ini" --set run.name=sig --quiet > "$tmp/sig.log" 2>&1 &
job=$!
r0=$(rank_pid 0 "$R/sig/metrics.tsv" 30)
if [ -z "$r0" ]; then bad sigint_one_rank "no rank-0 process found"; kill $job 2>/dev/null; wait $job
else
  kill -INT "$r0"; wait $job; rc=$?
  last=$(awk -F'\t' '$3 == "train" {s = $1} END {print s}' "$R/sig/metrics.tsv")
  if [ $rc = 130 ] && "$gflow" train --resume "$R/sig" --quiet --stop-after $((last + 5)) > "$tmp/sig2.log" 2>&1; then
    ok "sigint_one_rank_stops_all (stopped after step $last, exit 130, resumed)"
  else bad sigint_one_rank_stops_all "rc $rc: $(tail -3 "$tmp/sig.log") $(tail -2 "$tmp/sig2.log")"; fi
fi

# 6. A rank dies mid-run (SIGKILL): the job ends (no hang) with a message, and the last
#    checkpoint is intact: the run resumes from it to the end.
mpi 2 train "$tmp/long.ini" --set run.name=kill --quiet > "$tmp/kill.log" 2>&1 &
job=$!
victim=$(rank_pid 1 "$R/kill/metrics.tsv" 30)  # past step 20: last.ckpt exists
if [ -z "$victim" ]; then bad rank_death "no rank-1 process found"; kill $job 2>/dev/null; wait $job
else
  kill -9 "$victim"
  wait $job; rc=$?
  if [ $rc != 0 ] && [ $rc != 124 ] && grep -qiE "exited on signal 9|killed|died" "$tmp/kill.log"; then
    ok "rank_death_ends_job (mpirun exit $rc: $(grep -iE 'exited on signal|died' "$tmp/kill.log" | head -1 | sed 's/^ *//'))"
  else bad rank_death_ends_job "rc $rc: $(tail -5 "$tmp/kill.log")"; fi
  if "$gflow" train --resume "$R/kill" --quiet --stop-after 400 > "$tmp/kill2.log" 2>&1; rc=$?; [ $rc = 0 ] || [ $rc = 130 ]; then
    ok "checkpoint_intact_after_rank_death (resumed to step 400)"
  else bad checkpoint_intact_after_rank_death "$(tail -3 "$tmp/kill2.log")"; fi
fi
finish
