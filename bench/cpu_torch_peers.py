#!/usr/bin/env python3
"""PyTorch on the CPU as a peer of the CPU suite: eager and torch.compile (Inductor's C++ backend).

    python3 bench/cpu_torch_peers.py [--workloads bench/workloads.json] [--only W,...] --out FILE

Rows have the schema of peers.py (one JSON object a line: workload, impl, median_ms, gflops, gbps,
max_rel_err), so compare.py and `tcc bench --peers` join them with tcc's. Times are measured as
peers.py measures numpy: one call to warm up (for torch.compile, after compiling), then the median
of at least 5 calls and of as many as fit in 2 s (at most 200). PyTorch uses every core
(torch.get_num_threads()), as numpy's OpenBLAS does. max_rel_err is against the same math in f64.

PyTorch comes from PyPI (`pip install torch`; its CUDA libraries are not used here). The CPU
suite's attention peer takes the plain formula with K/V repeated per query head and a causal mask
from positions, as peers.py's numpy peer does.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def flops_bytes(w):
    """Floating-point operations and compulsory bytes of a CPU workload (f32), as peers.py counts."""
    k = w["kind"]
    if k == "gemm":
        m, n, kk = w["m"], w["n"], w["k"]
        extra = n if "bias" in w["epilogue"] else 0
        return 2.0 * m * n * kk, 4.0 * (m * kk + kk * n + m * n + extra)
    if k == "elementwise":
        return 2.0 * w["n"], 4.0 * 4 * w["n"]
    if k == "softmax":
        r, c = w["rows"], w["cols"]
        return 5.0 * r * c, 4.0 * 2 * r * c
    if k == "attention":
        b, h, hk, q, kv, d = w["batch"], w["heads"], w["kv_heads"], w["q_len"], w["kv_len"], w["head_dim"]
        pairs = q * kv
        if w.get("mask") == "causal":
            pairs = sum(min(kv, kv - q + i + 1) for i in range(q))
        return 4.0 * b * h * pairs * d, 4.0 * (2 * b * h * q * d + 2 * b * hk * kv * d)
    return 0.0, 0.0


def bench(fn):
    fn()
    times = []
    t_end = time.perf_counter() + 2.0
    while len(times) < 5 or (time.perf_counter() < t_end and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3


def case(torch, w, g):
    """The workload's function over torch tensors, its inputs, and the same math in f64."""
    k = w["kind"]
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float32)
    if k == "gemm":
        nk = w.get("b_layout", "kn") == "nk"
        a = randn(w["m"], w["k"])
        b = randn(w["n"], w["k"]) if nk else randn(w["k"], w["n"])
        bias = randn(w["n"])
        ep = w["epilogue"]

        def f(a, b, bias):
            y = a @ (b.T if nk else b)
            if "bias" in ep:
                y = y + bias
            if "relu" in ep:
                y = torch.relu(y)
            return y
        return f, (a, b, bias)
    if k == "elementwise":
        x, a, b = randn(w["n"]), randn(w["n"]), randn(w["n"])
        return (lambda x, a, b: torch.relu(x * a + b)), (x, a, b)
    if k == "softmax":
        return (lambda x: torch.softmax(x, dim=-1)), (randn(w["rows"], w["cols"]),)
    if k == "attention":
        b, h, hk, q, kv, d = w["batch"], w["heads"], w["kv_heads"], w["q_len"], w["kv_len"], w["head_dim"]
        if w.get("mask", "none") not in ("none", "causal") or w.get("score", "none") != "none":
            raise ValueError(f"{w['name']}: this peer supports no mask but causal and no score transform")
        causal = w.get("mask", "none") == "causal"
        Q, K, V = randn(b, h, q, d), randn(b, hk, kv, d), randn(b, hk, kv, d)

        def f(Q, K, V):
            keys = K.repeat_interleave(h // hk, dim=1)
            values = V.repeat_interleave(h // hk, dim=1)
            s = Q @ keys.transpose(-1, -2) * (d ** -0.5)
            if causal:
                qi = torch.arange(kv - q, kv).reshape(q, 1)
                ki = torch.arange(kv)
                s = torch.where(ki <= qi, s, torch.tensor(float("-inf"), dtype=s.dtype))
            return torch.softmax(s, dim=-1) @ values
        return f, (Q, K, V)
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workloads", default=os.path.join(HERE, "workloads.json"))
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("cpu_torch_peers.py needs PyTorch: pip install torch")
    ws = json.load(open(a.workloads))["cpu"]
    if a.only:
        keep = set(a.only.split(","))
        ws = [w for w in ws if w["name"] in keep]
    g = torch.Generator().manual_seed(0)
    rows = []
    with torch.no_grad():
        for w in ws:
            made = case(torch, w, g)
            if made is None:
                continue
            f, inputs = made
            want = f(*(x.double() for x in inputs))
            flops, nbytes = flops_bytes(w)
            for impl, fn in (("torch-eager-cpu", f), ("torch-compile-cpu", torch.compile(f))):
                got = fn(*inputs)  # compiles, for torch.compile
                err = ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
                ms = bench(lambda: fn(*inputs))
                r = {"workload": w["name"], "impl": impl, "median_ms": round(ms, 5),
                     "gflops": round(flops / ms / 1e6, 3), "gbps": round(nbytes / ms / 1e6, 3),
                     "max_rel_err": err, "threads": torch.get_num_threads(), "torch": torch.__version__}
                rows.append(r)
                print(f"{w['name']:32s} {impl:18s} {ms:9.3f} ms {r['gflops']:8.1f} GF/s max_rel_err {err:.2e}",
                      flush=True)
    with open(a.out, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
