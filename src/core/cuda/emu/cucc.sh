#!/usr/bin/env bash
# cucc.sh IN OUT DEPFILE CXX [FLAGS...] — compile a .cu file for gflow's CUDA emulator
# (docs/cuda.md "The emulator"): each launch `k<<<grid, block, smem, stream>>>(args)` becomes
# `k | gf_emu::make_cfg(__FILE__, __LINE__, grid, block, smem, stream) * gf_emu::args(args)`
# (cuda_emu.h), and `extern __shared__ T name[];` takes the block's dynamic shared memory from the
# emulator; then the host C++ compiler builds it. The .cuh headers beside the file are rewritten
# the same way (into a temporary directory searched first); lines and file names stay the
# originals', and so do the dependencies written to DEPFILE.
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
rewrite "$in" | "$@" -x c++ -iquote "$tmp" -iquote "$dir" -MD -MF "$dep" -MT "$out" -c - -o "$out"
sed -i "s|$tmp/|$dir/|g" "$dep"
