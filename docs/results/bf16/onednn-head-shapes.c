/* onednn-head-shapes.c — bf16 matmul shapes alone in oneDNN 2.x (docs/performance.md):
 *   gcc -O2 -fopenmp onednn-head-shapes.c -ldnnl && OMP_NUM_THREADS=2 ./a.out [SET]
 * SET head (default): the tied head's shapes at 256 rows ("The tied head in bf16"), B as stored
 * (plain) and in the layout oneDNN picks (anyB); sum: the head's at 512 and more rows, written and
 * summed into (acc 1: oneDNN's sum post-op), anyB; plucker-dw: the Plücker projection's dW as
 * (256, 496) += Gᵀ pbar, transposed as (496, 256) = pbarᵀ G, and at N 512 (the last two: "AMD EPYC
 * Zen 5"); grads: the FFN's and the gate's products at 4,096 rows, written and summed into (the
 * latter as a linear's bias was added before gf_gemm_bias, "AMD EPYC Zen 5"); de-k: the head's dE,
 * dlᵀ h, over K = 512 to 4,096 rows, written and summed into (one product over all of a step's
 * rows instead of eight, "AMD EPYC Zen 5"); logits and dh at 512 rows alone; dw-plain: the Transformer's
 * dW products with B as stored and in oneDNN's layout, written and summed into. */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define T(c) do{dnnl_status_t s=(c); if(s){printf("fail %s %d\n",#c,s);exit(1);}}while(0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
dnnl_engine_t eng; dnnl_stream_t st;
/* parts products C(M,N) f32 (dst row stride ldc, or written transposed tc) = A(M,K) * B(K,N), side by side */
static int anyb = 1, acc = 0;
static void run(const char *what,int64_t M,int64_t N,int64_t K,int ta,int tb,int tc,int64_t ldc,int parts,int reps){
  dnnl_memory_desc_t ma,mb,mc,mbq; dnnl_dims_t da={M,K},db={K,N},dc={M,N};
  dnnl_dims_t sa={ta?1:K,ta?M:1}, sb={tb?1:N,tb?K:1}, sc={tc?1:ldc,tc?ldc:1};
  T(dnnl_memory_desc_init_by_strides(&ma,2,da,dnnl_bf16,sa));
  T(dnnl_memory_desc_init_by_strides(&mb,2,db,dnnl_bf16,sb));
  T(dnnl_memory_desc_init_by_strides(&mc,2,dc,dnnl_f32,sc));
  if (anyb) T(dnnl_memory_desc_init_by_tag(&mbq,2,db,dnnl_bf16,dnnl_format_tag_any)); else mbq = mb;
  dnnl_matmul_desc_t md; T(dnnl_matmul_desc_init(&md,&ma,&mbq,NULL,&mc));
  dnnl_primitive_attr_t at; T(dnnl_primitive_attr_create(&at)); if(acc){dnnl_post_ops_t po; T(dnnl_post_ops_create(&po)); T(dnnl_post_ops_append_sum(po,1.0f)); T(dnnl_primitive_attr_set_post_ops(at,po));}
  dnnl_primitive_desc_t pd; T(dnnl_primitive_desc_create(&pd,&md,at,eng,NULL));
  const char *impl; T(dnnl_primitive_desc_query(pd,dnnl_query_impl_info_str,0,&impl));
  const dnnl_memory_desc_t *mw=dnnl_primitive_desc_query_md(pd,dnnl_query_weights_md,0);
  dnnl_primitive_t p; T(dnnl_primitive_create(&p,pd));
  size_t cn=(size_t)(tc?N*ldc:M*ldc)*(tc?parts:1);
  void *a=aligned_alloc(64,M*K*2), *b=aligned_alloc(64,(dnnl_memory_desc_get_size(mw)+63)/64*64), *c=aligned_alloc(64,cn*4+4096*64);
  memset(a,0x3f,M*K*2); memset(b,0x3f,dnnl_memory_desc_get_size(mw)); memset(c,0,cn*4);
  dnnl_memory_t A,B,C; T(dnnl_memory_create(&A,&ma,eng,a)); T(dnnl_memory_create(&B,mw,eng,b)); T(dnnl_memory_create(&C,&mc,eng,c));
  dnnl_exec_arg_t args[3]={{DNNL_ARG_SRC,A},{DNNL_ARG_WEIGHTS,B},{DNNL_ARG_DST,C}};
  T(dnnl_primitive_execute(p,st,3,args)); dnnl_stream_wait(st);
  double best=1e9,tot=0;
  for(int r=0;r<reps;r++){double t0=now(); for(int q=0;q<parts;q++){T(dnnl_memory_set_data_handle(C,(float*)c+(tc?q*N*ldc:q*N))); T(dnnl_primitive_execute(p,st,3,args));} dnnl_stream_wait(st); double t=now()-t0; tot+=t; if(t<best)best=t;}
  printf("%-5s%s %-26s %5ldx%5ldx%5ld x%-3d %-26s best %7.2f ms mean %7.2f ms %6.0f GFLOP/s\n",anyb?"anyB":"plain",acc?"+=":"",what,(long)M,(long)N,(long)K,parts,impl,best*1e3,tot/reps*1e3,2.0*M*N*K*parts/best/1e9);
  free(a);free(b);free(c);
}
static void head(void){
  int V=30522;
  for (anyb = 0; anyb < 2; anyb++) {
    run("logits N 30522",256,V,256,0,1,0,V,1,6);
    run("logits N 30528",256,30528,256,0,1,0,30528,1,6);
    run("logits N 30720",256,30720,256,0,1,0,30720,1,6);
    run("logits M512 N 30522",512,V,256,0,1,0,V,1,4);
    run("logits M512 N 30720",512,30720,256,0,1,0,30720,1,4);
    run("logitsT E.hT (V,n) dense",V,256,256,0,1,0,256,1,6);
    run("logits N split 2048 ldc V",256,2048,256,0,1,0,V,14,4);
    run("dh K 30522",256,256,V,0,0,0,256,1,6);
    run("dh K 30720",256,256,30720,0,0,0,256,1,6);
    run("dE M 30522",V,256,256,1,0,0,256,1,6);
  }
}
static void sum(void){
  int V=30720; anyb=1;
  for (acc = 0; acc < 2; acc++) {
    run("dE K512",V,256,512,1,0,0,256,1,5);
    run("dE K1024",V,256,1024,1,0,0,256,1,4);
    run("dE K2048",V,256,2048,1,0,0,256,1,3);
    run("dE K4096",V,256,4096,1,0,0,256,1,2);
    run("dh M512",512,256,V,0,0,0,256,1,5);
    run("dh M1024",1024,256,V,0,0,0,256,1,4);
    run("logits M512",512,V,256,0,1,0,V,1,5);
    run("logits M1024",1024,V,256,0,1,0,V,1,4);
  }
}
static void plucker_dw(void){
  anyb=1;
  for (int rep=0; rep<2; rep++) {
    acc=1; run("dW (D,P) += GT pbar",256,496,4096,1,0,0,496,1,6);
    acc=0; run("dWT (P,D) = pbarT G",496,256,4096,1,0,0,256,1,6);
    acc=1; run("dW N512",256,512,4096,1,0,0,512,1,6);
  }
}
static void grads(void){
  anyb=1;
  for (acc = 0; acc < 2; acc++) {
    run("fc2 dW",256,1024,4096,1,0,0,1024,1,10);
    run("fc1 dW",1024,256,4096,1,0,0,256,1,10);
    run("gate dW",256,256,4096,1,0,0,256,1,10);
    run("fc1 fwd / fc2 dX",4096,1024,256,0,1,0,1024,1,10);
    run("fc2 fwd",4096,256,1024,0,1,0,256,1,10);
    run("fc1 dX",4096,256,1024,0,0,0,256,1,10);
    run("gate fwd",4096,256,256,0,1,0,256,1,10);
  }
}
int main(int argc, char **argv){
  setvbuf(stdout,NULL,_IONBF,0); T(dnnl_engine_create(&eng,dnnl_cpu,0)); T(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  const char *set = argc > 1 ? argv[1] : "head";
  if (!strcmp(set,"head")) head();
  else if (!strcmp(set,"sum")) sum();
  else if (!strcmp(set,"plucker-dw")) plucker_dw();
  else if (!strcmp(set,"grads")) grads();
  else if (!strcmp(set,"de-k")) {
    anyb = 1;
    for (acc = 0; acc < 2; acc++) for (int k = 512; k <= 4096; k *= 2) run("dE T",30720,256,k,1,0,0,256,1,4);
    acc = 0; run("dh",512,256,30720,0,0,0,256,1,6); run("logits",512,30720,256,0,1,0,30720,1,6);
  }
  else if (!strcmp(set,"dw-plain")) { /* the dW products, B (the layer's input) as stored and in oneDNN's layout */
    for (int rep = 0; rep < 2; rep++) for (acc = 0; acc < 2; acc++) for (anyb = 0; anyb < 2; anyb++) {
      run("fc1 dW",1024,256,4096,1,0,0,256,1,10);
      run("fc2 dW",256,1024,4096,1,0,0,1024,1,10);
      run("qkv dW",768,256,4096,1,0,0,256,1,10);
      run("proj dW",256,256,4096,1,0,0,256,1,10);
    }
  }
  else { fprintf(stderr,"usage: %s [head|sum|plucker-dw|grads|de-k|dw-plain]\n",argv[0]); return 2; }
  return 0;
}
