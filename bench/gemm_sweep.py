#!/usr/bin/env python3
"""The GEMM shape sweep (issue 26): shapes beyond the public suite, and cuBLAS timed on each.

    python3 bench/gemm_sweep.py shapes > bench/gemm_sweep.json       # the workloads (deterministic)
    python3 bench/gemm_sweep.py cublas bench/gemm_sweep.json > peers.jsonl   # on the GPU machine
    tcc bench --workloads bench/gemm_sweep.json --suite gpu --target cuda --out tcc.jsonl
    python3 compare.py tcc.jsonl peers.jsonl
    python3 bench/gemm_sweep.py table tcc.jsonl [chart.svg]   # Markdown table (and an SVG chart)

The workloads use the public suite's `gemm` kind (workloads.json's `about`): A[m,k] row-major,
B[k,n] row-major or B[n,k] ("b_layout": "nk", a linear layer's weight), output in the input dtype,
f32 accumulation. The shapes: squares on and off the tile grid, odd sizes, primes near powers of
two, skinny products (decode: m of 1 to 64 against Llama's projections), long-k products, and the
shapes of a Llama-3-8B layer at 4096 tokens. cuBLAS is `a @ b` in PyTorch eager (TF32 off for f32),
timed like peers.py: triton's do_bench, median over 200 ms after 50 ms of warm-up (it flushes L2
before each run). Rows: {"workload", "impl": "torch_eager", "median_ms", "gflops", "gbps",
"max_rel_err"}, one per shape, as compare.py reads them.
"""
import json
import sys


def shapes():
    out = []

    def add(name, dtype, m, n, k, nk=False):
        w = {"name": name, "kind": "gemm", "dtype": dtype, "m": m, "n": n, "k": k, "epilogue": []}
        if nk:
            w["b_layout"] = "nk"
        out.append(w)

    for s in [128, 256, 512, 768, 1000, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192]:
        add(f"sq_f16_{s}", "f16", s, s, s)
    for s in [1024, 4096]:
        add(f"sq_bf16_{s}", "bf16", s, s, s)
        add(f"sq_f32_{s}", "f32", s, s, s)
    for m, n, k in [(1023, 1025, 1027), (4097, 4095, 4093), (3001, 5003, 701), (127, 4099, 2053),
                    (257, 263, 4099), (2047, 2049, 511), (8191, 127, 8193),
                    (511, 513, 1025), (4095, 4095, 4095)]:
        add(f"odd_f16_{m}x{n}x{k}", "f16", m, n, k)
    for m in [1, 8, 16, 32, 64]:
        for n, k in [(4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096)]:
            add(f"skinny_f16_m{m}_{n}x{k}", "f16", m, n, k, nk=True)
    for m, n, k in [(256, 256, 49152), (128, 128, 65536), (512, 512, 32768), (64, 64, 131072),
                    (1024, 1024, 16384), (96, 160, 40000)]:
        add(f"longk_f16_{m}x{n}x{k}", "f16", m, n, k)
    for n, k in [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (28672, 4096)]:
        add(f"llama_bf16_4096x{n}x{k}", "bf16", 4096, n, k, nk=True)
    for m, n, k in [(16384, 4096, 4096), (2048, 8192, 1024)]:
        add(f"big_bf16_{m}x{n}x{k}", "bf16", m, n, k, nk=True)
    return out


def cublas(path):
    import torch
    import triton.testing as tt
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    with open(path) as f:
        ws = json.load(f)["gpu"]
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}", file=sys.stderr)
    for w in ws:
        t = dt[w["dtype"]]
        g = torch.Generator(device="cuda").manual_seed(0)
        m, n, k = w["m"], w["n"], w["k"]
        nk = w.get("b_layout") == "nk"
        a = torch.randn(m, k, device="cuda", dtype=t, generator=g)
        b = torch.randn(*((n, k) if nk else (k, n)), device="cuda", dtype=t, generator=g)
        f = (lambda: a @ b.t()) if nk else (lambda: a @ b)
        ms = tt.do_bench(f, warmup=50, rep=200, return_mode="median")
        ref = a.double() @ (b.double().t() if nk else b.double())
        err = float((f().double() - ref).norm() / ref.norm().clamp_min(1e-30))
        elt = a.element_size()
        fl, by = 2.0 * m * n * k, elt * (m * k + k * n + m * n)
        print(json.dumps({"workload": w["name"], "impl": "torch_eager", "median_ms": round(ms, 5),
                          "gflops": round(fl / ms / 1e6, 1), "gbps": round(by / ms / 1e6, 1),
                          "max_rel_err": err}), flush=True)


def table(path, svg=None):
    """The Markdown table of a `tcc bench` run of the sweep (its rows hold tcc's and the in-process
    cuBLAS's medians), with the geomean and worst of cuBLAS time over tcc time; with `svg`, a
    bar chart of that ratio per shape (lines at 0.8 and 1.0)."""
    rows = {}
    for line in open(path):
        r = json.loads(line)
        rows.setdefault(r["workload"], {})["cublas" if r["impl"] == "cublas" else "tcc"] = r["median_ms"]
    names = [w["name"] for w in shapes() if {"tcc", "cublas"} <= rows.get(w["name"], {}).keys()]
    ratios = [rows[n]["cublas"] / rows[n]["tcc"] for n in names]
    print("| shape | tcc default ms | cuBLAS ms | cuBLAS / tcc |")
    print("| --- | --- | --- | --- |")
    for n, x in zip(names, ratios):
        print(f"| {n} | {rows[n]['tcc']:.4f} | {rows[n]['cublas']:.4f} | {x:.3f} |")
    geo = 1.0
    for x in ratios:
        geo *= x ** (1.0 / len(ratios))
    worst = min(zip(ratios, names))
    print(f"\n{len(names)} shapes: geomean {geo:.3f}, worst {worst[0]:.3f} ({worst[1]})")
    if svg:
        bar, left, width = 12, 230, 420
        height = 40 + bar * len(names)
        x_of = lambda v: left + width * min(v, 2.0) / 2.0
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{height}" '
               'font-family="sans-serif" font-size="9">',
               f'<text x="{left}" y="12">cuBLAS time / tcc time (untuned default), H100</text>']
        for i, (n, x) in enumerate(zip(names, ratios)):
            y = 20 + i * bar
            color = "#2a7" if x >= 1.0 else ("#d90" if x >= 0.8 else "#c33")
            out.append(f'<text x="{left - 4}" y="{y + 9}" text-anchor="end">{n}</text>')
            out.append(f'<rect x="{left}" y="{y + 1}" width="{x_of(x) - left:.1f}" height="{bar - 2}" fill="{color}"/>')
            out.append(f'<text x="{x_of(x) + 3:.1f}" y="{y + 9}">{x:.2f}</text>')
        for v in (0.8, 1.0):
            out.append(f'<line x1="{x_of(v):.1f}" y1="16" x2="{x_of(v):.1f}" y2="{height - 10}" stroke="#444" '
                       'stroke-dasharray="3,2"/>')
            out.append(f'<text x="{x_of(v):.1f}" y="{height - 1}" text-anchor="middle">{v}</text>')
        out.append("</svg>")
        with open(svg, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "shapes":
        print(json.dumps({"about": "GEMM shape sweep (bench/gemm_sweep.py); the gemm kind of workloads.json",
                          "gpu": shapes(), "cpu": []}, indent=1))
    elif len(sys.argv) >= 3 and sys.argv[1] == "cublas":
        cublas(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3] if len(sys.argv) >= 4 else None)
    else:
        sys.exit(__doc__)
