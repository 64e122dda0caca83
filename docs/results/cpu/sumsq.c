/* sumsq.c — gf_sumsq_f32 over 12.6M floats (the paper GrassmannLM's gradient block), best of 20, 2 threads:
 *   gcc -O2 -fopenmp sumsq.c BUILD/libgflow.a -lopenblas -lm && OMP_NUM_THREADS=2 ./a.out */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
double gf_sumsq_f32(const float *x, int64_t n);
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){ int64_t n=12600000; float *x=malloc(n*4); for(int64_t i=0;i<n;i++) x[i]=(float)((i*2654435761u)%1000)*1e-3f-0.5f;
 double best=1e9,s=0; for(int r=0;r<20;r++){double t=now(); s=gf_sumsq_f32(x,n); t=now()-t; if(t<best)best=t;}
 printf("%.17g best %.3f ms\n",s,best*1e3); }
