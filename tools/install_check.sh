#!/usr/bin/env bash
# tools/install_check.sh [BUILD_DIR] — `meson install` BUILD_DIR (default build) into a temporary
# DESTDIR and run the installed gflow from an empty directory with an empty HOME: --version, no
# path into the source tree compiled in, share/gflow found beside the executable, `info` on the
# installed quickstart recipe, `selftest`, and `data fetch` (from $GFLOW_DATA_MIRROR, when set)
# into the XDG data directory. Prints one line per check and, last, "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
build=${1:-build}
dest=$(mktemp -d)
empty=$(mktemp -d)
trap 'rm -rf "$dest" "$empty"' EXIT
p=0; f=0
check() { # check NAME CMD...: CMD runs in the empty directory; non-zero status fails
  local name=$1 out; shift
  if out=$(cd "$empty" && "$@" 2>&1); then echo "ok    install/$name"; p=$((p + 1))
  else echo "FAIL  install/$name"; printf '%s\n' "$out" | tail -8 | sed 's/^/    /'; f=$((f + 1)); fi
}
check meson_install meson install -C "$src/$build" --destdir "$dest" --quiet
gflow=$(find "$dest" -path '*/bin/gflow' -type f | head -1)
share=$(dirname "$(dirname "$gflow")")/share/gflow
export HOME=$empty/home XDG_DATA_HOME=
unset GFLOW_DATA_DIR
mkdir -p "$HOME"
check version bash -c '"$0" --version | grep -q "^options: cpu "' "$gflow"
check no_source_path_compiled_in bash -c '! readelf -p .rodata -p .data "$0" | grep -qF "$1"' "$gflow" "$src"
check share_dir_found bash -c '"$0" data dir | grep -qP "^share\t$1\tinstalled$"' "$gflow" "$(realpath "$share")"
check info_installed_recipe "$gflow" info "$share/recipes/quickstart.ini"
check selftest "$gflow" selftest
if [ -n "${GFLOW_DATA_MIRROR:-}" ] && [ -d "$GFLOW_DATA_MIRROR/wikitext-2" ]; then
  check data_fetch_to_xdg bash -c '"$0" data fetch wikitext2 && test -f "$HOME/.local/share/gflow/data/wikitext-2/wiki.valid.tokens"' "$gflow"
else
  echo "SKIP  install/data_fetch_to_xdg: no \$GFLOW_DATA_MIRROR with wikitext-2"
fi
echo "$p passed, $f failed"
[ "$f" = 0 ]
