/* attention-libxsmm.c — attention's products per (b, h) of one layer (B 32, H 8, L 128, Dh 32, query tiles of 64,
 * causal): OpenBLAS cblas_sgemm (one thread per task, as attention.c) against libxsmm's JIT kernels (K and V
 * transposed first: libxsmm 1.17 has no kernel with its first operand transposed), and how far they agree:
 *   gcc -O2 -fopenmp attention-libxsmm.c $(pkg-config --cflags --libs libxsmm) -lopenblas -lm && OMP_NUM_THREADS=2 ./a.out */
#include <cblas.h>
#include <libxsmm.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum{B=32,H=8,L=128,Dh=32,D=256,LD=768,BQ=64};
/* row-major C (M,N) = beta C + op(A) op(B) through a col-major kernel */
static libxsmm_smmfunction xk(int ta,int tb,int M,int N,int K,int lda,int ldb,int ldc,float beta){
  libxsmm_blasint m=N,n=M,k=K,la=ldb,lb=lda,lc=ldc; float al=1,be=beta; int fl=(tb?LIBXSMM_GEMM_FLAG_TRANS_A:0)|(ta?LIBXSMM_GEMM_FLAG_TRANS_B:0);
  libxsmm_smmfunction f=libxsmm_smmdispatch(m,n,k,&la,&lb,&lc,&al,&be,&fl,NULL);
  if(!f){fprintf(stderr,"no kernel ta %d tb %d M %d N %d K %d\n",ta,tb,M,N,K);}
  return f;}
static void bl(int ta,int tb,int M,int N,int K,const float*A,int lda,const float*Bm,int ldb,float beta,float*C,int ldc){
  cblas_sgemm(CblasRowMajor,ta?CblasTrans:CblasNoTrans,tb?CblasTrans:CblasNoTrans,M,N,K,1.0f,A,lda,Bm,ldb,beta,C,ldc);}
int main(){
  libxsmm_init(); openblas_set_num_threads(1);
  float *X=malloc(sizeof(float)*B*L*LD), *G=malloc(sizeof(float)*B*L*D), *Y=malloc(sizeof(float)*B*L*D), *dX=malloc(sizeof(float)*B*L*LD);
  for(long i=0;i<(long)B*L*LD;i++) X[i]=(i%97)*0.01f-0.5f; for(long i=0;i<(long)B*L*D;i++) G[i]=(i%89)*0.01f-0.4f;
  float *Yl[2], *dXl[2];
  for(int lib=0;lib<2;lib++) for(int rep=0;rep<4;rep++){
    if(rep==3) memset(dX,0,sizeof(float)*B*L*LD);
    double tf=0,tb=0;
    for(int pass=0;pass<2;pass++){
      double t0=now();
#pragma omp parallel
      { float *S=malloc(sizeof(float)*BQ*L), *P=malloc(sizeof(float)*BQ*L), *T=malloc(sizeof(float)*BQ*L), *Kt=malloc(sizeof(float)*Dh*L), *Vt=malloc(sizeof(float)*Dh*L);
#pragma omp for collapse(2) schedule(dynamic,1)
      for(int b=0;b<B;b++) for(int h=0;h<H;h++) for(int qb=1;qb>=0;qb--){
        int i0=qb*BQ, ni=BQ, je=i0+ni; const float *Q=X+(long)b*L*LD+h*Dh, *K=Q+D, *V=Q+2*D; float *Yb=Y+(long)b*L*D+h*Dh+i0*D;
        const float *Gb=G+(long)b*L*D+h*Dh; float *dQ=dX+(long)b*L*LD+h*Dh, *dK=dQ+D, *dV=dQ+2*D;
        if(lib==1 && qb==1){ for(int j=0;j<L;j++) for(int d=0;d<Dh;d++){ Kt[d*L+j]=K[(long)j*LD+d]; Vt[d*L+j]=V[(long)j*LD+d]; } }
        if(pass==0){ /* forward */
          if(lib==0){ bl(0,1,ni,je,Dh,Q+i0*LD,LD,K,LD,0,S,je); bl(0,0,ni,Dh,je,S,je,V,LD,0,Yb,D); }
          else { xk(0,0,ni,je,Dh,LD,L,je,0)(Kt,Q+i0*LD,S); xk(0,0,ni,Dh,je,je,LD,D,0)(V,S,Yb); }
        } else { /* backward */
          if(lib==0){ bl(0,1,ni,je,Dh,Q+i0*LD,LD,K,LD,0,P,je); bl(0,1,ni,je,Dh,Gb+i0*D,D,V,LD,0,S,je);
            bl(1,0,je,Dh,ni,P,je,Gb+i0*D,D,1,dV,LD); bl(0,0,ni,Dh,je,S,je,K,LD,1,dQ+i0*LD,LD); bl(1,0,je,Dh,ni,S,je,Q+i0*LD,LD,1,dK,LD); }
          else { xk(0,0,ni,je,Dh,LD,L,je,0)(Kt,Q+i0*LD,P); xk(0,0,ni,je,Dh,D,L,je,0)(Vt,Gb+i0*D,S);
            xk(1,0,je,Dh,ni,je,D,LD,1)(Gb+i0*D,P,dV); xk(0,0,ni,Dh,je,je,LD,LD,1)(K,S,dQ+i0*LD); xk(1,0,je,Dh,ni,je,LD,LD,1)(Q+i0*LD,S,dK); }
        }
      }
      free(S);free(P);free(T);free(Kt);free(Vt);}
      double t=now()-t0; if(pass==0) tf=t; else tb=t;
    }
    if(rep==3){ Yl[lib]=malloc(sizeof(float)*B*L*D); memcpy(Yl[lib],Y,sizeof(float)*B*L*D); dXl[lib]=malloc(sizeof(float)*B*L*LD); memcpy(dXl[lib],dX,sizeof(float)*B*L*LD); continue; }
    printf("%s: forward %.2f ms, backward %.2f ms a layer (x6: %.1f ms a step)\n",lib?"libxsmm":"OpenBLAS",tf*1e3,tb*1e3,(tf+tb)*6e3);
  }
  double ey=0,my=0,ed=0,md=0; for(long i=0;i<(long)B*L*D;i++){ double e=fabs(Yl[0][i]-Yl[1][i]); if(e>ey)ey=e; if(fabs(Yl[0][i])>my)my=fabs(Yl[0][i]); }
  for(long i=0;i<(long)B*L*LD;i++){ double e=fabs(dXl[0][i]-dXl[1][i]); if(e>ed)ed=e; if(fabs(dXl[0][i])>md)md=fabs(dXl[0][i]); }
  printf("agreement: Y %.3g, dX %.3g of the largest value\n", ey/my, ed/md);
  libxsmm_finalize(); return 0; }
