/* attention-transpose.c — K's transposes for attention's products at the paper's shape (one
 * layer: B 32, L 128, 8 heads of 32, qkv rows of 768 floats), one thread: the 16-row gathers
 * (att_transpose without libxsmm) against libxsmm_otrans (docs/performance.md, "Two more cuts").
 *   gcc -O2 -march=native -fopenmp-simd attention-transpose.c -lxsmm -lopenblas -lm -ldl -lpthread
 * Output, AMD EPYC Zen 5, 2026-11-29 23:0x UTC (the first rep warms up):
 *   gather 0.525 ms  otrans 0.697 ms  (per layer, 256 (b,h), one thread) same=1
 *   gather 0.288 ms  otrans 0.150 ms  (per layer, 256 (b,h), one thread) same=1
 *   gather 0.209 ms  otrans 0.111 ms  (per layer, 256 (b,h), one thread) same=1
 *   gather 0.231 ms  otrans 0.103 ms  (per layer, 256 (b,h), one thread) same=1
 *   gather 0.177 ms  otrans 0.101 ms  (per layer, 256 (b,h), one thread) same=1 */
#include <libxsmm.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static void att_transpose(float *restrict Xt, const float *restrict X, int64_t n, int64_t Dh, int64_t ld, int64_t L) {
    int64_t j0 = 0;
    for (; j0 + 16 <= n; j0 += 16)
        for (int64_t d = 0; d < Dh; d++) {
            float *restrict t = Xt + d * L + j0;
            const float *restrict x = X + j0 * ld + d;
#pragma omp simd
            for (int64_t j = 0; j < 16; j++) t[j] = x[j * ld];
        }
    for (int64_t j = j0; j < n; j++)
        for (int64_t d = 0; d < Dh; d++) Xt[d * L + j] = X[j * ld + d];
}
int main(void){
  libxsmm_init();
  const int64_t B=32,L=128,D=256,ld=768,Dh=32,H=8;
  float *qkv=malloc(sizeof(float)*B*L*ld); for(int64_t i=0;i<B*L*ld;i++) qkv[i]=(float)(i%977)*0.1f;
  float *Xt=malloc(sizeof(float)*Dh*L), *Xt2=malloc(sizeof(float)*Dh*L);
  for(int rep=0;rep<5;rep++){
    double t0=now();
    for(int64_t b=0;b<B;b++)for(int64_t h=0;h<H;h++){ att_transpose(Xt, qkv+b*L*ld+D+h*Dh, L, Dh, ld, L); __asm__ volatile(""::"r"(Xt):"memory");}
    double t1=now();
    for(int64_t b=0;b<B;b++)for(int64_t h=0;h<H;h++){ libxsmm_otrans(Xt2, qkv+b*L*ld+D+h*Dh, 4, Dh, L, ld, L); __asm__ volatile(""::"r"(Xt2):"memory");}
    double t2=now();
    int bad=0; for(int i=0;i<Dh*L;i++) bad|= Xt[i]!=Xt2[i];
    printf("gather %.3f ms  otrans %.3f ms  (per layer, 256 (b,h), one thread) same=%d\n",(t1-t0)*1e3,(t2-t1)*1e3,!bad);
  }
}
