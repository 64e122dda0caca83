#!/usr/bin/env bash
# tools/fuzz.sh — build gflow's libFuzzer harnesses (tests/fuzz/) with clang and run each.
#   tools/fuzz.sh [SECONDS] [--runs N] [--only NAME] [--jobs J]
# SECONDS (default 30) per harness, or --runs N executions each; as many harnesses at once as
# there are cores (--jobs J: one at a time, each with J libFuzzer workers). The library sources are
# compiled here directly with clang -fsanitize=fuzzer-no-link,address,undefined into
# build-fuzz/ (no meson involvement: the normal build stays gcc). Seeds: tests/fuzz/corpus/<name>
# (+ generated checkpoints / token caches); the working corpus and any crash-* files go to
# build-fuzz/. Prints one line per harness and, last, "N passed, M failed" (a harness fails when
# it crashes, leaks or trips a sanitizer).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=30; runs=""; only=""; jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) secs=$1; shift ;;
  esac
done
CC=${FUZZ_CC:-clang}; CXX=${FUZZ_CXX:-clang++}
out=build-fuzz
mkdir -p "$out/obj"
if ! command -v "$CC" >/dev/null; then
  echo "fuzz: $CC not found (apt-get install clang)"; echo "0 passed, 1 failed"; exit 1
fi
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-std=c11 -O1 -g $san -fsanitize=fuzzer-no-link -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
        -fno-fast-math -Iinclude -Isrc -I/usr/include/cjson $(pkg-config --cflags openblas 2>/dev/null)"
# the build identity meson gives the library (src/core/version.c, describe.c from describe.c.in);
# no spaces in these values: $cflags is split on words
ver=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" meson.build | head -1)
desc=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
sed "s/@VCS_TAG@/$desc/" src/core/describe.c.in > "$out/describe.c.new"
cmp -s "$out/describe.c.new" "$out/describe.c" || mv "$out/describe.c.new" "$out/describe.c"
cflags="$cflags -DGF_VERSION=\"$ver\" -DGF_BUILD_OPTS=\"fuzz-build\" -DGF_BUILD_CPU=\"default\" -DGF_BUILD_BLAS=\"openblas\" -DGF_BUILD_TYPE=\"fuzz\""
# the library: every src/ stage except the CLI (same set as gf_src in meson)
# Compiles and harness runs go $par at a time (each is one process on one core).
par=$(nproc 2>/dev/null || echo 1)
throttle() { while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n; done; }
objs=()
for f in "$out/describe.c" src/core/*.c src/ops/*.c src/nn/*.c src/optim/*.c src/data/*.c src/recipe/*.c src/train/*.c; do
  o="$out/obj/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "include/gflow" -nt "$o" ]; then
    throttle
    { $CC $cflags -fopenmp -c "$f" -o "$o.tmp" && mv "$o.tmp" "$o"; } || { rm -f "$o.tmp"; echo "fuzz: compiling $f failed"; } &
  fi
  objs+=("$o")
done
wait
for o in "${objs[@]}"; do [ -f "$o" ] || { echo "0 passed, 1 failed"; exit 1; }; done
o="$out/obj/spm_wrap.o"
if [ ! -f "$o" ] || [ src/data/spm_wrap.cc -nt "$o" ]; then
  $CXX -std=c++17 -O1 -g $san -fsanitize=fuzzer-no-link -Iinclude -Isrc -c src/data/spm_wrap.cc -o "$o" || exit 1
fi
objs+=("$o")
libs="-lopenblas -lsentencepiece -lsentencepiece_train -lcrypto -lcsv -linih -lz -lcjson -lutf8proc -lm -lpthread -fopenmp"
# link with clang++: UBSan's C++ runtime (vptr checks in spm_wrap.cc) comes with it
$CC $cflags -c tests/fuzz/make_seeds.c -o "$out/obj/make_seeds.o" &&
  $CXX $san "$out/obj/make_seeds.o" "${objs[@]}" -o "$out/make_seeds" $libs || exit 1

harnesses=(recipe ckpt snli token_cache wordpiece)
pass=0; fail=0
for h in "${harnesses[@]}"; do
  [ -n "$only" ] && [ "$only" != "$h" ] && continue
  rm -f "$out/fuzz_$h"; throttle
  { $CC $cflags -c "tests/fuzz/fuzz_$h.c" -o "$out/obj/fuzz_$h.o" &&
    $CXX $san -fsanitize=fuzzer "$out/obj/fuzz_$h.o" "${objs[@]}" -o "$out/fuzz_$h" $libs; } &
done
wait
for h in "${harnesses[@]}"; do
  [ -n "$only" ] && [ "$only" != "$h" ] && continue
  [ -x "$out/fuzz_$h" ] || { echo "fuzz: building fuzz_$h failed"; fail=$((fail + 1)); }
done
work="$out/work"
mkdir -p "$work/seeds/ckpt" "$work/seeds/token_cache"
ASAN_OPTIONS=detect_leaks=0 "$out/make_seeds" "$work/seeds" || { echo "fuzz: make_seeds failed"; }
run_harness() {   # run_harness NAME: its libFuzzer run, its exit status in $out/fuzz_NAME.rc
  local h=$1 seeds=() limit log
  mkdir -p "$work/corpus_$h"
  [ -d "tests/fuzz/corpus/$h" ] && seeds+=("tests/fuzz/corpus/$h")   # ckpt has only generated seeds
  [ -d "$work/seeds/$h" ] && seeds+=("$work/seeds/$h")
  limit=(-max_total_time="$secs")
  [ -n "$runs" ] && limit=(-runs="$runs")
  log="$out/fuzz_$h.log"
  # -max_len: recipes and SNLI rows are text; checkpoints of the seed model are ~2 KB
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "../fuzz_$h" "${limit[@]}" -max_len=8192 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
     $( [ "$jobs" -gt 1 ] && echo "-jobs=$jobs -workers=$jobs" ) -artifact_prefix="./crash-$h-" "corpus_$h" "${seeds[@]/#/../../}" ) >"$log" 2>&1
  echo $? > "$out/fuzz_$h.rc"
}
ran=()
[ "$jobs" -gt 1 ] && par=1   # --jobs: libFuzzer's own workers fill the cores
for h in "${harnesses[@]}"; do
  [ -n "$only" ] && [ "$only" != "$h" ] && continue
  [ -x "$out/fuzz_$h" ] || continue
  rm -f "$out/fuzz_$h.rc"; throttle; run_harness "$h" & ran+=("$h")
done
wait
for h in "${ran[@]}"; do
  log="$out/fuzz_$h.log"; rc=$(cat "$out/fuzz_$h.rc" 2>/dev/null || echo 1)
  execs=$(grep -h 'stat::number_of_executed_units' "$log" 2>/dev/null | awk '{s += $2} END {print s + 0}')
  if [ "$rc" = 0 ]; then
    pass=$((pass + 1)); echo "fuzz $h: ok, $execs executions ($(ls "$work/corpus_$h" | wc -l) corpus files)"
  else
    fail=$((fail + 1)); echo "fuzz $h: FAILED (rc $rc, $execs executions); see $log and $work/crash-$h-*"
    grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" | sed 's/^/    /'
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
