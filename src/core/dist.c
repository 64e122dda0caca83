/* dist.c — MPI data parallelism (see gflow/dist.h). Compiled with GF_HAVE_MPI when meson found
 * MPI (-Dmpi=auto|enabled); otherwise a single-rank implementation. */
#include "gflow/dist.h"
#include "gflow/threads.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef GF_HAVE_MPI
#include <mpi.h>
#endif

static int g_rank = 0, g_size = 1, g_local = 1, g_init = 0;
static double g_comm = 0.0;
static int g_agreed_failure = 0; /* the last gf_dist_agree() failed: every rank knows */

/* the launcher's world size from its environment (0 when not launched by one) */
int gf_dist_launcher_size(void) {
    const char *keys[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = getenv(keys[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return getenv("PMIX_RANK") ? 2 : 0; /* PMIx without a size variable: treat as a job */
}

gf_status gf_dist_init(int *argc, char ***argv) {
    if (g_init) return GF_OK;
    int n = gf_dist_launcher_size();
#ifdef GF_HAVE_MPI
    if (n > 0) {
        /* Open MPI 4.1's default allreduce for a 50 MB gradient between 2 ranks on one host took
         * 200-300 ms here; its ring algorithm (bandwidth-optimal for large buffers, on any number
         * of hosts) 17-29 ms. Open MPI reads OMPI_MCA_* from the environment in MPI_Init; a user's
         * own choice wins. */
        if (!getenv("OMPI_MCA_coll_tuned_use_dynamic_rules") && !getenv("OMPI_MCA_coll_tuned_allreduce_algorithm")) {
            setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
            setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 1); /* 4 = ring */
        }
        int provided = 0;
        /* only the main thread calls MPI; OpenMP regions never do */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return gf_error_set(GF_E_EXTERNAL, "MPI_Init_thread failed");
        /* errors come back as return codes, so a dead peer gives a message, not a silent abort */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_size);
        MPI_Comm local;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
            MPI_Comm_size(local, &g_local);
            MPI_Comm_free(&local);
        }
        g_init = 2;
        return GF_OK;
    }
#else
    (void)argc; (void)argv;
    if (n > 1)
        return gf_error_set(GF_E_INVALID, "started by an MPI launcher with %d ranks, but this gflow was built without "
                            "MPI: every rank would train alone into the same run directory. Install libopenmpi-dev "
                            "and rebuild (meson setup --reconfigure BUILD -Dmpi=enabled), or run without mpirun", n);
#endif
    g_init = 1;
    return GF_OK;
}

void gf_dist_finalize(void) {
#ifdef GF_HAVE_MPI
    if (g_init == 2) MPI_Finalize();
#endif
    g_init = 0;
    g_rank = 0;
    g_size = g_local = 1;
}

void gf_dist_abort(int code) {
#ifdef GF_HAVE_MPI
    if (g_init == 2 && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

int gf_dist_rank(void) { return g_rank; }
int gf_dist_size(void) { return g_size; }
int gf_dist_local_size(void) { return g_local; }
double gf_dist_comm_seconds(void) { return g_comm; }
int gf_dist_failed_together(void) { return g_agreed_failure; }

#ifdef GF_HAVE_MPI
static gf_status mpi_fail(int rc, const char *what, int64_t n) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return gf_error_set(GF_E_EXTERNAL, "rank %d of %d: %s of %lld values failed (%s); another rank has probably "
                        "died — the last checkpoint is intact", g_rank, g_size, what, (long long)n, msg);
}

/* MPI counts are int: large buffers go in chunks. op: MPI_SUM allreduce, or MPI_OP_NULL for a
 * broadcast from rank 0. */
static gf_status chunked(void *buf, int64_t n, MPI_Datatype type, size_t elem, MPI_Op op) {
    double t0 = gf_time_now();
    char *p = buf;
    for (int64_t off = 0; off < n;) {
        int c = (int)(n - off > INT_MAX / 2 ? INT_MAX / 2 : n - off);
        void *at = p + (size_t)off * elem;
        int rc = op == MPI_OP_NULL ? MPI_Bcast(at, c, type, 0, MPI_COMM_WORLD)
                                   : MPI_Allreduce(MPI_IN_PLACE, at, c, type, op, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, op == MPI_OP_NULL ? "MPI_Bcast" : "MPI_Allreduce", n);
        off += c;
    }
    g_comm += gf_time_now() - t0;
    return GF_OK;
}
#endif

/* one rank: nothing to exchange (and a build without MPI has no MPI types to name) */
#ifdef GF_HAVE_MPI
#define DIST_CALL(buf, n, type, elem, op) (g_size > 1 ? chunked(buf, n, type, elem, op) : GF_OK)
#else
#define DIST_CALL(buf, n, type, elem, op) ((void)(buf), (void)(n), GF_OK)
#endif

gf_status gf_dist_sum_f32(float *buf, int64_t n) { return DIST_CALL(buf, n, MPI_FLOAT, sizeof(float), MPI_SUM); }
gf_status gf_dist_sum_f64(double *buf, int64_t n) { return DIST_CALL(buf, n, MPI_DOUBLE, sizeof(double), MPI_SUM); }
gf_status gf_dist_sum_scaled_f32(float *buf, int64_t n, float w) {
    if (g_size == 1) return GF_OK;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) buf[i] *= w;
    return gf_dist_sum_f32(buf, n);
}
gf_status gf_dist_bcast_f32(float *buf, int64_t n) { return DIST_CALL(buf, n, MPI_FLOAT, sizeof(float), MPI_OP_NULL); }

gf_status gf_dist_agree(gf_status local) {
    if (g_size == 1) return local;
    double failed = local != GF_OK;
    gf_status st = gf_dist_sum_f64(&failed, 1);
    if (st) return st;
    if (failed > 0) g_agreed_failure = 1;
    if (local) return local;
    if (failed > 0)
        return gf_error_set(GF_E_EXTERNAL, "rank %d: stopping because %d of %d ranks failed (their messages above)",
                            g_rank, (int)failed, g_size);
    return GF_OK;
}
