#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define K 256
static double tcpu(){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static float A[K*8] __attribute__((aligned(64))), B[K*8] __attribute__((aligned(64)));
#define TILE(MR) \
static float tile##MR(long reps){ float s=0; for(long r=0;r<reps;r++){ __m128 acc[MR][2]; \
  for(int i=0;i<MR;i++){acc[i][0]=_mm_setzero_ps();acc[i][1]=_mm_setzero_ps();} \
  const float*a=A,*b=B; for(int k=0;k<K;k++){ __m128 b0=_mm_load_ps(b), b1=_mm_load_ps(b+4); \
   _Pragma("GCC unroll 8") for(int i=0;i<MR;i++){ __m128 x=_mm_broadcast_ss(a+i); acc[i][0]=_mm_fmadd_ps(x,b0,acc[i][0]); acc[i][1]=_mm_fmadd_ps(x,b1,acc[i][1]);} \
   a+=MR; b+=8; } \
  for(int i=0;i<MR;i++) s+=acc[i][0][0]+acc[i][1][1]; } return s; }
TILE(4)
TILE(6)
int main(){ for(int i=0;i<K*8;i++){A[i]=1e-3f*(i%7);B[i]=1e-3f*(i%5);} long reps=200000;
  for(int t=0;t<3;t++){ double c=tcpu(); float s=tile4(reps); double e=tcpu()-c; printf("4x8 tile: %.1f GFLOP/s per CPU-second (%g)\n", 2.0*4*8*K*reps/e/1e9, s);
  c=tcpu(); s=tile6(reps); e=tcpu()-c; printf("6x8 tile: %.1f GFLOP/s per CPU-second (%g)\n", 2.0*6*8*K*reps/e/1e9, s);} }
