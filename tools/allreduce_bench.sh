#!/usr/bin/env bash
# tools/allreduce_bench.sh [NP] [FLOATS] — Open MPI's allreduce algorithms on this host for a
# buffer of gflow's gradient size (default 2 ranks, 12,607,168 floats = 50.4 MB): the figures
# behind gflow's choice of the ring algorithm (docs/performance.md, "Data parallel").
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:-2}; n=${2:-12607168}
mkdir -p build-tools
mpicc -O2 tools/allreduce_bench.c -o build-tools/allreduce_bench
run=(mpirun -np "$np" --bind-to none)
[ "$(id -u)" = 0 ] && run+=(--allow-run-as-root)
echo "== Open MPI default"
env -u OMPI_MCA_coll_tuned_use_dynamic_rules -u OMPI_MCA_coll_tuned_allreduce_algorithm \
  "${run[@]}" build-tools/allreduce_bench "$n"
for a in 2:nonoverlapping 3:recursive-doubling 4:ring 6:rabenseifner; do
  echo "== algorithm ${a#*:} (${a%%:*})"
  OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=${a%%:*} \
    "${run[@]}" build-tools/allreduce_bench "$n"
done
