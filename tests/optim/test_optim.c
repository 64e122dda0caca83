/* test_optim.c — AdamW, global-norm clipping and LR schedules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gf_test.h"
#include "gflow.h"
#include "gflow/optim.h"
#include "gflow/threads.h"

/* Four tensors, one per kind: w (2,3) weight, b (3) bias, n (2) norm, e (2,2) embed. */
static void make_params(gf_params *p) {
    static const float w0[] = {0.5f, -0.25f, 0.125f, 1.0f, -2.0f, 0.75f};
    static const float b0[] = {0.1f, -0.3f, 0.2f};
    static const float n0[] = {1.0f, 0.9f};
    static const float e0[] = {0.3f, -0.7f, 0.05f, 2.0f};
    gf_params_init(p);
    gf_params_add(p, "w", GF_PK_WEIGHT, 2, (const int64_t[]){2, 3});
    gf_params_add(p, "b", GF_PK_BIAS, 1, (const int64_t[]){3});
    gf_params_add(p, "n", GF_PK_NORM, 1, (const int64_t[]){2});
    gf_params_add(p, "e", GF_PK_EMBED, 2, (const int64_t[]){2, 2});
    GF_ASSERT(gf_params_alloc(p) == GF_OK, "alloc");
    memcpy(p->data + 0, w0, sizeof w0);
    memcpy(p->data + 6, b0, sizeof b0);
    memcpy(p->data + 9, n0, sizeof n0);
    memcpy(p->data + 11, e0, sizeof e0);
}

/* grads per step, in block order w, b, n, e (15 floats) */
static const float k_grads[3][15] = {
    {0.9f, -1.2f, 0.3f, 2.0f, 0.1f, -0.5f, 0.4f, -0.2f, 1.5f, -0.8f, 0.6f, 0.0f, 1.1f, -2.2f, 0.7f},
    {-0.1f, 0.2f, 0.05f, 0.3f, -0.4f, 0.0f, 0.01f, 0.02f, -0.03f, 0.2f, -0.1f, 0.05f, -0.05f, 0.1f, 0.0f},
    {1.5f, 0.5f, -0.5f, 0.25f, 0.75f, -1.0f, -0.6f, 0.3f, 0.0f, 0.9f, 0.4f, -0.3f, 0.2f, 0.6f, -0.9f},
};
static const double k_lrs[3] = {1e-2, 5e-3, 2e-2};

GF_TEST(unit, adamw_first_step_by_hand) {
    /* Step 1 with m = v = 0: m_hat = g, v_hat = g^2, so the Adam part is lr*g/(|g|+eps)
     * ~= lr*sign(g). w[0]: 0.5*(1 - 0.01*0.1) - 0.01 = 0.4895 (decayed);
     * b[0]: 0.1 - 0.01 = 0.09 (bias not decayed); e[3] (g = 0.7): 2*(1-0.001) - 0.01 = 1.988;
     * an element with g = 0 only decays: e[0] = 0.3*(1-0.001) = 0.2997. */
    gf_params p;
    make_params(&p);
    gf_adamw_cfg cfg;
    gf_adamw_cfg_default(&cfg);
    cfg.weight_decay = 0.1;
    gf_adamw_state st;
    gf_adamw_reset(&p, &st);
    memcpy(p.grad, k_grads[0], sizeof k_grads[0]);
    gf_adamw_step(&p, &st, &cfg, 0.01);
    GF_CHECK(st.step == 1, "step counter %lld", (long long)st.step);
    GF_CHECK_NEAR(p.data[0], 0.4895, 1e-7, 0);
    GF_CHECK_NEAR(p.data[6], 0.09, 1e-7, 0);
    GF_CHECK_NEAR(p.data[11], 0.2997, 1e-7, 0);
    GF_CHECK_NEAR(p.data[14], 1.988, 1e-7, 0);
    GF_CHECK_NEAR(p.m[0], 0.09, 1e-8, 0);          /* (1-b1) g */
    GF_CHECK_NEAR(p.v[0], 0.001 * 0.81, 1e-9, 0);  /* (1-b2) g^2 */
    /* the gradient is untouched */
    GF_CHECK(p.grad[0] == 0.9f, "grad kept");
    gf_params_free(&p);
}

/* Plain double-precision AdamW, written out from the torch docs, for steps 2-3. */
GF_TEST(unit, adamw_three_steps_per_kind_decay) {
    for (int variant = 0; variant < 2; variant++) {
        gf_params p;
        make_params(&p);
        gf_adamw_cfg cfg;
        gf_adamw_cfg_default(&cfg);
        cfg.weight_decay = 0.05;
        /* variant 0: decay nothing but weights; variant 1: decay everything */
        cfg.decay[GF_PK_WEIGHT] = 0; /* ignored: weights always decay */
        cfg.decay[GF_PK_BIAS] = cfg.decay[GF_PK_NORM] = cfg.decay[GF_PK_EMBED] = variant;
        static const int kind_of[15] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3};
        double w[15], m[15] = {0}, v[15] = {0};
        for (int i = 0; i < 15; i++) w[i] = p.data[i];
        gf_adamw_state st;
        gf_adamw_reset(&p, &st);
        for (int s = 0; s < 3; s++) {
            memcpy(p.grad, k_grads[s], sizeof k_grads[s]);
            gf_adamw_step(&p, &st, &cfg, k_lrs[s]);
            const double lr = k_lrs[s], t = s + 1;
            for (int i = 0; i < 15; i++) {
                const double g = k_grads[s][i];
                if (kind_of[i] == 0 || variant) w[i] *= 1 - lr * 0.05;
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.999 * v[i] + 0.001 * g * g;
                const double mh = m[i] / (1 - pow(0.9, t)), vh = sqrt(v[i]) / sqrt(1 - pow(0.999, t));
                w[i] -= lr * mh / (vh + 1e-8);
            }
        }
        GF_CHECK(st.step == 3, "step %lld", (long long)st.step);
        for (int i = 0; i < 15; i++) GF_CHECK_NEAR(p.data[i], w[i], 1e-6, 1e-6);
        /* decay switch visibly matters for the bias: b[2] differs between variants */
        if (variant == 0) GF_CHECK_NEAR(p.data[8], w[8], 1e-7, 0);
        gf_params_free(&p);
    }
}

/* Reference numbers printed by torch 1.13 (torch.optim.AdamW(foreach=False), two param
 * groups: w,e with weight_decay 0.1, b,n with 0; betas (0.9,0.999), eps 1e-8) after
 * torch.nn.utils.clip_grad_norm_(params, 1.0) each step, lrs 1e-2, 5e-3, 2e-2, from a
 * throwaway script with the same initial values and grads as make_params/k_grads. */
GF_TEST(unit, adamw_clip_matches_torch) {
    static const double norms[3] = {4.07308245, 0.60737139, 2.66364408};
    static const float want[3][15] = {
        {0.489500016f, -0.239749998f, 0.114875004f, 0.989000022f, -2.00800014f, 0.759249985f,
         0.0900000036f, -0.290000021f, 0.189999998f, 1.00999999f, 0.889999986f,
         0.299700022f, -0.709299982f, 0.0599500015f, 1.98800004f},
        {0.487737954f, -0.23894909f, 0.109955609f, 0.983706415f, -2.00348759f, 0.762220681f,
         0.0862898603f, -0.288301557f, 0.186963022f, 1.0096916f, 0.889318943f,
         0.295829505f, -0.711561918f, 0.0625366122f, 1.98365569f},
        {0.473172218f, -0.242570594f, 0.114844032f, 0.965035677f, -1.99795294f, 0.776057601f,
         0.0933929682f, -0.297627926f, 0.177572653f, 0.999247074f, 0.879468501f,
         0.302250087f, -0.721314609f, 0.0650445595f, 1.98638582f},
    };
    gf_params p;
    make_params(&p);
    gf_adamw_cfg cfg;
    gf_adamw_cfg_default(&cfg); /* bias/norm off, embed on */
    cfg.weight_decay = 0.1;
    gf_adamw_state st;
    gf_adamw_reset(&p, &st);
    for (int s = 0; s < 3; s++) {
        memcpy(p.grad, k_grads[s], sizeof k_grads[s]);
        double norm = gf_clip_grad_norm(&p, 1.0);
        GF_CHECK_NEAR(norm, norms[s], 1e-6, 1e-6);
        gf_adamw_step(&p, &st, &cfg, k_lrs[s]);
        for (int i = 0; i < 15; i++) GF_CHECK_NEAR(p.data[i], want[s][i], 2e-7, 2e-7);
    }
    gf_params_free(&p);
}

GF_TEST(unit, clip_grad_norm_scales_only_above_max) {
    gf_params p;
    make_params(&p);
    memset(p.grad, 0, 15 * sizeof(float));
    p.grad[0] = 3.0f;
    p.grad[14] = 4.0f; /* norm 5 */
    double n = gf_clip_grad_norm(&p, 1.0);
    GF_CHECK_NEAR(n, 5.0, 1e-12, 0);
    GF_CHECK_NEAR(p.grad[0], 3.0 / (5.0 + 1e-6), 1e-7, 0);
    GF_CHECK_NEAR(p.grad[14], 4.0 / (5.0 + 1e-6), 1e-7, 0);
    GF_CHECK_NEAR(gf_params_grad_norm(&p), 1.0, 1e-6, 0);
    /* below the max: untouched (bitwise) */
    p.grad[0] = 0.3f;
    p.grad[14] = 0.4f;
    n = gf_clip_grad_norm(&p, 1.0);
    GF_CHECK_NEAR(n, 0.5, 1e-7, 0);
    GF_CHECK(p.grad[0] == 0.3f && p.grad[14] == 0.4f, "no scaling below max_norm");
    /* 0 = off */
    p.grad[0] = 300.0f;
    n = gf_clip_grad_norm(&p, 0.0);
    GF_CHECK(p.grad[0] == 300.0f, "clip 0 is off (norm %g)", n);
    /* non-finite norm: returned, grads untouched */
    p.grad[1] = NAN;
    n = gf_clip_grad_norm(&p, 1.0);
    GF_CHECK(!isfinite(n) && p.grad[0] == 300.0f, "nonfinite norm passes through");
    gf_params_free(&p);
}

/* gf_sumsq_f32 (the gradient norm's Σg²) in its documented order (gflow/threads.h): the threads'
 * static spans, each in 16 running sums of every 16th element from the span's start, added in lane
 * order, the partials in thread order. Bit for bit at 1, 2 and 3 threads, for lengths with and
 * without a tail and a start off the vector alignment; and within 1e-15 of a long double sum. */
static double sumsq_in_order(const float *x, int64_t n, int T) {
    double s = 0.0;
    for (int t = 0; t < T; t++) {
        const int64_t lo = n * t / T, hi = n * (t + 1) / T;
        double acc[16] = {0}, p = 0.0;
        for (int64_t i = lo; i < hi; i++) acc[(i - lo) % 16] += (double)x[i] * (double)x[i];
        for (int k = 0; k < 16; k++) p += acc[k];
        s += p;
    }
    return s;
}

GF_TEST(unit, sumsq_is_its_documented_order) {
    const int64_t N = 100003;
    float *buf = malloc((size_t)(N + 1) * sizeof(float));
    GF_REQUIRE(buf, "malloc");
    gf_rng r;
    gf_rng_seed(&r, 11);
    for (int64_t i = 0; i <= N; i++) buf[i] = (float)gf_rng_normal(&r) * (i % 7 == 0 ? 1e3f : 1.0f);
    const int saved = gf_threads_get();
    const int64_t lens[] = {0, 1, 15, 16, 17, 47, 4099, N};
    for (int T = 1; T <= 3; T++) {
        gf_threads_set(T);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (int off = 0; off < 2; off++) {
                const float *x = buf + off;
                const int64_t n = lens[k];
                const double got = gf_sumsq_f32(x, n), want = sumsq_in_order(x, n, T);
                GF_CHECK(got == want, "%d threads, n %lld, offset %d: %.17g, in order %.17g", T, (long long)n, off, got, want);
                long double ld = 0.0L;
                for (int64_t i = 0; i < n; i++) ld += (long double)x[i] * (long double)x[i];
                GF_CHECK_NEAR(got, (double)ld, 0, 1e-15);
            }
    }
    gf_threads_set(saved);
    free(buf);
}

GF_TEST(unit, adamw_bitwise_same_for_any_thread_count) {
    gf_params a, b;
    gf_params_init(&a);
    gf_params_init(&b);
    gf_params *ps[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        gf_params_add(ps[k], "w", GF_PK_WEIGHT, 2, (const int64_t[]){300, 257});
        gf_params_add(ps[k], "b", GF_PK_BIAS, 1, (const int64_t[]){257});
        gf_params_add(ps[k], "e", GF_PK_EMBED, 2, (const int64_t[]){1000, 33});
        GF_REQUIRE_OK(gf_params_alloc(ps[k]));
    }
    gf_rng r;
    gf_rng_seed(&r, 7);
    for (int64_t i = 0; i < a.n; i++) a.data[i] = b.data[i] = (float)gf_rng_normal(&r);
    gf_adamw_cfg cfg;
    gf_adamw_cfg_default(&cfg);
    gf_adamw_state sa, sb;
    gf_adamw_reset(&a, &sa);
    gf_adamw_reset(&b, &sb);
    const int saved = gf_threads_get();
    for (int s = 0; s < 3; s++) {
        for (int64_t i = 0; i < a.n; i++) a.grad[i] = b.grad[i] = (float)gf_rng_normal(&r);
        gf_threads_set(1);
        gf_clip_grad_norm(&a, 50.0);
        gf_adamw_step(&a, &sa, &cfg, 1e-3);
        gf_threads_set(saved > 1 ? saved : 2);
        gf_clip_grad_norm(&b, 50.0);
        gf_adamw_step(&b, &sb, &cfg, 1e-3);
    }
    gf_threads_set(saved);
    GF_CHECK(memcmp(a.data, b.data, (size_t)a.n * sizeof(float)) == 0, "params differ across thread counts");
    GF_CHECK(memcmp(a.m, b.m, (size_t)a.n * sizeof(float)) == 0 &&
             memcmp(a.v, b.v, (size_t)a.n * sizeof(float)) == 0, "moments differ");
    gf_params_free(&a);
    gf_params_free(&b);
}

/* The element update as one scalar fp32 loop per tensor (adamw.c before its vector pass), the
 * fp32 scalars made from doubles as gf_adamw_step makes them: the vector pass, over spans with
 * tails (10,007 and 257 elements), must give the same bits. */
GF_TEST(unit, adamw_vector_pass_is_the_scalar_update) {
    gf_params p;
    gf_params_init(&p);
    gf_params_add(&p, "w", GF_PK_WEIGHT, 2, (const int64_t[]){1, 10007});
    gf_params_add(&p, "b", GF_PK_BIAS, 1, (const int64_t[]){257});
    GF_REQUIRE_OK(gf_params_alloc(&p));
    const int64_t n = p.n;
    float *w = malloc((size_t)n * sizeof(float)), *m = calloc((size_t)n, sizeof(float)),
          *v = calloc((size_t)n, sizeof(float)); // (n) each: the reference
    GF_REQUIRE(w && m && v, "malloc");
    gf_rng r;
    gf_rng_seed(&r, 11);
    for (int64_t i = 0; i < n; i++) w[i] = p.data[i] = (float)gf_rng_normal(&r);
    gf_adamw_cfg cfg;
    gf_adamw_cfg_default(&cfg);
    gf_adamw_state st;
    gf_adamw_reset(&p, &st);
    for (int s = 1; s <= 3; s++) {
        const double lr = 1e-3 * s;
        for (int64_t i = 0; i < n; i++) p.grad[i] = (float)gf_rng_normal(&r) * (i % 7 == 0 ? 0.0f : 1.0f);
        gf_adamw_step(&p, &st, &cfg, lr);
        const float step_size = (float)(lr / (1.0 - pow(cfg.beta1, s))), bc2_sqrt = (float)sqrt(1.0 - pow(cfg.beta2, s));
        const float b1 = (float)cfg.beta1, b2 = (float)cfg.beta2, omb1 = (float)(1.0 - cfg.beta1),
                    omb2 = (float)(1.0 - cfg.beta2), eps = (float)cfg.eps;
        for (int64_t i = 0; i < n; i++) {
            const float keep = i < 10007 ? (float)(1.0 - lr * cfg.weight_decay) : 1.0f, g = p.grad[i];
            float wi = w[i] * keep;
            const float mi = b1 * m[i] + omb1 * g, vi = b2 * v[i] + omb2 * g * g;
            m[i] = mi;
            v[i] = vi;
            const float denom = sqrtf(vi) / bc2_sqrt + eps;
            wi -= step_size * (mi / denom);
            w[i] = wi;
        }
    }
    GF_CHECK(memcmp(p.data, w, (size_t)n * sizeof(float)) == 0, "weights differ from the scalar update");
    GF_CHECK(memcmp(p.m, m, (size_t)n * sizeof(float)) == 0 && memcmp(p.v, v, (size_t)n * sizeof(float)) == 0,
             "moments differ from the scalar update");
    free(w);
    free(m);
    free(v);
    gf_params_free(&p);
}

GF_TEST(unit, schedule_key_points) {
    gf_schedule_cfg c = {.kind = GF_SCHED_CONSTANT, .lr = 1e-3, .min_lr = 0, .warmup_steps = 0};
    GF_CHECK_NEAR(gf_schedule_lr(&c, 0, 100, 1000), 1e-3, 0, 1e-15);
    GF_CHECK_NEAR(gf_schedule_lr(&c, 999, 100, 1000), 1e-3, 0, 1e-15);
    c.warmup_steps = 10;
    GF_CHECK_NEAR(gf_schedule_lr(&c, 0, 100, 1000), 1e-4, 0, 1e-12);  /* (0+1)/10 */
    GF_CHECK_NEAR(gf_schedule_lr(&c, 4, 100, 1000), 5e-4, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&c, 9, 100, 1000), 1e-3, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&c, 500, 100, 1000), 1e-3, 0, 1e-12);

    /* warmup 100 then cosine 6e-4 -> 6e-5 over steps 100..1100 (R2-like) */
    gf_schedule_cfg k = {.kind = GF_SCHED_COSINE, .lr = 6e-4, .min_lr = 6e-5, .warmup_steps = 100};
    GF_CHECK_NEAR(gf_schedule_lr(&k, 0, 0, 1100), 6e-6, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&k, 99, 0, 1100), 6e-4, 0, 1e-12);   /* end of warmup */
    GF_CHECK_NEAR(gf_schedule_lr(&k, 100, 0, 1100), 6e-4, 0, 1e-12);  /* cosine t = 0 */
    GF_CHECK_NEAR(gf_schedule_lr(&k, 600, 0, 1100), 3.3e-4, 0, 1e-12); /* middle: (lr+min)/2 */
    GF_CHECK_NEAR(gf_schedule_lr(&k, 350, 0, 1100), 6e-5 + 5.4e-4 * 0.5 * (1 + cos(M_PI / 4)), 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&k, 1100, 0, 1100), 6e-5, 0, 1e-12);  /* end */
    GF_CHECK_NEAR(gf_schedule_lr(&k, 5000, 0, 1100), 6e-5, 0, 1e-12);  /* past the end: floor */
    k.warmup_steps = 0;
    GF_CHECK_NEAR(gf_schedule_lr(&k, 0, 0, 1000), 6e-4, 0, 1e-12);     /* no warmup: full lr at 0 */

    /* R1: CosineAnnealingLR(T_max=30) stepped per epoch, 100 steps per epoch */
    gf_schedule_cfg e = {.kind = GF_SCHED_EPOCH_COSINE, .lr = 1e-3, .min_lr = 0, .warmup_steps = 0};
    GF_CHECK_NEAR(gf_schedule_lr(&e, 0, 100, 3000), 1e-3, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&e, 99, 100, 3000), 1e-3, 0, 1e-12);  /* constant in epoch 0 */
    const double e1 = 1e-3 * 0.5 * (1 + cos(M_PI / 30));
    GF_CHECK_NEAR(gf_schedule_lr(&e, 100, 100, 3000), e1, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&e, 199, 100, 3000), e1, 0, 1e-12);
    GF_CHECK_NEAR(gf_schedule_lr(&e, 1500, 100, 3000), 5e-4, 0, 1e-12); /* epoch 15 of 30 */
    GF_CHECK_NEAR(gf_schedule_lr(&e, 2999, 100, 3000), 1e-3 * 0.5 * (1 + cos(M_PI * 29 / 30)), 0, 1e-12);
    /* a partial last epoch still counts as an epoch */
    GF_CHECK_NEAR(gf_schedule_lr(&e, 1050, 100, 2950), 1e-3 * 0.5 * (1 + cos(M_PI * 10 / 30)), 0, 1e-12);
    e.min_lr = 1e-4;
    GF_CHECK_NEAR(gf_schedule_lr(&e, 1500, 100, 3000), 5.5e-4, 0, 1e-12);
    GF_CHECK(strcmp(gf_schedule_kind_name(GF_SCHED_EPOCH_COSINE), "epoch_cosine") == 0, "name");
}
