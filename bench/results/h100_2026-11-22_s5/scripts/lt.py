# cuBLASLt's own fused bias+gelu epilogue (torch._addmm_activation, use_gelu=True) against its
# plain GEMM at 4096^3 f16, CUDA events, L2 flushed before each repetition, median of 20.
import torch
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
n = 4096
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn(n, n, device="cuda", dtype=torch.float16)
bias = torch.randn(n, device="cuda", dtype=torch.float16)
flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
def t(f):
    for _ in range(3): f()
    ts = []
    for _ in range(20):
        flush.zero_()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort(); return ts[10]
for r in range(2):
    mm = t(lambda: torch.mm(a, b))
    addmm = t(lambda: torch.addmm(bias, a, b))
    lt_gelu = t(lambda: torch._addmm_activation(bias, a, b, use_gelu=True))
    sep = t(lambda: torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh"))
    print(f"round {r}: mm {mm:.4f} ms, addmm(bias) {addmm:.4f}, cublasLt bias+gelu epilogue {lt_gelu:.4f} ({lt_gelu/mm:.3f}x mm), addmm+gelu kernel {sep:.4f} ({sep/mm:.3f}x)")
ref = torch.nn.functional.gelu(torch.addmm(bias, a, b).float(), approximate="tanh")
got = torch._addmm_activation(bias, a, b, use_gelu=True).float()
print("max abs diff of the epilogue vs addmm+gelu:", (ref - got).abs().max().item())
