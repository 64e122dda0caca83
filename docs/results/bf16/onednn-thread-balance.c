/* onednn-thread-balance.c — each thread's CPU time in oneDNN 2.x's bf16 matmuls at the GrassmannLM
 * step's shapes (docs/performance.md, "AMD EPYC Zen 5"), against the wall time: how long one of the
 * two threads waits for the other; and (run_split) the same product as two single-threaded
 * primitives of M/2 rows each, one a thread, side by side.
 *   gcc -O2 -fopenmp onednn-thread-balance.c -ldnnl -lpthread
 *   OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 ./a.out REPS [SHAPE]    (SHAPE: an index of s[] below)
 *   OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 ./a.out REPS SET M...   (SET 0: M x 256 x 1024 TN =,
 *     1: 512 x M x 256 NT, 2: 512 x 256 x M NN, 3: M x 256 x 1024 TN +=) */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define T(c) do{dnnl_status_t s=(c); if(s){printf("fail %s %d\n",#c,s);exit(1);}}while(0)
static double ts(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec+t.tv_nsec*1e-9;}
dnnl_engine_t eng; dnnl_stream_t st; clockid_t wclk;
/* the matmul of (rows, K) · (K, N) bf16 -> f32 (A's rows of a (M, K) matrix: lda from M), B in the
 * layout oneDNN picks, C summed into where acc; made for nthr threads; ma, mc: A's and C's */
static dnnl_primitive_desc_t mm_pd(int64_t rows,int64_t M,int64_t N,int64_t K,int ta,int tb,int acc,int nthr,
                                   dnnl_memory_desc_t *ma,dnnl_memory_desc_t *mc){
  dnnl_memory_desc_t mb,mbq; dnnl_dims_t da={rows,K},db={K,N},dc={rows,N};
  dnnl_dims_t sa={ta?1:K,ta?M:1}, sb={tb?1:N,tb?K:1}, sc={N,1};
  T(dnnl_memory_desc_init_by_strides(ma,2,da,dnnl_bf16,sa));
  T(dnnl_memory_desc_init_by_strides(&mb,2,db,dnnl_bf16,sb));
  T(dnnl_memory_desc_init_by_strides(mc,2,dc,dnnl_f32,sc));
  T(dnnl_memory_desc_init_by_tag(&mbq,2,db,dnnl_bf16,dnnl_format_tag_any));
  dnnl_matmul_desc_t md; T(dnnl_matmul_desc_init(&md,ma,&mbq,NULL,mc));
  dnnl_primitive_attr_t at; T(dnnl_primitive_attr_create(&at)); if(acc){dnnl_post_ops_t po; T(dnnl_post_ops_create(&po)); T(dnnl_post_ops_append_sum(po,1.0f)); T(dnnl_primitive_attr_set_post_ops(at,po));}
  dnnl_primitive_desc_t pd; int nt=omp_get_max_threads(); omp_set_num_threads(nthr); T(dnnl_primitive_desc_create(&pd,&md,at,eng,NULL)); omp_set_num_threads(nt);
  return pd;
}
/* the times of reps calls of exec since w0/m0/k0, printed for the shape */
static void report(const char *how,int64_t M,int64_t N,int64_t K,int ta,int tb,int acc,int reps,double w0,double m0,double k0){
  double w=(ts(CLOCK_MONOTONIC)-w0)/reps, m=(ts(CLOCK_THREAD_CPUTIME_ID)-m0)/reps, k=(ts(wclk)-k0)/reps;
  printf("%6lld %6lld %6lld %c%c %s  %swall %7.3f ms  master %7.3f  worker %7.3f  idle %4.1f%%  %6.0f GFLOP/s",(long long)M,(long long)N,(long long)K,ta?'T':'N',tb?'T':'N',acc?"+=":"= ",how,w*1e3,m*1e3,k*1e3,100*(1-(m+k)/(2*w)),2.0*M*N*K/w*1e-9);
}
static void run(int64_t M,int64_t N,int64_t K,int ta,int tb,int acc,int reps){
  dnnl_memory_desc_t ma,mc;
  dnnl_primitive_desc_t pd=mm_pd(M,M,N,K,ta,tb,acc,omp_get_max_threads(),&ma,&mc);
  const char *impl; T(dnnl_primitive_desc_query(pd,dnnl_query_impl_info_str,0,&impl));
  const dnnl_memory_desc_t *mw=dnnl_primitive_desc_query_md(pd,dnnl_query_weights_md,0);
  dnnl_primitive_t p; T(dnnl_primitive_create(&p,pd));
  void *a=aligned_alloc(64,(M*K*2+63)/64*64), *b=aligned_alloc(64,(dnnl_memory_desc_get_size(mw)+63)/64*64), *c=aligned_alloc(64,(M*N*4+63)/64*64);
  memset(a,0x3f,M*K*2); memset(b,0x3f,dnnl_memory_desc_get_size(mw)); memset(c,0,M*N*4);
  dnnl_memory_t A,B,C; T(dnnl_memory_create(&A,&ma,eng,a)); T(dnnl_memory_create(&B,mw,eng,b)); T(dnnl_memory_create(&C,&mc,eng,c));
  dnnl_exec_arg_t args[3]={{DNNL_ARG_SRC,A},{DNNL_ARG_WEIGHTS,B},{DNNL_ARG_DST,C}};
  T(dnnl_primitive_execute(p,st,3,args)); dnnl_stream_wait(st);
  double w0=ts(CLOCK_MONOTONIC), m0=ts(CLOCK_THREAD_CPUTIME_ID), k0=ts(wclk);
  for(int r=0;r<reps;r++){ T(dnnl_primitive_execute(p,st,3,args)); dnnl_stream_wait(st); }
  report("",M,N,K,ta,tb,acc,reps,w0,m0,k0); printf("  %s\n",impl);
  dnnl_primitive_destroy(p); free(a); free(b); free(c);
}
/* two primitives of M/2 rows, made for one thread, run side by side, one a thread */
static void run_split(int64_t M,int64_t N,int64_t K,int ta,int tb,int acc,int reps){
  int64_t Mh=M/2; dnnl_primitive_t p; dnnl_memory_t A[2],B,C[2];
  dnnl_memory_desc_t ma,mc;
  dnnl_primitive_desc_t pd=mm_pd(Mh,M,N,K,ta,tb,acc,1,&ma,&mc);
  const dnnl_memory_desc_t *mw=dnnl_primitive_desc_query_md(pd,dnnl_query_weights_md,0);
  T(dnnl_primitive_create(&p,pd));
  char *a=aligned_alloc(64,(M*K*2+63)/64*64), *b=aligned_alloc(64,(dnnl_memory_desc_get_size(mw)+63)/64*64); float *c=aligned_alloc(64,(M*N*4+63)/64*64);
  memset(a,0x3f,M*K*2); memset(b,0x3f,dnnl_memory_desc_get_size(mw)); memset(c,0,M*N*4);
  for(int h=0;h<2;h++){ T(dnnl_memory_create(&A[h],&ma,eng,a+(ta? h*Mh*2 : h*Mh*K*2))); T(dnnl_memory_create(&C[h],&mc,eng,c+h*Mh*N)); }
  T(dnnl_memory_create(&B,mw,eng,b));
  dnnl_stream_t s2[2]; for(int h=0;h<2;h++) T(dnnl_stream_create(&s2[h],eng,dnnl_stream_default_flags));
  double w0=0,m0=0,k0=0;
  for(int r=-1;r<reps;r++){
    if(r==0){w0=ts(CLOCK_MONOTONIC); m0=ts(CLOCK_THREAD_CPUTIME_ID); k0=ts(wclk);}
    #pragma omp parallel num_threads(2)
    { int h=omp_get_thread_num(); dnnl_exec_arg_t args[3]={{DNNL_ARG_SRC,A[h]},{DNNL_ARG_WEIGHTS,B},{DNNL_ARG_DST,C[h]}};
      T(dnnl_primitive_execute(p,s2[h],3,args)); dnnl_stream_wait(s2[h]); }
  }
  report("split ",M,N,K,ta,tb,acc,reps,w0,m0,k0); printf("\n");
  dnnl_primitive_destroy(p); free(a); free(b); free(c);
}
int main(int argc,char**argv){
  T(dnnl_engine_create(&eng,dnnl_cpu,0)); T(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  pthread_t wt; 
  #pragma omp parallel num_threads(2)
  { if(omp_get_thread_num()==1) wt=pthread_self(); }
  pthread_getcpuclockid(wt,&wclk);
  int R=argc>1?atoi(argv[1]):20;
  /* M N K ta tb acc: the --products list of the GrassmannLM bf16 step */
  int64_t s[][6]={{512,256,30720,0,0,0},{512,30720,256,0,1,0},{30720,256,1024,1,0,1},{30720,256,1024,1,0,0},
   {1024,256,4096,1,0,1},{1024,256,4096,1,0,0},{4096,256,1024,0,0,1},{4096,256,1024,0,1,0},{4096,1024,256,0,1,0},
   {4096,1024,256,0,0,0},{4096,256,256,0,0,1},{256,256,4096,1,0,1},{496,256,4096,1,0,0},{1024,496,256,0,0,0},
   {4096,256,496,0,1,0},{4096,256,256,0,1,1},{4096,256,256,0,1,0},{4096,256,32,0,0,1},{256,32,4096,1,0,0},{4096,32,256,0,1,0}};
  if(argc>3){ /* M sweep: argv[2] = set */
    int set=atoi(argv[2]);
    for(int i=3;i<argc;i++){ int64_t v=atoll(argv[i]);
      if(set==0) run(v,256,1024,1,0,0,R); else if(set==1) run(512,v,256,0,1,0,R); else if(set==2) run(512,256,v,0,0,0,R); else run(v,256,1024,1,0,1,R);}
    return 0; }
  int only=argc>2?atoi(argv[2]):-1;
  for(size_t i=0;i<sizeof s/sizeof s[0];i++) if(only<0||only==(int)i) { run(s[i][0],s[i][1],s[i][2],s[i][3],s[i][4],s[i][5],R); run_split(s[i][0],s[i][1],s[i][2],s[i][3],s[i][4],s[i][5],R); }
}
