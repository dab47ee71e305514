"""Sustained cuBLAS plain GEMM vs cuBLASLt's fused bias+gelu (torch._addmm_activation) at 4096^3
f16, each for about a second: prints each run's window and its time per call."""
import time, torch
torch.manual_seed(0)
n = 4096
a = torch.randn(n, n, device="cuda", dtype=torch.half)
b = torch.randn(n, n, device="cuda", dtype=torch.half)
bias = torch.randn(n, device="cuda", dtype=torch.half)
runs = {
    "torch mm (cuBLAS plain)": lambda: torch.mm(a, b),
    "torch _addmm_activation gelu (cuBLASLt fused)": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
}
for rnd in range(2):
    for label, f in runs.items():
        for _ in range(50):
            f()
        torch.cuda.synchronize()
        t0 = time.time()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5000):
            f()
        end.record()
        torch.cuda.synchronize()
        print(f"SWEEP {label} per_call_ms={start.elapsed_time(end) / 5000:.4f} window={t0:.3f}-{time.time():.3f}")
