# gpu_env.sh — source on the GPU machine: unpack tools/gpu_pack.sh's archive once and point the
# environment at it.   source tools/gpu_env.sh [DIR]   (default .gpu; DIR/pack.tar.xz carried)
# Sets GFLOW (gflow; also GFLOW_EXE, which the tests spawn: the pack's bin/ is not the meson
# layout), GF_TESTS (the test runner), GF_SOURCE_ROOT (test fixtures), GFLOW_DATA_MIRROR (the
# packed datasets) and PATH (+ the CUDA tools' folder: compute-sanitizer).
# The packed libraries (OpenBLAS, libgomp, SentencePiece, cudart, ...) reach gflow's own
# binaries only: GFLOW and GF_TESTS are wrappers (DIR/root/run/) that put them, then the
# machine's cuBLAS (tools/cuda_libs.sh), on LD_LIBRARY_PATH for that process and what it
# spawns. The caller's environment is left alone, so PyTorch and nvcc load their own.
_gd=${1:-.gpu}
if [ ! -f "$_gd/pack.tar.xz" ]; then
    echo "gpu_env: $_gd/pack.tar.xz not found (run tools/gpu_pack.sh here first and carry it)" >&2
    return 1 2>/dev/null || exit 1
fi
if [ ! -f "$_gd/root/.unpacked" ] || [ "$_gd/pack.tar.xz" -nt "$_gd/root/.unpacked" ]; then  # once per pack
    rm -rf "$_gd/root" && mkdir -p "$_gd/root" && tar -C "$_gd/root" -xJf "$_gd/pack.tar.xz" &&
        touch "$_gd/root/.unpacked" || { return 1 2>/dev/null || exit 1; }
fi
_gd=$(cd "$_gd" && pwd)
# shellcheck source=tools/cuda_libs.sh
source tools/cuda_libs.sh
_cub=$(gf_find_cublas); _cbin=$(gf_cuda_bin)
[ -n "$_cub" ] || echo "gpu_env: libcublas.so.13 not found (tools/cuda_libs.sh); the GPU ops will fail to load it" >&2
mkdir -p "$_gd/root/run"
for _b in gflow gf_tests; do
    printf '#!/bin/sh\n# %s with the pack'"'"'s libraries (tools/gpu_env.sh)\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
        "$_b" "$_gd/root/lib${_cub:+:$_cub}" "$_gd/root/bin/$_b" >"$_gd/root/run/$_b"
    chmod +x "$_gd/root/run/$_b"
done
[ -n "$_cbin" ] && export PATH="$PATH:$_cbin"
export GFLOW_DATA_MIRROR="$_gd/root/data"
export GFLOW="$_gd/root/run/gflow" GFLOW_EXE="$_gd/root/run/gflow" GF_TESTS="$_gd/root/run/gf_tests" GF_SOURCE_ROOT="$PWD"
unset _gd _cub _cbin _b
