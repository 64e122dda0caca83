/* attention.cu — fused multi-head scaled dot-product attention on the GPU, forward and backward;
 * the CPU op (src/ops/attention.c) is the spec.
 *
 * qkv (B, L, 3D) = [q | k | v]; head h reads columns h*Dh..(h+1)*Dh-1 of each block. Per (b, h),
 * with S = Q K^T * scale (scale = 1/sqrt(Dh); masked entries -inf: key j hidden from query i when
 * key_mask[b, j] == 0 or, causal, j > i) and P = softmax_rows(S): O = P V goes to columns h*Dh..
 * of y (B, L, D). Saved for backward: lse (B, H, L) = m + log l per query row, y (the node's
 * output) and key_mask staged on the device. A query row with no visible key outputs 0 with
 * lse = +inf, and passes no gradient.
 *
 * Kernels (FP32, flash-style: no L x L matrix is stored anywhere). Every block has 256 threads
 * seen as 16 x 16, ty = tid / 16, tx = tid % 16; a warp holds two ty rows of 16 lanes, so a row
 * of a tile owned by the 16 lanes of one ty is reduced by xor shuffles within those 16 lanes.
 * Thread (ty, tx) owns the tile rows ty + 16i and the columns tx + 16j. The head dim is a template
 * parameter DP in {32, 64, 128}: Dh is rounded up to it and the shared tiles are zero-padded
 * (zeros add nothing to a dot product), so any Dh <= 128 runs; Dh > 128 is refused.
 * Shared tiles of DP columns have row stride DP + 1 (odd: 16 rows read at one column hit 16
 * banks); the probability tiles have stride ≡ 16 mod 32 (the two ty rows of a warp fall in the
 * two halves of the banks).
 *
 *  att_fwd   grid (L/64 query tiles, H, B): the block keeps its 64 queries in shared memory and
 *            streams keys and values in tiles of 64; online softmax per row (running max m, sum
 *            l, the accumulator o rescaled by exp(m_old - m_new)); writes y and lse. Causal
 *            blocks stop at the diagonal tile; the longest (last) query tiles start first.
 *  backward  with dO = dL/dO and P recomputed as exp(S - lse):
 *              D_i = rowsum(dO_i ⊙ O_i)               att_rowdot: a warp per (row, head), in double
 *              dP = dO V^T ;  dS = P ⊙ (dP - D_i)
 *              dV = P^T dO ;  dK = scale · dS^T Q     att_bwd_kv: a block per 64 keys, queries
 *                                                     streamed in steps of 32
 *              dQ = scale · dS K                      att_bwd_q: a block per 64 queries, keys
 *                                                     streamed in steps of 32
 *            Each output element of dqkv belongs to one thread of one block, which adds its terms
 *            in a fixed order: no atomics, bitwise reproducible. All of dqkv is written (keys no
 *            query sees get 0), so a fresh gradient (gf_grad_fresh) is stored, else added to.
 */
#include "cu_util.cuh"

#define ATT_THREADS 256 /* 16 x 16 */
#define ATT_BIG 64      /* rows a block owns: queries (att_fwd, att_bwd_q) or keys (att_bwd_kv) */
#define ATT_STEP 32     /* rows streamed per step in the backward kernels */
#define ATT_PS 80       /* row stride of the forward's P tile (64 keys): ≡ 16 mod 32 */
#define ATT_SS 48       /* row stride of the backward's P / dS tiles (32 columns): ≡ 16 mod 32 */
#define ATT_MAX_DH 128

/* shared-memory floats of each kernel for head dim DP (the host sizes its launches by these) */
__host__ __device__ constexpr int att_fwd_smem(int DP) { return 3 * ATT_BIG * (DP + 1) + ATT_BIG * ATT_PS + ATT_BIG; }
__host__ __device__ constexpr int att_kv_smem(int DP) {
    return 2 * ATT_BIG * (DP + 1) + 2 * ATT_STEP * (DP + 1) + 2 * ATT_BIG * ATT_SS + 2 * ATT_STEP + ATT_BIG;
}
__host__ __device__ constexpr int att_q_smem(int DP) {
    return 2 * ATT_BIG * (DP + 1) + 2 * ATT_STEP * (DP + 1) + ATT_BIG * ATT_SS + 2 * ATT_BIG + ATT_STEP;
}

/* dst (nr, DP + 1) = rows r0..r0+nr-1 of src (row stride ld, Dh used columns), zero beyond L and Dh.
 * Consecutive threads read consecutive columns of a row (coalesced). */
template <int DP>
__device__ static inline void att_tile(float *dst, const float *src, int64_t ld, int r0, int nr, int L, int Dh) {
    for (int k = threadIdx.x; k < nr * DP; k += ATT_THREADS) {
        const int r = k / DP, d = k % DP;
        dst[r * (DP + 1) + d] = (r0 + r < L && d < Dh) ? src[(int64_t)(r0 + r) * ld + d] : 0.0f;
    }
}

/* 1 when key j of batch row b exists and is not padding */
__device__ static inline int att_key_ok(const uint8_t *mask, int b, int L, int j) {
    return j < L && (!mask || mask[(int64_t)b * L + j]);
}

/* max and sum over the 16 lanes of one ty row (xor partners stay within the 16; every lane ends
 * with the same bits). All 32 lanes of the warp must call these. */
__device__ static inline float att_row_max(float v) {
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ static inline float att_row_sum(float v) {
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* s[i][j] = row ty+16i of A . row tx+16j of B, over DP columns (tiles of stride DP + 1); the
 * products are added in column order. A's rows are the thread's 4 rows, B's its NJ columns. */
template <int DP, int NJ>
__device__ static inline void att_dots(float (&s)[4][NJ], const float *A, const float *B) {
    constexpr int SD = DP + 1;
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < NJ; j++) s[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < DP; d++) {
        float a[4], bv[NJ];
        for (int i = 0; i < 4; i++) a[i] = A[(ty + 16 * i) * SD + d];
        for (int j = 0; j < NJ; j++) bv[j] = B[(tx + 16 * j) * SD + d];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < NJ; j++) s[i][j] = fmaf(a[i], bv[j], s[i][j]);
    }
}

/* acc[i][j] += sum_k P[ty+16i, k] M[k, tx+16j], k < NK in order; P has row stride ps, M is a
 * tile of stride DP + 1 */
template <int DP, int NK>
__device__ static inline void att_acc(float (&acc)[4][DP / 16], const float *P, int ps, const float *M) {
    constexpr int SD = DP + 1, NC = DP / 16;
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll 4
    for (int k = 0; k < NK; k++) {
        float pv[4], mv[NC];
        for (int i = 0; i < 4; i++) pv[i] = P[(ty + 16 * i) * ps + k];
        for (int j = 0; j < NC; j++) mv[j] = M[k * SD + tx + 16 * j];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < NC; j++) acc[i][j] = fmaf(pv[i], mv[j], acc[i][j]);
    }
}

/* ---- forward: block (query tile, h, b); y (B, L, D), lse (B, H, L) ---- */
template <int DP>
__global__ void __launch_bounds__(ATT_THREADS) att_fwd(float *y, float *lse, const float *qkv, const uint8_t *mask,
                                                       int L, int H, int Dh, int causal, float scale) {
    constexpr int SD = DP + 1, NC = DP / 16;
    extern __shared__ float att_smem[];
    float *Qs = att_smem;              // (64, SD) the block's queries
    float *Ks = Qs + ATT_BIG * SD;     // (64, SD) a key tile
    float *Vs = Ks + ATT_BIG * SD;     // (64, SD) its values
    float *Ps = Vs + ATT_BIG * SD;     // (64, ATT_PS) probabilities, query row by key
    int *kok = (int *)(Ps + ATT_BIG * ATT_PS); // (64) key exists and is not padding
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int i0 = (int)(gridDim.x - 1 - blockIdx.x) * ATT_BIG, h = blockIdx.y, b = blockIdx.z;
    const int64_t D = (int64_t)H * Dh, ld = 3 * D;
    const float *Q = qkv + (int64_t)b * L * ld + (int64_t)h * Dh, *K = Q + D, *V = Q + 2 * D;

    att_tile<DP>(Qs, Q, ld, i0, ATT_BIG, L, Dh);
    float o[4][NC], m[4], l[4];
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int j = 0; j < NC; j++) o[i][j] = 0.0f;
    }
    const int jend = causal ? min(L, i0 + ATT_BIG) : L;
    for (int j0 = 0; j0 < jend; j0 += ATT_BIG) {
        __syncthreads(); /* the previous tile's Ks, Vs, Ps, kok are no longer read (and Qs is in) */
        att_tile<DP>(Ks, K, ld, j0, ATT_BIG, L, Dh);
        att_tile<DP>(Vs, V, ld, j0, ATT_BIG, L, Dh);
        if (tid < ATT_BIG) kok[tid] = att_key_ok(mask, b, L, j0 + tid);
        __syncthreads();
        float s[4][4]; /* s[i][j] = q_(ty+16i) . k_(tx+16j) */
        att_dots<DP, 4>(s, Qs, Ks);
        /* online softmax; branch-free in the shuffles (the two ty rows of a warp may differ) */
        for (int i = 0; i < 4; i++) {
            const int r = i0 + ty + 16 * i;
            float mx = -INFINITY;
            for (int j = 0; j < 4; j++) {
                const int c = tx + 16 * j;
                const bool vis = r < L && kok[c] && (!causal || j0 + c <= r);
                s[i][j] = vis ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            mx = att_row_max(mx);
            const bool any = mx != -INFINITY;            /* nothing visible in this tile: no update */
            const float mnew = any ? fmaxf(m[i], mx) : m[i];
            const float corr = any ? expf(m[i] - mnew) : 1.0f; /* exp(-inf) = 0 on the first visible tile */
            float sum = 0.0f;
            for (int j = 0; j < 4; j++) {
                const float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mnew);
                Ps[(ty + 16 * i) * ATT_PS + tx + 16 * j] = p;
                sum += p;
            }
            sum = att_row_sum(sum);
            l[i] = l[i] * corr + sum;
            m[i] = mnew;
            for (int j = 0; j < NC; j++) o[i][j] *= corr;
        }
        __syncthreads();
        att_acc<DP, ATT_BIG>(o, Ps, ATT_PS, Vs); /* o[i][j] += sum_k P[ty+16i, k] v_k[tx+16j] */
    }
    for (int i = 0; i < 4; i++) {
        const int r = i0 + ty + 16 * i;
        if (r >= L) continue;
        const bool none = l[i] == 0.0f; /* no visible key: output 0, lse = +inf marks it for backward */
        const float inv = none ? 0.0f : 1.0f / l[i];
        float *yr = y + ((int64_t)b * L + r) * D + (int64_t)h * Dh;
        for (int j = 0; j < NC; j++) {
            const int c = tx + 16 * j;
            if (c < Dh) yr[c] = none ? 0.0f : o[i][j] * inv;
        }
        if (tx == 0) lse[((int64_t)b * H + h) * L + r] = none ? INFINITY : m[i] + logf(l[i]);
    }
}

/* ---- backward ---- */

/* Dd[b, h, i] = sum_d dO[b, i, h*Dh + d] * O[b, i, h*Dh + d], in double; a warp per (b, i, h) */
__global__ static void att_rowdot(float *Dd, const float *g, const float *y, int64_t nw, int L, int H, int Dh) {
    const int64_t w = (int64_t)blockIdx.x * (ATT_THREADS / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (w >= nw) return; /* whole warps */
    const int64_t bl = w / H, b = bl / L;
    const int h = (int)(w % H), i = (int)(bl % L);
    const float *gr = g + bl * H * Dh + (int64_t)h * Dh, *yr = y + bl * H * Dh + (int64_t)h * Dh;
    double s = 0.0;
    for (int d = lane; d < Dh; d += 32) s += (double)gr[d] * yr[d];
    s = cu_warp_sum(s);
    if (lane == 0) Dd[(b * H + h) * L + i] = (float)s;
}

/* dK, dV for the 64 keys j0.. of (b, h): block (key tile, h, b); queries i >= j0 (causal) or
 * all, in steps of 32. Thread (ty, tx): scores for keys ty+16i (i < 4) x queries tx+16j (j < 2),
 * then dK, dV rows ty+16i, columns tx+16j (j < DP/16). */
template <int DP>
__global__ void __launch_bounds__(ATT_THREADS) att_bwd_kv(float *dqkv, const float *qkv, const float *g,
                                                          const float *lse, const float *Dd, const uint8_t *mask,
                                                          int L, int H, int Dh, int causal, float scale, int fresh) {
    constexpr int SD = DP + 1, NC = DP / 16;
    extern __shared__ float att_smem[];
    float *Ks = att_smem;                // (64, SD) the block's keys
    float *Vs = Ks + ATT_BIG * SD;       // (64, SD) their values
    float *Qs = Vs + ATT_BIG * SD;       // (32, SD) a step of queries
    float *Gs = Qs + ATT_STEP * SD;      // (32, SD) their dO
    float *PT = Gs + ATT_STEP * SD;      // (64, ATT_SS) P^T: key by query
    float *ST = PT + ATT_BIG * ATT_SS;   // (64, ATT_SS) dS^T
    float *ls = ST + ATT_BIG * ATT_SS;   // (32) lse of the step's queries (+inf: none or no grad)
    float *ds = ls + ATT_STEP;           // (32) D_i of the step's queries
    int *kok = (int *)(ds + ATT_STEP);   // (64)
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int j0 = (int)blockIdx.x * ATT_BIG, h = blockIdx.y, b = blockIdx.z;
    const int64_t D = (int64_t)H * Dh, ld = 3 * D;
    const float *Q = qkv + (int64_t)b * L * ld + (int64_t)h * Dh, *K = Q + D, *V = Q + 2 * D;
    const float *G = g + (int64_t)b * L * D + (int64_t)h * Dh;
    const float *lrow = lse + ((int64_t)b * H + h) * L, *drow = Dd + ((int64_t)b * H + h) * L;

    att_tile<DP>(Ks, K, ld, j0, ATT_BIG, L, Dh);
    att_tile<DP>(Vs, V, ld, j0, ATT_BIG, L, Dh);
    if (tid < ATT_BIG) kok[tid] = att_key_ok(mask, b, L, j0 + tid);
    float dk[4][NC], dv[4][NC];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < NC; j++) dk[i][j] = dv[i][j] = 0.0f;
    for (int q0 = causal ? j0 : 0; q0 < L; q0 += ATT_STEP) {
        __syncthreads(); /* the previous step's Qs, Gs, PT, ST, ls, ds are no longer read (and Ks, Vs, kok are in) */
        att_tile<DP>(Qs, Q, ld, q0, ATT_STEP, L, Dh);
        att_tile<DP>(Gs, G, D, q0, ATT_STEP, L, Dh);
        if (tid < ATT_STEP) {
            const int q = q0 + tid;
            ls[tid] = q < L ? lrow[q] : INFINITY;
            ds[tid] = q < L ? drow[q] : 0.0f;
        }
        __syncthreads();
        float s[4][2], dp[4][2]; /* S^T and dP^T: key ty+16i by query tx+16j */
        att_dots<DP, 2>(s, Ks, Qs);
        att_dots<DP, 2>(dp, Vs, Gs);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++) {
                const int c = ty + 16 * i, r = tx + 16 * j; /* key j0 + c, query q0 + r */
                const bool vis = kok[c] && ls[r] != INFINITY && (!causal || j0 + c <= q0 + r);
                const float p = vis ? expf(s[i][j] * scale - ls[r]) : 0.0f;
                PT[c * ATT_SS + r] = p;
                ST[c * ATT_SS + r] = p * (dp[i][j] - ds[r]);
            }
        __syncthreads();
        att_acc<DP, ATT_STEP>(dv, PT, ATT_SS, Gs); /* dv[i][j] += sum_r P^T[ty+16i, r] dO_r[tx+16j] */
        att_acc<DP, ATT_STEP>(dk, ST, ATT_SS, Qs); /* dk[i][j] += sum_r dS^T[ty+16i, r] q_r[tx+16j] */
    }
    for (int i = 0; i < 4; i++) {
        const int j = j0 + ty + 16 * i;
        if (j >= L) continue;
        float *gk = dqkv + ((int64_t)b * L + j) * ld + D + (int64_t)h * Dh, *gvr = gk + D;
        for (int c = 0; c < NC; c++) {
            const int d = tx + 16 * c;
            if (d >= Dh) continue;
            const float vk = scale * dk[i][c];
            gk[d] = fresh ? vk : gk[d] + vk;
            gvr[d] = fresh ? dv[i][c] : gvr[d] + dv[i][c];
        }
    }
}

/* dQ for the 64 queries i0.. of (b, h): block (query tile, h, b); keys j < i0 + 64 (causal) or
 * all, in steps of 32. Thread (ty, tx): scores for queries ty+16i (i < 4) x keys tx+16j (j < 2),
 * then dQ rows ty+16i, columns tx+16j (j < DP/16). */
template <int DP>
__global__ void __launch_bounds__(ATT_THREADS) att_bwd_q(float *dqkv, const float *qkv, const float *g,
                                                         const float *lse, const float *Dd, const uint8_t *mask,
                                                         int L, int H, int Dh, int causal, float scale, int fresh) {
    constexpr int SD = DP + 1, NC = DP / 16;
    extern __shared__ float att_smem[];
    float *Qs = att_smem;                // (64, SD) the block's queries
    float *Gs = Qs + ATT_BIG * SD;       // (64, SD) their dO
    float *Ks = Gs + ATT_BIG * SD;       // (32, SD) a step of keys
    float *Vs = Ks + ATT_STEP * SD;      // (32, SD) their values
    float *Ss = Vs + ATT_STEP * SD;      // (64, ATT_SS) dS: query by key
    float *ls = Ss + ATT_BIG * ATT_SS;   // (64) lse of the block's queries
    float *ds = ls + ATT_BIG;            // (64) their D_i
    int *kok = (int *)(ds + ATT_BIG);    // (32)
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int i0 = (int)(gridDim.x - 1 - blockIdx.x) * ATT_BIG, h = blockIdx.y, b = blockIdx.z;
    const int64_t D = (int64_t)H * Dh, ld = 3 * D;
    const float *Q = qkv + (int64_t)b * L * ld + (int64_t)h * Dh, *K = Q + D, *V = Q + 2 * D;
    const float *G = g + (int64_t)b * L * D + (int64_t)h * Dh;
    const float *lrow = lse + ((int64_t)b * H + h) * L, *drow = Dd + ((int64_t)b * H + h) * L;

    att_tile<DP>(Qs, Q, ld, i0, ATT_BIG, L, Dh);
    att_tile<DP>(Gs, G, D, i0, ATT_BIG, L, Dh);
    if (tid < ATT_BIG) {
        const int q = i0 + tid;
        ls[tid] = q < L ? lrow[q] : INFINITY;
        ds[tid] = q < L ? drow[q] : 0.0f;
    }
    float dq[4][NC];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < NC; j++) dq[i][j] = 0.0f;
    const int jend = causal ? min(L, i0 + ATT_BIG) : L;
    for (int k0 = 0; k0 < jend; k0 += ATT_STEP) {
        __syncthreads(); /* the previous step's Ks, Vs, Ss, kok are no longer read (and Qs, Gs, ls, ds are in) */
        att_tile<DP>(Ks, K, ld, k0, ATT_STEP, L, Dh);
        att_tile<DP>(Vs, V, ld, k0, ATT_STEP, L, Dh);
        if (tid < ATT_STEP) kok[tid] = att_key_ok(mask, b, L, k0 + tid);
        __syncthreads();
        float s[4][2], dp[4][2]; /* S and dP: query ty+16i by key tx+16j */
        att_dots<DP, 2>(s, Qs, Ks);
        att_dots<DP, 2>(dp, Gs, Vs);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++) {
                const int r = ty + 16 * i, c = tx + 16 * j; /* query i0 + r, key k0 + c */
                const bool vis = kok[c] && ls[r] != INFINITY && (!causal || k0 + c <= i0 + r);
                const float p = vis ? expf(s[i][j] * scale - ls[r]) : 0.0f;
                Ss[r * ATT_SS + c] = p * (dp[i][j] - ds[r]);
            }
        __syncthreads();
        att_acc<DP, ATT_STEP>(dq, Ss, ATT_SS, Ks); /* dq[i][j] += sum_c dS[ty+16i, c] k_c[tx+16j] */
    }
    for (int i = 0; i < 4; i++) {
        const int q = i0 + ty + 16 * i;
        if (q >= L) continue;
        float *gq = dqkv + ((int64_t)b * L + q) * ld + (int64_t)h * Dh;
        for (int c = 0; c < NC; c++) {
            const int d = tx + 16 * c;
            if (d >= Dh) continue;
            const float v = scale * dq[i][c];
            gq[d] = fresh ? v : gq[d] + v;
        }
    }
}

/* ---- host side: launches, the tape node, backward ---- */

typedef struct att_shape {
    int64_t B, L, H, Dh;
    int causal;
    float scale;
} att_shape;

static att_shape att_shape_of(const gf_tensor *qkv, int64_t H, int causal) {
    att_shape a;
    a.B = qkv->shape[0];
    a.L = qkv->shape[1];
    a.H = H;
    a.Dh = qkv->shape[2] / 3 / H;
    a.causal = causal;
    a.scale = (float)(1.0 / sqrt((double)a.Dh)); /* as the CPU op */
    return a;
}

/* the kernels' grid: (tiles of 64 rows, H, B) */
static dim3 att_grid(const att_shape *a) {
    return dim3((unsigned)((a->L + ATT_BIG - 1) / ATT_BIG), (unsigned)a->H, (unsigned)a->B);
}

template <int DP>
static void att_fwd_launch(const att_shape *a, float *y, float *lse, const float *qkv, const uint8_t *mask) {
    if (a->B * a->L * a->H == 0) return; /* nothing to attend (and no grid of 0 blocks) */
    const size_t bytes = (size_t)att_fwd_smem(DP) * sizeof(float);
    cu_smem_opt_in((const void *)att_fwd<DP>, bytes, "attention");
    att_fwd<DP><<<att_grid(a), ATT_THREADS, bytes, gf_cuda_stream()>>>(y, lse, qkv, mask, (int)a->L, (int)a->H,
                                                                       (int)a->Dh, a->causal, a->scale);
    const int64_t nd = a->B * a->L * a->H * a->Dh, nr = a->B * a->H * a->L, nm = mask ? a->B * a->L : 0;
    GF_CUDA_LAUNCHED("att_fwd", 4 * (4 * nd + nr) + nm); /* qkv, y; lse; the mask */
}

template <int DP>
static void att_bwd_launch(const att_shape *a, float *dqkv, const float *qkv, const float *g, const float *lse,
                           const float *Dd, const uint8_t *mask, int fresh) {
    const size_t kv_bytes = (size_t)att_kv_smem(DP) * sizeof(float), q_bytes = (size_t)att_q_smem(DP) * sizeof(float);
    cu_smem_opt_in((const void *)att_bwd_kv<DP>, kv_bytes, "attention");
    att_bwd_kv<DP><<<att_grid(a), ATT_THREADS, kv_bytes, gf_cuda_stream()>>>(
        dqkv, qkv, g, lse, Dd, mask, (int)a->L, (int)a->H, (int)a->Dh, a->causal, a->scale, fresh);
    /* qkv, dy, dK and dV (read too unless fresh); lse and D; the mask */
    const int64_t nd = a->B * a->L * a->H * a->Dh, nr = a->B * a->H * a->L, nm = mask ? a->B * a->L : 0;
    GF_CUDA_LAUNCHED("att_bwd_kv", 4 * ((fresh ? 6 : 8) * nd + 2 * nr) + nm);
    cu_smem_opt_in((const void *)att_bwd_q<DP>, q_bytes, "attention");
    att_bwd_q<DP><<<att_grid(a), ATT_THREADS, q_bytes, gf_cuda_stream()>>>(
        dqkv, qkv, g, lse, Dd, mask, (int)a->L, (int)a->H, (int)a->Dh, a->causal, a->scale, fresh);
    GF_CUDA_LAUNCHED("att_bwd_q", 4 * ((fresh ? 5 : 6) * nd + 2 * nr) + nm);
}

static void attention_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *qkv = n->in[0];
    if (!gf_needs_grad(qkv)) return;
    const att_shape a = att_shape_of(qkv, n->ip[0], (int)n->ip[1]);
    const float *lse = (const float *)n->saved;    // (B, H, L)
    const uint8_t *mask = (const uint8_t *)n->aux; // (B, L) on the device, or NULL
    const int fresh = gf_grad_fresh(qkv);
    float *Dd = gf_cuda_floats(ctx, a.B * a.H * a.L); // (B, H, L)
    const int64_t nw = a.B * a.L * a.H;
    if (nw == 0) return; /* no rows: no gradient (and no grid of 0 blocks) */
    att_rowdot<<<(unsigned)((nw + ATT_THREADS / 32 - 1) / (ATT_THREADS / 32)), ATT_THREADS, 0, gf_cuda_stream()>>>(
        Dd, n->out->grad, n->out->data, nw, (int)a.L, (int)a.H, (int)a.Dh);
    GF_CUDA_LAUNCHED("att_rowdot", 4 * (2 * nw * a.Dh + nw));
    if (a.Dh <= 32) att_bwd_launch<32>(&a, qkv->grad, qkv->data, n->out->grad, lse, Dd, mask, fresh);
    else if (a.Dh <= 64) att_bwd_launch<64>(&a, qkv->grad, qkv->data, n->out->grad, lse, Dd, mask, fresh);
    else att_bwd_launch<128>(&a, qkv->grad, qkv->data, n->out->grad, lse, Dd, mask, fresh);
}

static const gf_op_def attention_cuda = {"attention", GF_FAM_ATTENTION, attention_backward_cuda, 1};

gf_tensor *gf_attention_cuda(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, int causal, const uint8_t *key_mask) {
    const att_shape a = att_shape_of(qkv, n_heads, causal ? 1 : 0);
    GF_ASSERT(a.Dh <= ATT_MAX_DH, "attention (cuda): head dim %lld (D %lld / %lld heads) over the kernels' limit of %d",
              (long long)a.Dh, (long long)(a.Dh * a.H), (long long)a.H, ATT_MAX_DH);
    GF_ASSERT(a.B <= 65535 && a.H <= 65535 && a.L <= (1LL << 24),
              "attention (cuda): B %lld, heads %lld, L %lld over the grid's limits (65535, 65535, 2^24)",
              (long long)a.B, (long long)a.H, (long long)a.L);
    gf_tensor *y = cu_tensor_like_cols(ctx, qkv, a.H * a.Dh); // (B, L, D)
    float *lse = gf_cuda_floats(ctx, a.B * a.H * a.L);        // (B, H, L)
    /* the caller's host mask may be reused before backward runs: the staged copy serves both */
    const uint8_t *mask = key_mask ? (const uint8_t *)cu_stage(ctx, key_mask, (size_t)(a.B * a.L)) : NULL; // (B, L)
    if (a.Dh <= 32) att_fwd_launch<32>(&a, y->data, lse, qkv->data, mask);
    else if (a.Dh <= 64) att_fwd_launch<64>(&a, y->data, lse, qkv->data, mask);
    else att_fwd_launch<128>(&a, y->data, lse, qkv->data, mask);
    gf_tensor *in[1] = {qkv};
    gf_node *n = gf_tape_record(ctx, &attention_cuda, y, 1, in);
    if (n) {
        n->saved = lse;
        n->aux = (void *)mask;
        n->ip[0] = a.H;
        n->ip[1] = a.causal;
    }
    return y;
}
