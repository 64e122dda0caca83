/* allreduce_bench.c — time MPI_Allreduce (in place, float sum) of gflow's gradient size between
 * ranks that a barrier has just synchronised: the communication cost alone, without the waiting
 * for a slower rank that `gflow bench` includes. Built and run by tools/allreduce_bench.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = argc > 1 ? atoi(argv[1]) : 12607168; /* paper GrassmannLM parameters */
    int reps = argc > 2 ? atoi(argv[2]) : 6;
    float *buf = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) buf[i] = 1.0f;
    for (int it = 0; it < reps; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        if (rank == 0) printf("allreduce %d floats: %.1f ms\n", n, dt * 1e3);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
