/* task.c — what the tasks share (gflow/task.h): the evaluation pass over a split's batches,
 * each rank summing its share and the sums added over ranks at the end. */
#include "gflow/session.h"
#include "gflow/dist.h"

void gf_eval_begin(gf_eval_pass *p, gf_session *s, int64_t max_batches) {
    p->s = s;
    p->max_batches = max_batches;
    p->nb = 0;
    p->rank = gf_dist_rank();
    p->world = gf_dist_size();
    p->old_grad = gf_ctx_set_grad(&s->ctx, 0);
    p->old_train = s->ctx.training;
    s->ctx.training = 0;
}

int gf_eval_more(const gf_eval_pass *p) { return p->max_batches <= 0 || p->nb < p->max_batches; }

int gf_eval_mine(gf_eval_pass *p) { return p->nb++ % p->world == p->rank; }

gf_status gf_eval_end(gf_eval_pass *p, gf_status status, double *sums, int n) {
    gf_ctx_set_grad(&p->s->ctx, p->old_grad);
    p->s->ctx.training = p->old_train;
    if (status) return status;
    return gf_dist_sum_f64(sums, n);
}
