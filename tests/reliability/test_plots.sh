#!/usr/bin/env bash
# test_plots.sh SOURCE_ROOT GFLOW — issue 35, items 3 and 5: a run directory named with $(touch
# PWNED), a backtick, quotes, a space and a newline is plotted by `gflow compare` and by
# tools/plot_runs.sh and plot_valid.sh (`gflow ablate --report` with a study directory so named,
# but for the newline), and nothing runs; a plot cut by a file-size limit (ulimit -f, as a full disk) is an error naming the PNG,
# which keeps the previous plot, and "plot: FILE" is not printed; a plot onto a fifo is refused;
# the tools refuse a metrics.tsv that is not one, naming file:line (issue 48 item 11).
# Skipped (77) without gnuplot. Run directories are made by hand (metrics.tsv, recipe.ini).
set -uo pipefail
root=$1 gflow=$(realpath "$2")
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot is not installed"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
png_ok() { [ "$(tail -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 49454e44ae426082 ]; }
pwned() { [ -n "$(find "$tmp" / -maxdepth 1 -name 'PWNED*' 2>/dev/null)" ] || [ -n "$(find "$tmp" -name 'PWNED*')" ]; }

bad=$'run $(touch PWNED1) `touch PWNED2` it\'s "q"\nline2'
fake_run() { # DIR: a finished run's metrics.tsv (train and valid rows) and recipe.ini
  mkdir -p "$1"
  printf 'step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n' >"$1/metrics.tsv"
  for s in 1 2 3 4 5 6 7 8 9 10; do
    printf '%d\t0\ttrain\t%.3f\t-\t-\t-\t0.001\t1.0\n' $s "$(echo "5 - $s / 5" | bc -l)" >>"$1/metrics.tsv"
    [ $((s % 5)) = 0 ] && printf '%d\t0\tvalid\t3.0\t%d.5\t-\t-\t-\t-\n' $s $((40 - s)) >>"$1/metrics.tsv"
  done
  printf '[data]\nseq_len = 16\n[train]\nbatch_size = 4\n' >"$1/recipe.ini"
}
fake_run "$bad"
fake_run plain

out=$("$gflow" compare "$bad" plain --plot c.png 2>err.txt); rc=$?
check "compare: odd run name plotted (exit $rc: $(cat err.txt))" '[ $rc = 0 ] && png_ok c.png && grep -q "^plot: c.png" <<<"$out"'
check "compare: nothing ran" '! pwned'

# ablate: a study directory so named (an INI value has no newline) holds the variants' runs
sdir="$tmp/"$'study $(touch PWNED3) `touch PWNED4` it\'s "q"'
fake_run "$sdir/abl/base"
fake_run "$sdir/abl/r4"
printf '[ablation]\nname = abl\nbase = %s/recipes/quickstart.ini\nout_dir = %s\n[variant r4]\nmodel.r = 4\n' \
  "$root" "$sdir" >abl.ini
"$gflow" ablate abl.ini --report --quiet >/dev/null 2>err.txt; rc=$?
check "ablate --report: curves.png in an odd study directory (exit $rc: $(cat err.txt))" \
  '[ $rc = 0 ] && png_ok "$sdir/abl/curves.png" && ! grep -q warning err.txt'
check "ablate: nothing ran" '! pwned'

bash "$root/tools/plot_runs.sh" runs.png "$bad" plain >/dev/null 2>err.txt; rc=$?
check "tools/plot_runs.sh: odd run name (exit $rc: $(cat err.txt))" '[ $rc = 0 ] && png_ok runs.png'
bash "$root/tools/plot_valid.sh" valid.png "$bad" plain >/dev/null 2>err.txt; rc=$?
check "tools/plot_valid.sh: odd run name (exit $rc: $(cat err.txt))" '[ $rc = 0 ] && png_ok valid.png'
check "tools: nothing ran" '! pwned'

# a cut plot (ulimit -f 8: 8 KiB, below any of these PNGs) keeps the previous one
cp c.png c0.png
out=$( (ulimit -f 8; "$gflow" compare "$bad" plain --plot c.png 2>&1) ); rc=$?
check "compare under ulimit -f 8: exit 1 naming c.png, no 'plot:' (exit $rc: $out)" \
  '[ $rc = 1 ] && grep -q "c.png.*incomplete" <<<"$out" && ! grep -q "^plot:" <<<"$out"'
check "compare under ulimit -f 8: c.png unchanged, no .tmp" 'cmp -s c.png c0.png && [ -z "$(ls | grep tmp)" ]'
cp runs.png runs0.png
out=$( (ulimit -f 8; bash "$root/tools/plot_runs.sh" runs.png "$bad" plain 2>&1) ); rc=$?
check "tools/plot_runs.sh under ulimit -f 8: fails, runs.png unchanged (exit $rc)" \
  '[ $rc != 0 ] && cmp -s runs.png runs0.png && [ -z "$(ls | grep tmp)" ]'

# a metrics.tsv that is not one is named, file and line, and nothing is drawn (issue 48 item 11)
fake_run junk; printf 'step\tepoch\tsplit\tloss\tppl\n5\t0\tvalid\tzwei\t1\n' >junk/metrics.tsv
for tool in plot_runs plot_valid; do
  out=$(bash "$root/tools/$tool.sh" junk.png plain junk 2>&1); rc=$?
  check "tools/$tool.sh on a bad metrics.tsv: exit 1 naming junk/metrics.tsv:2 (exit $rc: $out)" \
    '[ $rc = 1 ] && grep -q "junk/metrics.tsv:2: loss is not a number" <<<"$out" && [ ! -e junk.png ]'
done
printf 'step\tepoch\tsplit\tloss\tppl\n5\t0\tvalid\t2\t7\n6\t0\tva' >junk/metrics.tsv # cut by a kill: drawn
out=$(bash "$root/tools/plot_valid.sh" junk.png junk 2>&1); rc=$?
check "tools/plot_valid.sh with a torn last line (exit $rc: $out)" '[ $rc = 0 ] && png_ok junk.png'

mkfifo fifo.png
out=$(timeout 20 "$gflow" compare plain --plot fifo.png 2>&1 </dev/null); rc=$? # (gnuplot would block on it)
check "compare --plot onto a fifo: refused naming it (exit $rc: $out)" \
  '[ $rc = 1 ] && grep -q "fifo.png.*not a regular file" <<<"$out" && [ -p fifo.png ]'
exit $fail
