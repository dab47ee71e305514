// MUFU throughput per variant and gelu accuracy over every finite f16 input (session 5 probe).
#include <cstdio>
#include <cmath>
#include <cuda_fp16.h>
#define ITERS 4096
template <int OP> __global__ void thr(float* out, float seed) {
  float a0 = seed + threadIdx.x * 1e-6f, a1 = a0 + 0.1f, a2 = a0 + 0.2f, a3 = a0 + 0.3f;
  unsigned h0 = 0x3c003c00u ^ threadIdx.x, h1 = h0 ^ 1, h2 = h0 ^ 2, h3 = h0 ^ 3;
  for (int i = 0; i < ITERS; i++) {
    if (OP == 0) { asm volatile("ex2.approx.ftz.f32 %0,%0;" : "+f"(a0)); asm volatile("ex2.approx.ftz.f32 %0,%0;" : "+f"(a1)); asm volatile("ex2.approx.ftz.f32 %0,%0;" : "+f"(a2)); asm volatile("ex2.approx.ftz.f32 %0,%0;" : "+f"(a3)); }
    if (OP == 1) { asm volatile("rcp.approx.ftz.f32 %0,%0;" : "+f"(a0)); asm volatile("rcp.approx.ftz.f32 %0,%0;" : "+f"(a1)); asm volatile("rcp.approx.ftz.f32 %0,%0;" : "+f"(a2)); asm volatile("rcp.approx.ftz.f32 %0,%0;" : "+f"(a3)); }
    if (OP == 2) { asm volatile("tanh.approx.f32 %0,%0;" : "+f"(a0)); asm volatile("tanh.approx.f32 %0,%0;" : "+f"(a1)); asm volatile("tanh.approx.f32 %0,%0;" : "+f"(a2)); asm volatile("tanh.approx.f32 %0,%0;" : "+f"(a3)); }
    if (OP == 3) { asm volatile("tanh.approx.f16x2 %0,%0;" : "+r"(h0)); asm volatile("tanh.approx.f16x2 %0,%0;" : "+r"(h1)); asm volatile("tanh.approx.f16x2 %0,%0;" : "+r"(h2)); asm volatile("tanh.approx.f16x2 %0,%0;" : "+r"(h3)); }
    if (OP == 4) { asm volatile("ex2.approx.f16x2 %0,%0;" : "+r"(h0)); asm volatile("ex2.approx.f16x2 %0,%0;" : "+r"(h1)); asm volatile("ex2.approx.f16x2 %0,%0;" : "+r"(h2)); asm volatile("ex2.approx.f16x2 %0,%0;" : "+r"(h3)); }
    if (OP == 5) { asm volatile("fma.rn.f32 %0,%0,%0,%0;" : "+f"(a0)); asm volatile("fma.rn.f32 %0,%0,%0,%0;" : "+f"(a1)); asm volatile("fma.rn.f32 %0,%0,%0,%0;" : "+f"(a2)); asm volatile("fma.rn.f32 %0,%0,%0,%0;" : "+f"(a3)); }
    if (OP == 6) { asm volatile("fma.rn.f16x2 %0,%0,%0,%0;" : "+r"(h0)); asm volatile("fma.rn.f16x2 %0,%0,%0,%0;" : "+r"(h1)); asm volatile("fma.rn.f16x2 %0,%0,%0,%0;" : "+r"(h2)); asm volatile("fma.rn.f16x2 %0,%0,%0,%0;" : "+r"(h3)); }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + __uint_as_float(h0 ^ h1 ^ h2 ^ h3);
}
__device__ float gelu_ref_like(float x) { return x; }
// Candidates on f16 inputs (x already f16), results rounded to f16.
__global__ void gelu_all(float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  __half hx = __ushort_as_half((unsigned short)i);
  float x = __half2float(hx);
  const float k = 0.7978845608f, c = 0.044715f;
  // 0: sigmoid form with ex2.ftz + rcp.approx (current)
  float t = x * fmaf(x * x, c * k * -2.8853900818f, k * -2.8853900818f), e, r0;
  asm("ex2.approx.ftz.f32 %0,%1;" : "=f"(e) : "f"(t));
  float d = 1.0f + e, inv; asm("rcp.approx.ftz.f32 %0,%1;" : "=f"(inv) : "f"(d));
  r0 = x * inv; if (x == -INFINITY) r0 = -0.0f;
  // 1: tanh.approx.f32
  float u = x * fmaf(x * x, c * k, k), th; asm("tanh.approx.f32 %0,%1;" : "=f"(th) : "f"(u));
  float h = 0.5f * x, r1 = fmaf(h, th, h); if (x == -INFINITY) r1 = -0.0f;
  // 2: f16 math with tanh.approx.f16
  __half x2 = __hmul(hx, hx), p = __hfma(x2, __float2half(c * k), __float2half(k)), uh = __hmul(hx, p);
  unsigned short ths; asm("tanh.approx.f16 %0,%1;" : "=h"(ths) : "h"(__half_as_ushort(uh)));
  __half hh = __hmul(hx, __float2half(0.5f)); __half r2 = __hfma(hh, __ushort_as_half(ths), hh);
  float r2f = (x == -INFINITY) ? -0.0f : __half2float(r2);
  out[4 * i + 0] = __half2float(__float2half(r0));
  out[4 * i + 1] = __half2float(__float2half(r1));
  out[4 * i + 2] = r2f;
  out[4 * i + 3] = x;
}
int main() {
  float* d; cudaMalloc(&d, 1 << 26);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const char* names[] = {"ex2.ftz.f32", "rcp.ftz.f32", "tanh.f32", "tanh.f16x2", "ex2.f16x2", "fma.f32", "fma.f16x2"};
  int blocks = 132 * 8, threads = 256;
  for (int op = 0; op < 7; op++) {
    for (int rep = 0; rep < 2; rep++) {
      cudaEventRecord(a);
      switch (op) { case 0: thr<0><<<blocks, threads>>>(d, 0.5f); break; case 1: thr<1><<<blocks, threads>>>(d, 0.5f); break; case 2: thr<2><<<blocks, threads>>>(d, 0.5f); break; case 3: thr<3><<<blocks, threads>>>(d, 0.5f); break; case 4: thr<4><<<blocks, threads>>>(d, 0.5f); break; case 5: thr<5><<<blocks, threads>>>(d, 0.5f); break; case 6: thr<6><<<blocks, threads>>>(d, 0.5f); break; }
      cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b);
      double instr = (double)blocks * threads / 32 * ITERS * 4;  // warp instructions
      int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
      int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
      if (rep) printf("%-12s %.3f ms  %.3f warp-instr/clk/SM (at %d MHz nominal)\n", names[op], ms, instr / (ms * 1e-3) / sms / (clk * 1e3), clk / 1000);
    }
  }
  gelu_all<<<256, 256>>>(d);
  static float h[4 * 65536]; cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  const char* cn[] = {"sigmoid ex2+rcp", "tanh.f32", "f16 tanh.f16"};
  for (int cand = 0; cand < 3; cand++) {
    double max_abs = 0, max_ulp = 0, worst_x = 0; int fail = 0, n = 0;
    for (int i = 0; i < 65536; i++) {
      double x = h[4 * i + 3]; if (!std::isfinite(x)) continue; n++;
      double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      double ref = x / (1 + exp(-2 * u));
      double got = h[4 * i + cand];
      double err = fabs(got - ref);
      double ulp = fabs(ref) < 6.1e-5 ? 5.96e-8 : ldexp(1.0, ilogb(ref) - 10);
      if (err > 1e-3 + 1e-2 * fabs(ref)) fail++;
      if (err > max_abs) { max_abs = err; worst_x = x; }
      if (err / ulp > max_ulp) max_ulp = err / ulp;
    }
    printf("%-16s finite inputs %d: max abs err %.3g (at x=%g), max %.1f f16 ulp, outside atol 1e-3 + rtol 1e-2: %d\n", cn[cand], n, max_abs, worst_x, max_ulp, fail);
  }
  return 0;
}
