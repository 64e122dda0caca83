# shellcheck shell=bash
# cuda_libs.sh — sourced by tools/gpu_env.sh and tools/gpu_bench.sh: where this machine keeps its
# CUDA 13 libraries and tools (the GPU machine's layout is not ours to choose).
#   gf_find_cublas   prints the folder holding libcublas.so.13, if any
#   gf_cuda_bin      prints the folder holding compute-sanitizer / nvcc, if any
gf_find_cublas() {
  local d f
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    [ -e "$d/libcublas.so.13" ] && { echo "$d"; return; }
  done
  f=$("${PYTHON:-python3}" -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)  # pip's CUDA wheels
  [ -n "$f" ] && f=$(find "$f" -name 'libcublas.so.13*' 2>/dev/null | head -1)
  [ -n "$f" ] && dirname "$f"
}
gf_cuda_bin() {
  local d
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin; do
    [ -x "$d/compute-sanitizer" ] && { echo "$d"; return; }
  done
}
