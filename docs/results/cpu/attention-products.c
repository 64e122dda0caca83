/* attention-products.c — the Transformer's attention products alone (docs/performance.md, "Tried on Zen 5"):
 *   gcc -O2 -fopenmp attention-products.c -ldnnl -lopenblas && OMP_NUM_THREADS=2 ./a.out
 * forward QKᵀ and PV of one layer at the paper's shape (B 32, 4 heads of 64, L 128, causal): OpenBLAS per
 * (batch, head, query tile) as src/ops/attention.c runs them, against one oneDNN matmul over the
 * (batch, head) pairs (full L x L) in fp32 and in bf16 */
#include <oneapi/dnnl/dnnl.h>
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define T(c) do{dnnl_status_t s=(c); if(s){printf("fail %s %d\n",#c,s);exit(1);}}while(0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum {B=32,H=4,L=128,Dh=64,D=H*Dh,LD=3*D,BQ=64};
static float *qkv,*S,*Y;
static void blas_fwd(void){
  openblas_set_num_threads(1);
#pragma omp parallel for collapse(3) schedule(dynamic,1)
  for(int b=0;b<B;b++)for(int h=0;h<H;h++)for(int qb=1;qb>=0;qb--){
    float *s=S+((size_t)(b*H+h)*L+qb*BQ)*L; int i0=qb*BQ, jend=i0+BQ;
    const float *Q=qkv+(size_t)b*L*LD+h*Dh,*K=Q+D,*V=Q+2*D;
    cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasTrans,BQ,jend,Dh,1,Q+i0*LD,LD,K,LD,0,s,jend);
    cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,BQ,Dh,jend,1,s,jend,V,LD,0,Y+((size_t)b*L+i0)*D+h*Dh,D);
  }
}
static dnnl_engine_t eng; static dnnl_stream_t st;
typedef struct {dnnl_primitive_t p; dnnl_memory_t a,b,c;} mm;
/* batched (B,H): C[b,h] (M,N) = A[b,h] (M,K) * B[b,h] (K,N) with given 4D strides */
static mm mk(dnnl_data_type_t dt,int64_t M,int64_t N,int64_t K,const int64_t *sa,const int64_t *sb,const int64_t *sc,void*pa,void*pb,void*pc){
  mm r; dnnl_memory_desc_t ma,mb,mc; dnnl_dims_t da={B,H,M,K},db={B,H,K,N},dc={B,H,M,N};
  T(dnnl_memory_desc_init_by_strides(&ma,4,da,dt,sa));T(dnnl_memory_desc_init_by_strides(&mb,4,db,dt,sb));T(dnnl_memory_desc_init_by_strides(&mc,4,dc,dnnl_f32,sc));
  dnnl_matmul_desc_t md; T(dnnl_matmul_desc_init(&md,&ma,&mb,NULL,&mc));
  dnnl_primitive_desc_t pd; T(dnnl_primitive_desc_create(&pd,&md,NULL,eng,NULL));
  const char*impl; T(dnnl_primitive_desc_query(pd,dnnl_query_impl_info_str,0,&impl)); printf("  impl %s M%ld N%ld K%ld\n",impl,(long)M,(long)N,(long)K);
  T(dnnl_primitive_create(&r.p,pd)); T(dnnl_memory_create(&r.a,&ma,eng,pa));T(dnnl_memory_create(&r.b,&mb,eng,pb));T(dnnl_memory_create(&r.c,&mc,eng,pc)); return r;}
static void ex(mm*m){dnnl_exec_arg_t a[3]={{DNNL_ARG_SRC,m->a},{DNNL_ARG_WEIGHTS,m->b},{DNNL_ARG_DST,m->c}};T(dnnl_primitive_execute(m->p,st,3,a));}
int main(void){
  qkv=aligned_alloc(64,(size_t)B*L*LD*4); S=aligned_alloc(64,(size_t)B*H*L*L*4); Y=aligned_alloc(64,(size_t)B*L*D*4);
  for(size_t i=0;i<(size_t)B*L*LD;i++) qkv[i]=(float)((i*2654435761u)%1000)/1000.0f-0.5f;
  memset(S,0,(size_t)B*H*L*L*4);
  T(dnnl_engine_create(&eng,dnnl_cpu,0)); T(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  double fl=2.0*B*H*(BQ*64.0*Dh+BQ*128.0*Dh)*2; /* causal tiles: QK^T and PV */
  for(int rep=0;rep<3;rep++){ blas_fwd(); double t0=now(); for(int r=0;r<10;r++) blas_fwd(); double t=(now()-t0)/10; printf("openblas tiles   %.3f ms  %.0f GFLOP/s (causal-tile flops)\n",t*1e3,fl/t/1e9);}
  /* oneDNN f32 full: S (B,H,L,L) = Q K^T ; Y = S V */
  int64_t sq[4]={L*LD,Dh,LD,1}, sk[4]={L*LD,Dh,1,LD}, ss[4]={H*L*L,L*L,L,1}, sv[4]={L*LD,Dh,LD,1}, sy[4]={L*D,Dh,D,1};
  for(int bf=0;bf<2;bf++){
    dnnl_data_type_t dt=bf?dnnl_bf16:dnnl_f32; void *q=qkv; void *s16=NULL;
    if(bf){ q=aligned_alloc(64,(size_t)B*L*LD*2); memset(q,0x3c,(size_t)B*L*LD*2); s16=aligned_alloc(64,(size_t)B*H*L*L*2); memset(s16,0x3c,(size_t)B*H*L*L*2);}    
    mm a=mk(dt,L,L,Dh,sq,sk,ss,q,(char*)q+D*(bf?2:4),S);
    mm b=mk(dt,L,Dh,L,ss,sv,sy,bf?s16:(void*)S,(char*)q+2*D*(bf?2:4),Y);
    double flf=2.0*B*H*L*L*Dh*2;
    for(int rep=0;rep<3;rep++){ ex(&a);ex(&b);dnnl_stream_wait(st); double t0=now(); for(int r=0;r<10;r++){ex(&a);ex(&b);} dnnl_stream_wait(st); double t=(now()-t0)/10; printf("onednn %s full  %.3f ms  %.0f GFLOP/s (full flops)\n",bf?"bf16":"f32 ",t*1e3,flf/t/1e9);}
  }
  return 0;
}
