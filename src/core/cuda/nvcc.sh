#!/usr/bin/env bash
# nvcc.sh IN OUT DEPFILE NVCC [FLAGS...] — compile a .cu file with nvcc into the same bytes from
# every build dir (reproducible builds, meson.build): IN is given by its absolute path, since the
# device line table (-lineinfo) records the path nvcc was given and a relative one names the build
# dir (../src/...); __FILE__ is mapped to src/... by the -fmacro-prefix-map in FLAGS. Where this
# nvcc has them (meson.build asks), FLAGS also hold -objtemp (intermediate files beside OUT: no
# tmpxft_<pid> file names in the object) and -frandom-seed (nvcc's generated names; its value is
# OUT's name, one seed per file, as nvcc's manual asks).
set -eo pipefail
in=$1 out=$2 dep=$3
shift 3
exec "$@" -MD -MF "$dep" -MT "$out" -c "$(realpath "$in")" -o "$out"
