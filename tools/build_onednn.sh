#!/usr/bin/env bash
# tools/build_onednn.sh — build oneDNN 3.7.2 from Debian's source package (trixie's onednn, whose
# binary package needs a newer libc than Debian 12's) into a prefix, for a gflow build that takes
# its bf16 products from it instead of Debian 12's libdnnl-dev 2.6.3 (docs/performance.md, "oneDNN
# 3.7"). Only the matmul and reorder primitives, the CPU, OpenMP threads: ~30 minutes on 2 cores.
#   tools/build_onednn.sh [PREFIX]        default PREFIX: ../onednn-3.7 (beside the clone)
# then: tools/setup.sh build-dnnl3 --buildtype=release -Donednn_dir=PREFIX (absolute)
# Needs cmake, ninja and the Debian archive (deb.debian.org, or DEBIAN_MIRROR). Safe to re-run: a
# prefix it completed (PREFIX/.gflow-onednn-3.7.2) is left as it is; the build's log is
# PREFIX/build_onednn.log.
set -euo pipefail
here=$(pwd)
cd "$(dirname "$0")/.."
prefix=${1:-../onednn-3.7}
case $prefix in /*) ;; *) [ $# -gt 0 ] && prefix=$here/$prefix ;; esac   # relative to the caller
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
ver=3.7.2
tarball=onednn_${ver}+ds.orig.tar.xz
sha=0cc51ca26c1af6a2bb1e71e378e7046f3ceb3e71791ee9d4e246d50f904a6ea6   # trixie's Sources, 3.7.2+ds-2
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
stamp=$prefix/.gflow-onednn-$ver
log=$prefix/build_onednn.log

if [ -f "$stamp" ]; then
  echo "build_onednn: $prefix holds oneDNN $ver already (remove it to rebuild)" >&2
  exit 0
fi
command -v cmake >/dev/null || { echo "build_onednn: needs cmake (apt-get install cmake)" >&2; exit 1; }
command -v ninja >/dev/null || { echo "build_onednn: needs ninja (apt-get install ninja-build)" >&2; exit 1; }

work=$(mktemp -d "$prefix/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
: >"$log"
# run a step with its output in the log; on failure, the log's end and where the rest is
step() {
  local what=$1; shift
  "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; echo "build_onednn: $what failed (the whole log: $log)" >&2; exit 1; }
}
echo "build_onednn: fetching $mirror/pool/main/o/onednn/$tarball" >&2
step "fetching $tarball from $mirror" curl -fsS -m 600 -o "$work/$tarball" "$mirror/pool/main/o/onednn/$tarball"
echo "$sha  $work/$tarball" | sha256sum -c --quiet - ||
  { echo "build_onednn: $tarball does not have the sha256 of Debian's 3.7.2+ds-2" >&2; exit 1; }
step "unpacking $tarball" tar -C "$work" -xf "$work/$tarball"
src=$work/oneDNN-$ver
step "configuring (cmake)" cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DDNNL_BUILD_EXAMPLES=OFF -DDNNL_BUILD_TESTS=OFF \
  -DONEDNN_BUILD_GRAPH=OFF -DDNNL_ENABLE_PRIMITIVE="MATMUL;REORDER" -DDNNL_CPU_RUNTIME=OMP \
  -DDNNL_ENABLE_WORKLOAD=TRAINING
echo "build_onednn: building (matmul and reorder only; ~30 minutes on 2 cores; log: $log)" >&2
step "the build" ninja -C "$work/build"
step "installing" ninja -C "$work/build" install
touch "$stamp"   # last: a prefix without it is an unfinished one, built again by the next run
echo "build_onednn: installed oneDNN $ver in $prefix" >&2
echo "build_onednn: next: tools/setup.sh build-dnnl3 --buildtype=release -Donednn_dir=$prefix" >&2
