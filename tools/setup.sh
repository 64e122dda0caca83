#!/usr/bin/env bash
# tools/setup.sh — install gflow's Debian dependencies (when root and missing) and build.
#   tools/setup.sh [BUILD_DIR] [meson options...]     default BUILD_DIR: build
# Safe to re-run: installs nothing that is present; an existing BUILD_DIR keeps its
# configuration, except for the meson options given (meson configure).
#   tools/setup.sh build-rel --buildtype=release -Dcpu=x86-64-v3 -Dwerror=true   (see README, Install)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

# Runtime/build packages, the PyTorch reference used by golden fixtures and benchmarks, and for
# tools/install_check.sh: bash-completion (its completionsdir) and groff-base (renders gflow(1));
# time (/usr/bin/time -v) and sentencepiece (spm_encode) for tools/data_bench.sh.
pkgs=(meson ninja-build pkg-config gcc g++ libopenblas-dev libsentencepiece-dev sentencepiece
      libcsv-dev libinih-dev libssl-dev libcjson-dev libutf8proc-dev liblapacke-dev zlib1g-dev libdnnl-dev libxsmm-dev libopenmpi-dev openmpi-bin gnuplot-nox python3 python3-numpy python3-torch
      bash-completion groff-base time)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$@" >/dev/null
elif [ $# -gt 0 ]; then
  meson configure "$build" "$@" >/dev/null   # options given for an existing build dir: apply them
fi
ninja -C "$build" >/dev/null
echo "setup: built $build/gflow and $build/tests/gf_tests" >&2
