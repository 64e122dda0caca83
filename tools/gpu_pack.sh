#!/usr/bin/env bash
# gpu_pack.sh — everything a GPU machine without our Debian libraries needs, in one folder.
#
#   tools/gpu_pack.sh [DIR]        (default .gpu, ignored by git)
#
# The lent GPU machine (docs/cuda.md, "First thing on a GPU") has CUDA 13 and PyTorch but none
# of gflow's libraries (OpenBLAS, SentencePiece, libcsv, inih, OpenMPI) and no network, and the
# data mirror does not travel with the working tree. This builds gflow there-ready on this
# machine (-Dcuda=enabled, release, no MPI, -Dcpu=x86-64-v3: the GPU machine's processor is
# not this one) and packs into DIR/pack.tar.xz: the build's binaries and test runner, the shared
# libraries they load that are not the C library's own (ldd), and the datasets (tokenizers are
# trained there on first use: seconds). One archive because the carried tree is limited to 64 MiB
# (OpenBLAS alone is 36 MB uncompressed). On the GPU machine (carry DIR):
#
#   source tools/gpu_env.sh DIR    # unpacks once, sets LD_LIBRARY_PATH, GFLOW_DATA_MIRROR, GFLOW
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu}
MIRROR=${GFLOW_DATA_MIRROR:-../shared/datasets}
[ -d "$MIRROR/wikitext-2" ] || { echo "gpu_pack: no datasets at $MIRROR (set GFLOW_DATA_MIRROR)" >&2; exit 1; }
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_pack: nvcc not found" >&2; exit 1; }

mkdir -p "$DIR"
B="$DIR/build"
[ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled -Dmpi=disabled -Dbuildtype=release -Dcpu=x86-64-v3 >/dev/null
ninja -C "$B" >/dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
cp "$B/gflow" "$B/tests/gf_tests" "$stage/bin/"
# every library the two binaries load, except glibc's own and the C++/GCC runtimes, which the
# GPU machine has in newer, backward-compatible versions (carrying older ones would shadow them)
for f in "$B/gflow" "$B/tests/gf_tests"; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -r "$MIRROR/wikitext-2" "$MIRROR/snli_1.0" "$stage/data/" 2>/dev/null || cp -r "$MIRROR/wikitext-2" "$stage/data/"
[ -f "$MIRROR/README.md" ] && cp "$MIRROR/README.md" "$stage/data/"
# BERT's WordPiece vocabulary (the study's WordPiece rows): the mirror holds its npm tarball, and
# `gflow data fetch bert-base-uncased` (python3, tar) makes vocab.txt of it here, where both exist
GFLOW_DATA_MIRROR=$MIRROR "$B/gflow" data fetch bert-base-uncased "$stage/data" >/dev/null 2>&1 ||
    echo "gpu_pack: bert-base-uncased not packed (gflow data fetch bert-base-uncased failed): the WordPiece runs cannot run there" >&2
tar -C "$stage" -cJf "$DIR/pack.tar.xz.tmp" .
mv "$DIR/pack.tar.xz.tmp" "$DIR/pack.tar.xz"
echo "gpu_pack: $DIR/pack.tar.xz $(du -h "$DIR/pack.tar.xz" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries); carry $DIR/pack.tar.xz"
