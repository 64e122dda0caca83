#!/usr/bin/env bash
# cucc.sh IN OUT DEPFILE CXX [FLAGS...] — compile a .cu file for gflow's CUDA emulator
# (docs/cuda.md "The emulator"): each launch `k<<<grid, block, smem, stream>>>(args)` becomes
# `k | gf_emu::make_cfg(__FILE__, __LINE__, grid, block, smem, stream) * gf_emu::args(args)`
# (cuda_emu.h), and `extern __shared__ T name[];` takes the block's dynamic shared memory from the
# emulator; then the host C++ compiler builds it. The .cuh headers beside the file are rewritten
# the same way (into a temporary directory searched first), and so are the ops' (src/ops/cuda/*.cuh)
# for a file elsewhere that includes them as "ops/cuda/NAME.cuh" (a test's kernels); lines and
# file names stay the originals', and so do the dependencies written to DEPFILE.
set -eo pipefail
in=$1 out=$2 dep=$3
shift 3
dir=$(dirname "$in")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rewrite() {
  printf '#line 1 "%s"\n' "$1"
  sed -e 's/extern __shared__ \(float\|double\) \([A-Za-z_0-9]*\)\[\];/\1 *\2 = (\1 *)gf_emu_dyn_smem();/' \
      -e 's/<<</ | gf_emu::make_cfg(__FILE__, __LINE__, /g' -e 's/>>>(/) * gf_emu::args(/g' "$1"
}
for h in "$dir"/*.cuh; do
  if [ -e "$h" ]; then rewrite "$h" > "$tmp/$(basename "$h")"; fi
done
ops=$(cd "$(dirname "$0")/../../../ops" && pwd)
inc=()
if [ "$(cd "$dir" && pwd)" != "$ops/cuda" ] && grep -q '^#include "ops/cuda/' "$in"; then
  mkdir -p "$tmp/inc/ops/cuda"   # src/ops mirrored: the headers beside the .cuh files linked
  for h in "$ops/cuda"/*.cuh; do rewrite "$h" > "$tmp/inc/ops/cuda/$(basename "$h")"; done
  ln -s "$ops"/*.h "$tmp/inc/ops/"
  ln -s "$ops/cuda"/*.h "$tmp/inc/ops/cuda/"
  inc=(-iquote "$tmp/inc")
fi
rewrite "$in" | "$@" -x c++ -iquote "$tmp" -iquote "$dir" "${inc[@]}" -MD -MF "$dep" -MT "$out" -c - -o "$out"
sed -i -e "s|$tmp/inc/|${ops%/ops}/|g" -e "s|$tmp/|$dir/|g" "$dep"
