#!/usr/bin/env bash
# nvcc.sh SRC_ROOT IN OUT DEPFILE NVCC [FLAGS...] — compile a .cu file with nvcc into the same bytes
# from every build dir (reproducible builds, meson.build). nvcc has no prefix map, and the device
# line table (-lineinfo) records the path nvcc was given: so nvcc runs in SRC_ROOT and is given IN
# by its path there (src/ops/cuda/x.cu; FLAGS' -I are relative to SRC_ROOT too), which is also
# what __FILE__ says; OUT and DEPFILE are made absolute, and the dependencies nvcc writes relative
# to SRC_ROOT are made absolute for ninja, which reads them from the build dir. Where this nvcc
# has them (meson.build asks), FLAGS also hold -objtemp (intermediate files beside OUT: no
# tmpxft_<pid> file names in the object) and -frandom-seed (nvcc's generated names, one seed per file).
set -eo pipefail
src=$1 in=$2 out=$3 dep=$4
shift 4
target=$out
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $dep in /*) ;; *) dep=$PWD/$dep ;; esac
in=$(realpath --relative-to="$src" "$in")
cd "$src"
"$@" -MD -MF "$dep" -MT "$target" -c "$in" -o "$out"
awk -v s="$src/" 'NR == 1 { t = 1 }
  { for (i = 1; i <= NF; i++) { if (t) { if ($i ~ /:$/) t = 0; continue } if ($i != "\\" && $i !~ /^\//) $i = s $i }
    print }' "$dep" > "$dep.tmp"
mv "$dep.tmp" "$dep"
