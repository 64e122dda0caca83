/* onednn-b-reorder.c — B operands rounded to bf16 into oneDNN's blocked layout (no AMX), two ways, with the source out of cache (a 128 MB write before each): gflow's rounding into a plain copy then a bf16 reorder, against one f32->bf16 reorder; and the bf16 values that differ (fp32 subnormals, every 97th value here). docs/performance.md "AMD EPYC Zen 5". gcc -O2 -march=native -fopenmp onednn-b-reorder.c -ldnnl && OMP_NUM_THREADS=2 ./a.out (oneDNN 2.x) */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#define T(c) do{dnnl_status_t s=(c); if(s){printf("fail %s %d\n",#c,s);exit(1);}}while(0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline uint16_t bf(float f){uint32_t u; memcpy(&u,&f,4); if((u&0x7fffffff)>0x7f800000) return (u>>16)|0x40; u+=0x7fff+((u>>16)&1); return u>>16;}
int main(int argc,char**argv){
  dnnl_engine_t eng; dnnl_stream_t st; T(dnnl_engine_create(&eng,dnnl_cpu,0)); T(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  int64_t shapes[][3]={{256,1024,4096},{256,496,4096},{1024,256,4096},{512,30720,256},{256,512,4096}};
  for(int si=0;si<5;si++){
    int64_t M=shapes[si][0],N=shapes[si][1],K=shapes[si][2]; int tb = si==3;
    dnnl_memory_desc_t ma,mb,mc,mw,mf; dnnl_dims_t da={M,K},db={K,N},dc={M,N};
    dnnl_dims_t sa={1,M}, sb={tb?1:N,tb?K:1}, sc={N,1};
    if(si==3){sa[0]=K;sa[1]=1;}
    T(dnnl_memory_desc_init_by_strides(&ma,2,da,dnnl_bf16,sa));
    T(dnnl_memory_desc_init_by_strides(&mb,2,db,dnnl_bf16,sb));
    T(dnnl_memory_desc_init_by_strides(&mf,2,db,dnnl_f32,sb));
    T(dnnl_memory_desc_init_by_strides(&mc,2,dc,dnnl_f32,sc));
    T(dnnl_memory_desc_init_by_tag(&mw,2,db,dnnl_bf16,dnnl_format_tag_any));
    dnnl_matmul_desc_t md; T(dnnl_matmul_desc_init(&md,&ma,&mw,NULL,&mc));
    dnnl_primitive_desc_t pd; T(dnnl_primitive_desc_create(&pd,&md,NULL,eng,NULL));
    const dnnl_memory_desc_t *ch=dnnl_primitive_desc_query_md(pd,dnnl_query_weights_md,0);
    dnnl_primitive_desc_t r1,r2; T(dnnl_reorder_primitive_desc_create(&r1,&mb,eng,ch,eng,NULL)); T(dnnl_reorder_primitive_desc_create(&r2,&mf,eng,ch,eng,NULL));
    const char *i1,*i2; dnnl_primitive_desc_query(r1,dnnl_query_impl_info_str,0,&i1); dnnl_primitive_desc_query(r2,dnnl_query_impl_info_str,0,&i2);
    dnnl_primitive_t p1,p2; T(dnnl_primitive_create(&p1,r1)); T(dnnl_primitive_create(&p2,r2));
    size_t n=K*N, qb=dnnl_memory_desc_get_size(ch);
    float *f=malloc(n*4); uint16_t *b16=malloc(n*2); void *q1=malloc(qb), *q2=malloc(qb);
    for(size_t i=0;i<n;i++) f[i]=(float)((rand()%20001)-10000)/777.0f*((i%97)==0?1e-39f:1.0f);
    f[5]=1.0f+1.0f/256; f[6]=1.0f+3.0f/256; /* ties */
    dnnl_memory_t B,F,Q1,Q2; T(dnnl_memory_create(&B,&mb,eng,b16)); T(dnnl_memory_create(&F,&mf,eng,f)); T(dnnl_memory_create(&Q1,ch,eng,q1)); T(dnnl_memory_create(&Q2,ch,eng,q2));
    double b1=1e9,b2=1e9; static char *junk; if(!junk) junk=malloc(128<<20);
    for(int r=0;r<6;r++){
      memset(junk, r, 128<<20);
      double t0=now();
      #pragma omp parallel for schedule(static)
      for(int64_t k=0;k<K*N;k++) b16[k]=bf(f[k]);
      dnnl_exec_arg_t a1[2]={{DNNL_ARG_FROM,B},{DNNL_ARG_TO,Q1}}; T(dnnl_primitive_execute(p1,st,2,a1)); dnnl_stream_wait(st);
      double t1x=now(); memset(junk, r+1, 128<<20); double t1=now(); t0 += t1 - t1x;
      dnnl_exec_arg_t a2[2]={{DNNL_ARG_FROM,F},{DNNL_ARG_TO,Q2}}; T(dnnl_primitive_execute(p2,st,2,a2)); dnnl_stream_wait(st);
      double t2=now(); if(t1-t0<b1)b1=t1-t0; if(t2-t1<b2)b2=t2-t1;
    }
    size_t diff=0; for(size_t i=0;i<qb/2;i++) diff+=((uint16_t*)q1)[i]!=((uint16_t*)q2)[i];
    printf("%ldx%ldx%ld tb%d: round+reorder %.2f ms (%s) | f32 reorder %.2f ms (%s) | differing bf16 %zu of %zu\n",(long)M,(long)N,(long)K,tb,b1*1e3,i1,b2*1e3,i2,diff,qb/2);
  }
}
