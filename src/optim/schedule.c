/* Learning-rate schedules (see gflow/optim.h for the formulas). */
#include <math.h>

#include "gflow/optim.h"

static double cosine(double lr, double min_lr, double t) {
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(M_PI * t));
}

double gf_schedule_lr(const gf_schedule_cfg *cfg, int64_t step, int64_t steps_per_epoch,
                      int64_t total_steps) {
    GF_ASSERT(step >= 0, "gf_schedule_lr: negative step %lld", (long long)step);
    const int64_t W = cfg->warmup_steps > 0 ? cfg->warmup_steps : 0;
    const double warm = step < W ? (double)(step + 1) / (double)W : 1.0;
    switch (cfg->kind) {
    case GF_SCHED_CONSTANT:
        return cfg->lr * warm;
    case GF_SCHED_COSINE: {
        if (step < W) return cfg->lr * warm;
        const int64_t span = total_steps - W > 1 ? total_steps - W : 1;
        double t = (double)(step - W) / (double)span;
        if (t > 1.0) t = 1.0;
        return cosine(cfg->lr, cfg->min_lr, t);
    }
    case GF_SCHED_EPOCH_COSINE: {
        GF_ASSERT(steps_per_epoch > 0, "gf_schedule_lr: epoch_cosine needs steps_per_epoch > 0");
        const int64_t e = step / steps_per_epoch;
        int64_t E = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
        if (E < 1) E = 1;
        double t = (double)e / (double)E;
        if (t > 1.0) t = 1.0;
        return cosine(cfg->lr, cfg->min_lr, t) * warm;
    }
    }
    GF_ASSERT(0, "gf_schedule_lr: bad kind %d", (int)cfg->kind);
    return 0.0;
}

const char *gf_schedule_kind_name(gf_schedule_kind k) {
    switch (k) {
    case GF_SCHED_CONSTANT: return "constant";
    case GF_SCHED_COSINE: return "cosine";
    case GF_SCHED_EPOCH_COSINE: return "epoch_cosine";
    }
    return "?";
}
