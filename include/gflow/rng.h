/* gflow/rng.h — explicit, seedable RNG whose state is plain data.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64. The whole state,
 * including the cached second normal of Box-Muller, is the struct below, so a
 * checkpoint saves it with memcpy and a restore reproduces the stream exactly.
 * Dropout masks use gf_rng_hash(): a counter-based draw from a key taken once
 * per op, so masks do not depend on the number of OpenMP threads.
 */
#ifndef GFLOW_RNG_H
#define GFLOW_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_rng {
    uint64_t s[4];
    double spare;       /* cached normal from Box-Muller */
    int32_t has_spare;
    int32_t pad_;
} gf_rng;

void gf_rng_seed(gf_rng *r, uint64_t seed);
uint64_t gf_rng_u64(gf_rng *r);
/* uniform integer in [0, n), unbiased (n > 0) */
uint64_t gf_rng_below(gf_rng *r, uint64_t n);
/* uniform float in [0, 1) with 24 random bits */
float gf_rng_uniform(gf_rng *r);
/* standard normal (double precision Box-Muller) */
double gf_rng_normal(gf_rng *r);
/* Fisher-Yates shuffle of an index array */
void gf_rng_shuffle_i64(gf_rng *r, int64_t *a, int64_t n);

/* The hash below is compiled for the GPU too (nvcc defines __CUDACC__): dropout's CUDA kernel
 * (src/ops/cuda/dropout.cu) calls this very definition, so its masks are the CPU's bit for bit. */
#ifndef GF_HOST_DEVICE
#ifdef __CUDACC__
#define GF_HOST_DEVICE __host__ __device__
#else
#define GF_HOST_DEVICE
#endif
#endif

/* Stateless counter-based hash (splitmix64 finaliser of key + i*golden). */
static inline GF_HOST_DEVICE uint64_t gf_rng_hash(uint64_t key, uint64_t i) {
    uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* float in [0,1) from the hash */
static inline GF_HOST_DEVICE float gf_rng_hash_uniform(uint64_t key, uint64_t i) {
    return (float)(gf_rng_hash(key, i) >> 40) * (1.0f / 16777216.0f);
}

#ifdef __cplusplus
}
#endif

#endif
