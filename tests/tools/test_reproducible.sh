#!/usr/bin/env bash
# tests/tools/test_reproducible.sh SRC_ROOT — two release builds of the same tree (cuda and MPI
# off), set up in build dirs at different depths outside the source tree, must give byte-identical
# `gflow` binaries, and the binary must name its sources as the source tree does
# (src/core/arena.c), never by a path through the build dir (../src/..., ../../<checkout>/src/...).
# Builds only the gflow target, twice: 50-100 s on 2 busy cores (measured). Suite 'repro' (meson test -C build
# --suite repro), outside tools/test.sh, whose suites CI runs twice (plain and ASan builds); CI runs
# it once, from tools/install_check.sh.
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
a=$tmp/a
b=$tmp/one/two/three/b
for d in "$a" "$b"; do
  mkdir -p "$(dirname "$d")"
  if ! meson setup "$d" "$src" --buildtype=release -Dcuda=disabled -Dmpi=disabled >"$tmp/setup.log" 2>&1 ||
     ! ninja -C "$d" gflow >"$tmp/build.log" 2>&1; then
    echo "FAIL  repro/build: $d"; tail -20 "$tmp/setup.log" "$tmp/build.log"; exit 1
  fi
done
fail=0
strings -a "$a/gflow" > "$tmp/a.strings"
strings -a "$b/gflow" > "$tmp/b.strings"
if cmp -s "$a/gflow" "$b/gflow"; then echo "ok    repro/identical_binaries"
else
  echo "FAIL  repro/identical_binaries: $a/gflow and $b/gflow differ; strings that differ:"
  diff "$tmp/a.strings" "$tmp/b.strings" | head -20 | sed 's/^/    /'
  fail=1
fi
if grep -qx 'src/core/arena.c' "$tmp/a.strings"; then echo "ok    repro/file_names_from_source_root"
else echo "FAIL  repro/file_names_from_source_root: no string src/core/arena.c in $a/gflow"; fail=1; fi
leaks=$(cat "$tmp/a.strings" "$tmp/b.strings" | grep -E -e '\.\./([^ ]*/)?src/' -e "$tmp" -e "$src/" | sort -u | head -5 || true)
if [ -z "$leaks" ]; then echo "ok    repro/no_build_or_source_path"
else echo "FAIL  repro/no_build_or_source_path:"; printf '    %s\n' "$leaks"; fail=1; fi
exit $fail
