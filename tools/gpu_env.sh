# gpu_env.sh — source on the GPU machine: unpack tools/gpu_pack.sh's archive once and point the
# environment at it.   source tools/gpu_env.sh [DIR]   (default .gpu; DIR/pack.tar.xz carried)
# Sets GFLOW (the gflow binary), GF_TESTS (the test runner), GF_SOURCE_ROOT (test fixtures),
# GFLOW_DATA_MIRROR (the packed datasets) and LD_LIBRARY_PATH (the packed libraries, then the
# machine's CUDA libraries, where cuBLAS is found when the GPU is first used).
_gd=${1:-.gpu}
if [ ! -f "$_gd/pack.tar.xz" ]; then
    echo "gpu_env: $_gd/pack.tar.xz not found (run tools/gpu_pack.sh here first and carry it)" >&2
    return 1 2>/dev/null || exit 1
fi
if [ ! -x "$_gd/root/bin/gflow" ]; then
    mkdir -p "$_gd/root" && tar -C "$_gd/root" -xJf "$_gd/pack.tar.xz" || { return 1 2>/dev/null || exit 1; }
fi
_gd=$(cd "$_gd" && pwd)
export LD_LIBRARY_PATH="$_gd/root/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GFLOW_DATA_MIRROR="$_gd/root/data"
export GFLOW="$_gd/root/bin/gflow" GF_TESTS="$_gd/root/bin/gf_tests" GF_SOURCE_ROOT="$PWD"
unset _gd
