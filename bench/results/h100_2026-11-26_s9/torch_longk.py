# cuBLAS (torch.matmul, f16, f32 accumulation) on the long-K shapes of split.sh: CUDA events,
# L2 flushed before each of 20 timed runs, median.
import torch
flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
for (m, n, k, nk) in [(256, 256, 49152, True), (128, 512, 32768, False), (512, 512, 16384, False), (256, 1024, 8192, False)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16) if nk else torch.randn(k, n, device="cuda", dtype=torch.float16)
    f = (lambda: a @ b.t()) if nk else (lambda: a @ b)
    for _ in range(5):
        f()
    times = []
    for _ in range(20):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    print(f"{m}x{n}x{k} nk={nk} torch.matmul median {times[10]:.4f} ms")
