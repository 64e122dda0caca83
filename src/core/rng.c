/* rng.c — xoshiro256** with splitmix64 seeding; see gflow/rng.h. */
#include "gflow/rng.h"
#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void gf_rng_seed(gf_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->spare = 0.0;
    r->has_spare = 0;
    r->pad_ = 0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gf_rng_u64(gf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t gf_rng_below(gf_rng *r, uint64_t n) {
    /* rejection sampling: discard the low partial bucket so every value is equally likely */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t x;
    do { x = gf_rng_u64(r); } while (x >= limit);
    return x % n;
}

float gf_rng_uniform(gf_rng *r) {
    return (float)(gf_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

double gf_rng_normal(gf_rng *r) {
    if (r->has_spare) { r->has_spare = 0; return r->spare; }
    double u1, u2;
    do { u1 = (double)(gf_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); } while (u1 <= 0.0);
    u2 = (double)(gf_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return rad * cos(th);
}

void gf_rng_shuffle_i64(gf_rng *r, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)gf_rng_below(r, (uint64_t)i + 1);
        int64_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
}
