/* gflow/dist.h — data parallelism over MPI (`mpirun -np N gflow train RECIPE`).
 *
 * Every rank holds the whole model and runs the same loader, takes its own slice of each global
 * batch, and the gradients are summed with one MPI_Allreduce on the contiguous gradient block
 * (each rank pre-scales by its share of the batch, so the sum is the global-batch gradient).
 * AdamW then runs identically everywhere, so the weights stay bitwise equal across ranks;
 * rank 0 alone writes files. Without a launcher (or in a build with -Dmpi=disabled) this is
 * one rank of one, and every call is a no-op that costs nothing.
 */
#ifndef GFLOW_DIST_H
#define GFLOW_DIST_H

#include "gflow/error.h"
#include <stdint.h>

/* Join the MPI job when started by a launcher (mpirun/srun set OMPI_COMM_WORLD_SIZE, PMI_SIZE
 * or PMIX_RANK). A build without MPI started by a launcher with more than one rank refuses:
 * N copies writing one run directory would corrupt it. Safe to call more than once. */
gf_status gf_dist_init(int *argc, char ***argv);
void gf_dist_finalize(void);
/* End every rank now (a rank that cannot go on must not leave the others waiting). */
void gf_dist_abort(int code);

/* ranks the launcher started (its environment; 0 when none), known before gf_dist_init */
int gf_dist_launcher_size(void);
int gf_dist_rank(void);
int gf_dist_size(void);
int gf_dist_local_size(void);   /* ranks on this host (to share its cores) */

/* In-place sums across ranks; errors name the operation (a dead peer shows up here). */
gf_status gf_dist_sum_f32(float *buf, int64_t n);
gf_status gf_dist_sum_f64(double *buf, int64_t n);
/* buf = Σ_ranks w_rank · buf_rank: the gradient step of data parallelism (w = the rank's share) */
gf_status gf_dist_sum_scaled_f32(float *buf, int64_t n, float w);
/* rank 0's buffer to every rank */
gf_status gf_dist_bcast_f32(float *buf, int64_t n);
/* Agree on a local status: returns GF_OK only when every rank passed GF_OK. A rank that was
 * fine gets GF_E_EXTERNAL naming how many ranks failed (their own messages say why). */
gf_status gf_dist_agree(gf_status local);
/* 1 when a gf_dist_agree() has failed: all ranks stop together and may finalize normally */
int gf_dist_failed_together(void);
/* seconds spent inside MPI calls so far (for bench and speed.tsv) */
double gf_dist_comm_seconds(void);

#endif
