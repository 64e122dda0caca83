#!/usr/bin/env bash
# tools/install_check.sh [BUILD_DIR] — `meson install` BUILD_DIR (default build) into a temporary
# DESTDIR and run the installed gflow from an empty directory with an empty HOME: --version, no
# path into the source tree compiled in, share/gflow found beside the executable, `info` on the
# installed quickstart recipe, `selftest`, and `data fetch` (from $GFLOW_DATA_MIRROR, when set)
# into the XDG data directory; the manual page gflow(1) renders and names every command; the bash
# completion, sourced in bash, completes commands, options, option values and recipe files; and two
# release builds of the tree in other build dirs give the same gflow bytes
# (tests/tools/test_reproducible.sh, 1-2 min; GF_SKIP_REPRO=1 skips it). Prints one line per check and,
# last, "N passed, M failed".
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
man1=$(find "$dest" -path '*/man1/gflow.1' -type f | head -1)
completion=$(find "$dest" -path '*/bash-completion/completions/gflow' -type f | head -1)
check man_page_installed test -n "$man1"
# rendered (man -l, else groff), it holds a section for every command `gflow --help` lists
render_man() { if command -v man >/dev/null; then MANWIDTH=100 man -l "$1"; else groff -man -Tutf8 "$1"; fi; }
check man_page_names_every_command bash -c '
  page=$('"$(declare -f render_man)"'; render_man "$1" 2>&1) && [ -n "$page" ] || exit 1
  n=0
  while read -r c; do
    grep -q "gflow $c" <<< "$page" || { echo "no command $c in the man page"; exit 1; }; n=$((n + 1))
  done < <("$0" --help | awk "/^commands:/ {on = 1; next} on && /^  [a-z]/ {print \$1} on && /^$/ {exit}")
  [ "$n" -gt 0 ]' "$gflow" "$man1"
check completion_installed test -n "$completion"
# complete WORD...: what the completion offers for the last WORD (plain bash, as bash-completion calls it)
complete_words() {
  bash -c 'source "$0" && complete -p gflow >/dev/null && COMP_WORDS=("$@") && COMP_CWORD=$(($# - 1)) &&
           { _gflow; printf "%s\n" "${COMPREPLY[@]}"; }' "$completion" "$@"
}
export -f complete_words; export completion
check completion_command bash -c '[ "$(complete_words gflow tr)" = train ]'
check completion_options bash -c 'complete_words gflow eval --c | grep -qx -- --ckpt &&
  complete_words gflow train -- | grep -qx -- --resume && complete_words gflow probe --w | grep -qx -- --windows'
check completion_option_values bash -c '[ "$(complete_words gflow eval run --ckpt "" | sort | tr "\n" " ")" = "best last " ]'
check completion_words bash -c 'complete_words gflow data "" | grep -qx fetch && complete_words gflow data fetch s | grep -qx snli &&
  complete_words gflow probe c | grep -qx curvature'
check completion_recipe_files bash -c 'complete_words gflow train "$0/recipes/quick" | grep -qx "$0/recipes/quickstart.ini" &&
  ! complete_words gflow train "$0/datasets/" | grep -q fetch.sh' "$share"
[ -n "${GF_SKIP_REPRO:-}" ] || check reproducible_build bash "$src/tests/tools/test_reproducible.sh" "$src"
echo "$p passed, $f failed"
[ "$f" = 0 ]
