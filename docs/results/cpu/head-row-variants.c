/* head-row-variants.c — the tied head's row kernel in bf16 (src/ops/head_ce.c), three ways, on 512 x
 * 30,720 fp32 logits written fresh before each chunk (as the product leaves them), 2 threads:
 *   A: max, exp in place + sum, scaled and rounded into bf16 bits (head_ce.c);
 *   B: max, exp rounded into the bits directly + sum (no third pass; the scale would move to the products);
 *   D: A with the next row's max taken in this row's exp pass.
 *   gcc -O3 -march=native -fopenmp -Isrc/ops -Iinclude head-row-variants.c -lm && OMP_NUM_THREADS=2 ./a.out */
#include "op_util.h"
#include <omp.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define V 30522
#define VP 30720
#define N 512
static double rowA(float *restrict l, uint16_t *restrict d, const float *next, int t, float inv){
  float m=l[0];
#pragma omp simd reduction(max:m)
  for(int64_t j=1;j<V;j++) m=l[j]>m?l[j]:m;
  double s=0;
  for(int64_t j0=0;j0<V;j0+=256){int64_t j1=j0+256<V?j0+256:V; if(next) for(int64_t j=j0;j<j1;j+=16) __builtin_prefetch(next+j,0,3);
    float bs=0;
#pragma omp simd reduction(+:bs)
    for(int64_t j=j0;j<j1;j++){l[j]=gf_expf_le88(l[j]-m); bs+=l[j];}
    s+=bs;}
  float sc=(float)(1.0/s)*inv; float lt=l[t]*sc-inv;
#pragma omp simd
  for(int64_t j=0;j<V;j++) d[j]=gf_bf16_of(l[j]*sc);
  d[t]=gf_bf16_of(lt);
  return s;
}
static double rowB(const float *restrict l, uint16_t *restrict d, const float *next, int t, float *ct, float inv){
  float m=l[0];
#pragma omp simd reduction(max:m)
  for(int64_t j=1;j<V;j++) m=l[j]>m?l[j]:m;
  double s=0;
  for(int64_t j0=0;j0<V;j0+=256){int64_t j1=j0+256<V?j0+256:V; if(next) for(int64_t j=j0;j<j1;j+=16) __builtin_prefetch(next+j,0,3);
    float bs=0;
#pragma omp simd reduction(+:bs)
    for(int64_t j=j0;j<j1;j++){float e=gf_expf_le88(l[j]-m); d[j]=gf_bf16_of(e); bs+=e;}
    s+=bs;}
  float et=gf_expf_le88(l[t]-m); *ct=(float)(1.0/s)*inv*et-inv; d[t]=0;
  return s;
}

static float rowmax(const float *restrict l){ float m=l[0];
#pragma omp simd reduction(max:m)
  for(int64_t j=1;j<V;j++) m=l[j]>m?l[j]:m;
  return m;}
/* D: exp of row l (max m known) with the next row's max (nx) in the same blocks */
static double rowD(float *restrict l, uint16_t *restrict d, const float *restrict nx, float m, float *mnext, int t, float inv){
  double s=0; float mn=nx?nx[0]:0;
  for(int64_t j0=0;j0<V;j0+=256){int64_t j1=j0+256<V?j0+256:V;
    float bs=0;
#pragma omp simd reduction(+:bs)
    for(int64_t j=j0;j<j1;j++){l[j]=gf_expf_le88(l[j]-m); bs+=l[j];}
    if(nx){
#pragma omp simd reduction(max:mn)
      for(int64_t j=j0;j<j1;j++) mn=nx[j]>mn?nx[j]:mn;}
    s+=bs;}
  *mnext=mn;
  float sc=(float)(1.0/s)*inv; float lt=l[t]*sc-inv;
#pragma omp simd
  for(int64_t j=0;j<V;j++) d[j]=gf_bf16_of(l[j]*sc);
  d[t]=gf_bf16_of(lt);
  return s;
}
int main(){
  float *L=aligned_alloc(64,(size_t)N*VP*4); uint16_t *D=aligned_alloc(64,(size_t)N*VP*2); float ct[N];
  for(int rep=0;rep<6;rep++) for(int var=0;var<3;var++){
    double tt=0;
    for(int it=0;it<8;it++){
#pragma omp parallel for
      for(int64_t i=0;i<(int64_t)N*VP;i++) L[i]=(float)((i*2654435761u)%20000)*1e-3f-10.0f;
      double t0=now();
if(var<2){
#pragma omp parallel for schedule(static)
      for(int r=0;r<N;r++){ float *l=L+(int64_t)r*VP; const float *nx=r+1<N?l+VP:NULL;
        if(var==0) rowA(l,D+(int64_t)r*VP,nx,r%V,1.0f/4096); else rowB(l,D+(int64_t)r*VP,nx,r%V,&ct[r],1.0f/4096);}
      } else {
#pragma omp parallel
      { int T=omp_get_num_threads(), th=omp_get_thread_num(); int lo=N*th/T, hi=N*(th+1)/T; float m=rowmax(L+(int64_t)lo*VP);
        for(int r=lo;r<hi;r++){ float *l=L+(int64_t)r*VP; float mn; rowD(l,D+(int64_t)r*VP,r+1<hi?l+VP:NULL,m,&mn,r%V,1.0f/4096); m=mn; } }
      }
      tt+=now()-t0;
    }
    printf("%c %.2f ms per 512-row chunk (x8 = %.1f ms a step)\n","ABD"[var],tt/8*1e3,tt*1e3);
  }
}
