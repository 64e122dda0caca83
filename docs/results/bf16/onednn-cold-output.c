/* onednn-cold-output.c — one bf16 matmul of the paper model's shapes alone, its fp32 output C the same
 * buffer every run (warm: in cache) or a fresh region of a 1 GiB pool each run (cold), optionally in
 * transparent huge pages (docs/performance.md, "The AMX roof": a product inside a step against alone).
 * gcc -O2 -fopenmp onednn-cold-output.c -ldnnl && OMP_NUM_THREADS=2 ./a.out */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#define T(c) do{dnnl_status_t s_=(c); if(s_){printf("fail %s %d\n",#c,s_);exit(1);}}while(0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
dnnl_engine_t eng; dnnl_stream_t st;
/* C (M,N) = A (M,K) B (K,N), B stored (K,N); C in a pool: warm (same C each rep) or cold (a new region each rep) */
static void run(int64_t M,int64_t N,int64_t K,int acc,int huge,int cold){
  dnnl_memory_desc_t ma,mb,mc; dnnl_dims_t da={M,K},db={K,N},dc={M,N},sa={K,1},sb={N,1},sc={N,1};
  T(dnnl_memory_desc_init_by_strides(&ma,2,da,dnnl_bf16,sa)); T(dnnl_memory_desc_init_by_strides(&mb,2,db,dnnl_bf16,sb)); T(dnnl_memory_desc_init_by_strides(&mc,2,dc,dnnl_f32,sc));
  dnnl_matmul_desc_t md; T(dnnl_matmul_desc_init(&md,&ma,&mb,NULL,&mc));
  dnnl_primitive_attr_t attr; T(dnnl_primitive_attr_create(&attr));
  if(acc){dnnl_post_ops_t po; T(dnnl_post_ops_create(&po)); T(dnnl_post_ops_append_sum(po,1.0f)); T(dnnl_primitive_attr_set_post_ops(attr,po));}
  dnnl_primitive_desc_t pd; T(dnnl_primitive_desc_create(&pd,&md,attr,eng,NULL)); dnnl_primitive_t p; T(dnnl_primitive_create(&p,pd));
  size_t pool=(size_t)1<<30; char *P; posix_memalign((void**)&P,2<<20,pool); if(huge) madvise(P,pool,MADV_HUGEPAGE); memset(P,0,pool);
  uint16_t *a=(uint16_t*)P, *b=(uint16_t*)(P+(64<<20)); for(int64_t i=0;i<M*K;i++)a[i]=0x3c00+(i&63); for(int64_t i=0;i<K*N;i++)b[i]=0x3c00+(i&31);
  size_t cb=(size_t)M*N*4; char *c0=P+(128<<20); int slots=(int)((pool-(128<<20))/cb);
  dnnl_memory_t A,B,C; T(dnnl_memory_create(&A,&ma,eng,a)); T(dnnl_memory_create(&B,&mb,eng,b)); T(dnnl_memory_create(&C,&mc,eng,c0));
  dnnl_exec_arg_t args[3]={{DNNL_ARG_SRC,A},{DNNL_ARG_WEIGHTS,B},{DNNL_ARG_DST,C}};
  double tot=0,best=1e9; int reps=30;
  for(int r=0;r<reps+2;r++){ char*c=cold? c0+(size_t)(r%slots)*cb : c0; T(dnnl_memory_set_data_handle(C,c));
    double t0=now(); T(dnnl_primitive_execute(p,st,3,args)); T(dnnl_stream_wait(st)); double t=now()-t0; if(r>=2){tot+=t; if(t<best)best=t;} }
  printf("M%ld N%ld K%ld acc%d huge%d %s: mean %.2f ms best %.2f ms\n",(long)M,(long)N,(long)K,acc,huge,cold?"cold C":"warm C",tot/reps*1e3,best*1e3);
  free(P);
}
int main(){ setvbuf(stdout,NULL,_IONBF,0); T(dnnl_engine_create(&eng,dnnl_cpu,0)); T(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  for(int h=0;h<2;h++) for(int c=0;c<2;c++){ run(4096,1024,256,0,h,c); run(4096,256,256,0,h,c);} }
