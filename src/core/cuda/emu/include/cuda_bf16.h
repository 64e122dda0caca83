/* cuda_bf16.h — the bfloat16 type and conversions gflow's CUDA code uses, as gflow's CUDA
 * emulator provides them (host C++; the toolkit's names): round to nearest even, a NaN stays a
 * (quiet) NaN. Bit-for-bit what __float2bfloat16_rn gives on a GPU for every finite value. */
#ifndef GF_EMU_CUDA_BF16_H
#define GF_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

typedef struct __nv_bfloat16 {
    uint16_t x;
} __nv_bfloat16;

static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) h.x = (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it quiet */
    else h.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return h;
}

static inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the bits of h */
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }

#endif
