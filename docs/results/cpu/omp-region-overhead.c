/* omp-region-overhead.c — what an OpenMP parallel region costs beyond its work, 2 threads, with W µs
 * of serial work on the main thread between regions (docs/performance.md, "AMD EPYC Zen 5", Tried:
 * spinning OpenMP workers). gflow's workers are passive (OMP_WAIT_POLICY=passive, src/cli/main.c):
 *   gcc -O2 -fopenmp omp-region-overhead.c && OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 ./a.out
 *   GOMP_SPINCOUNT=300000 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 ./a.out   # spinning */
#include <omp.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static float a[1<<16];
int main(void){
  for (int rep=0; rep<3; rep++) {
    /* regions separated by serial work of ~W microseconds on the main thread */
    for (int W = 0; W <= 200; W = W ? W*4 : 5) {
      int n = 2000; double t0 = now(), serial = 0;
      for (int i = 0; i < n; i++) {
        #pragma omp parallel for
        for (int j = 0; j < 1<<14; j++) a[j] = a[j]*0.999f + 1.0f;
        double s0 = now(); while (now() - s0 < W*1e-6) ; serial += now() - s0;
      }
      double t = now() - t0;
      printf("W %3d us: %.1f us per region beyond the serial part\n", W, (t - serial)/n*1e6);
    }
  }
}
