#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>
#define CH 12
static long iters = 200000000L/4;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static float out[64]; static double cpu[64];
static double tcpu(){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void* run128(void*p){ long id=(long)p; double c0=tcpu();
  __m128 a=_mm_set1_ps(1.0000001f), b=_mm_set1_ps(0.9999999f); __m128 acc[CH];
  for(int i=0;i<CH;i++) acc[i]=_mm_set1_ps(i);
  for(long n=0;n<iters;n++){
#pragma GCC unroll 12
    for(int i=0;i<CH;i++) acc[i]=_mm_fmadd_ps(acc[i],a,b);
    __asm__ volatile("" : "+x"(acc[0]),"+x"(acc[1]),"+x"(acc[2]),"+x"(acc[3]),"+x"(acc[4]),"+x"(acc[5]),"+x"(acc[6]),"+x"(acc[7]),"+x"(acc[8]),"+x"(acc[9]),"+x"(acc[10]),"+x"(acc[11]));
  }
  __m128 t=acc[0]; for(int i=1;i<CH;i++) t=_mm_add_ps(t,acc[i]); out[id]=t[0]; cpu[id]=tcpu()-c0; return 0;}
static void* run512(void*p){ long id=(long)p; double c0=tcpu();
  __m512 a=_mm512_set1_ps(1.0000001f), b=_mm512_set1_ps(0.9999999f); __m512 acc[CH];
  for(int i=0;i<CH;i++) acc[i]=_mm512_set1_ps(i);
  for(long n=0;n<iters;n++){
#pragma GCC unroll 12
    for(int i=0;i<CH;i++) acc[i]=_mm512_fmadd_ps(acc[i],a,b);
    __asm__ volatile("" : "+v"(acc[0]),"+v"(acc[1]),"+v"(acc[2]),"+v"(acc[3]),"+v"(acc[4]),"+v"(acc[5]),"+v"(acc[6]),"+v"(acc[7]),"+v"(acc[8]),"+v"(acc[9]),"+v"(acc[10]),"+v"(acc[11]));
  }
  __m512 t=acc[0]; for(int i=1;i<CH;i++) t=_mm512_add_ps(t,acc[i]); out[id]=t[0]; cpu[id]=tcpu()-c0; return 0;}
int main(int argc,char**argv){ int th=atoi(argv[1]); int w=atoi(argv[2]); pthread_t t[8];
  double s=now(); for(long i=0;i<th;i++) pthread_create(&t[i],0,w==128?run128:run512,(void*)i);
  for(int i=0;i<th;i++) pthread_join(t[i],0); double e=now()-s;
  double fl=2.0*(w/32)*CH*(double)iters*th; double per=2.0*(w/32)*CH*(double)iters/1e9; double sum=0; for(int i=0;i<th;i++) sum+=per/cpu[i]; printf("%d-bit %d threads: wall %.1f GFLOP/s (%.3f s); per thread-CPU-second sum %.1f GFLOP/s\n",w,th,fl/e/1e9,e,sum); return 0;}
