#!/usr/bin/env bash
# own_work.sh — gflow's own work in a training step (issue 49: everything but the libraries' matrix
# products), by sampling: `perf record` around `gflow bench`, then tools/own_work.py on the timed
# steps' samples. Run it on two builds alternately to compare them in one sitting.
#   tools/own_work.sh [--gflow BIN] [--steps N] [--blas-is-own] [--top K] RECIPE [--set KEY=VALUE ...]
# RECIPE and the --set options go to `gflow bench RECIPE --threads 2 --steps N --warmup 2
# --peak-n 0`; prints bench's ms_per_step, tokens_per_s and ms_attention and own_work.py's line. Needs perf
# (Debian: linux-perf) and permission to sample (perf_event_paranoid <= 2 for one's own process).
set -uo pipefail
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
root=$(cd "$(dirname "$0")/.." && pwd)
gflow=$root/build/gflow
steps=8
blas=
top=0
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --gflow) [ $# -ge 2 ] || { echo "own_work.sh: --gflow needs a path" >&2; exit 2; }; gflow=$2; shift 2 ;;
    --steps)
        [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "own_work.sh: --steps needs a whole number >= 1" >&2; exit 2; }
        steps=$2; shift 2 ;;
    --blas-is-own) blas=--blas-is-own; shift ;;
    --top)
        [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || { echo "own_work.sh: --top needs a whole number >= 0" >&2; exit 2; }
        top=$2; shift 2 ;;
    -*) echo "own_work.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
recipe=$1; shift
[ -f "$recipe" ] || { echo "own_work.sh: no recipe $recipe" >&2; exit 2; }
[ -x "$gflow" ] || { echo "own_work.sh: no gflow at $gflow (--gflow BIN)" >&2; exit 2; }
command -v perf >/dev/null || { echo "own_work.sh: perf is not installed (Debian: linux-perf)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! ONEDNN_JIT_PROFILE=2 perf record -q -F 999 -e cpu-clock -o "$tmp/perf.data" "$gflow" bench "$recipe" \
    --threads 2 --steps "$steps" --warmup 2 --peak-n 0 "$@" >"$tmp/bench" 2>&1; then
    echo "own_work.sh: perf record or gflow bench failed:" >&2; tail -5 "$tmp/bench" >&2; exit 1
fi
ms=$(sed -n 's/^ms_per_step: //p' "$tmp/bench")
[ -n "$ms" ] || { echo "own_work.sh: gflow bench printed no ms_per_step" >&2; tail -5 "$tmp/bench" >&2; exit 1; }
grep -E '^(ms_per_step|tokens_per_s|ms_attention):' "$tmp/bench"
perf script -i "$tmp/perf.data" -F tid,time,ip,sym,dso 2>/dev/null >"$tmp/samples"
python3 "$root/tools/own_work.py" "$tmp/samples" --ms-per-step "$ms" --steps "$steps" --top "$top" $blas
