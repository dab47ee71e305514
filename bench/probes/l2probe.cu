// Does the L2 flush (a memset of 2x L2) slow a following 32 MiB streaming read, and does a
// streaming (evict-first) load policy avoid it? Times with CUDA events, median of 21.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

template <int POLICY>
__global__ void readsum(const int4* __restrict__ p, size_t n, int* out) {
  int acc = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride * 4) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      size_t j = i + u * stride;
      if (j < n) {
        if (POLICY == 0) v[u] = p[j];
        else if (POLICY == 1) v[u] = __ldcs(p + j);
        else if (POLICY == 2) v[u] = __ldcg(p + j);
        else v[u] = __ldlu(p + j);
      } else v[u] = make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x7fffffff) *out = acc;
}

__global__ void readflush(const int4* __restrict__ p, size_t n, int* out) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    int4 v = __ldcg(p + i);
    acc += v.x ^ v.w;
  }
  if (acc == 0x7fffffff) *out = acc;
}

int main() {
  int l2 = 0; cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  size_t bytes = 32ull << 20, fbytes = 2ull * l2;
  int4 *b, *f; int* out;
  cudaMalloc(&b, bytes); cudaMalloc(&f, fbytes); cudaMalloc(&out, 4);
  cudaMemset(b, 1, bytes);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  size_t n = bytes / 16;
  const char* names[4] = {"default", "ldcs(evict-first)", "ldcg", "ldlu"};
  for (int flushkind = 0; flushkind < 3; ++flushkind) {
    for (int pol = 0; pol < 4; ++pol) {
      for (int blocks_per_sm : {4, 8, 16}) {
        std::vector<float> t;
        for (int r = 0; r < 24; ++r) {
          if (flushkind == 0) cudaMemsetAsync(f, r, fbytes);
          else if (flushkind == 1) { cudaMemsetAsync(f, r, fbytes); readflush<<<sms * 8, 256>>>(f, fbytes / 16, out); }
          cudaEventRecord(e0);
          dim3 g(sms * blocks_per_sm);
          if (pol == 0) readsum<0><<<g, 256>>>(b, n, out);
          else if (pol == 1) readsum<1><<<g, 256>>>(b, n, out);
          else if (pol == 2) readsum<2><<<g, 256>>>(b, n, out);
          else readsum<3><<<g, 256>>>(b, n, out);
          cudaEventRecord(e1); cudaEventSynchronize(e1);
          float ms; cudaEventElapsedTime(&ms, e0, e1);
          if (r >= 3) t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        float med = t[t.size() / 2];
        printf("flush=%-16s policy=%-18s blocks/SM=%2d  %7.2f us  %6.0f GB/s\n",
               flushkind == 0 ? "memset" : flushkind == 1 ? "memset+readback" : "none(L2-warm)", names[pol],
               blocks_per_sm, med * 1e3, bytes / (med * 1e-3) / 1e9);
      }
    }
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
