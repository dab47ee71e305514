#!/usr/bin/env python3
"""Time the decoder layer of examples/decoder_layer.tc in PyTorch on a GPU.

    python3 decoder_layer_peers.py [--part layer|mlp] [--seq 4096] [--reps 50] [--out rows.jsonl]

With --part mlp, only the layer's gated MLP (the .tc's `fn mlp`: down(silu(gate(x)) * up(x)), no
norm, no residual) on --seq tokens, eager and torch.compile (workload gated_mlp_llama3_8b_bf16_m<seq>;
tcc's side: `tcc bench examples/decoder_layer.tc --fn mlp --target cuda --dim S=<seq> --dim D=4096
--dim F=14336`).

Three implementations of the same layer at Llama-3-8B's sizes (hidden 4096, 32 query heads,
8 key/value heads, head_dim 128, MLP 14336; one sequence of --seq tokens; bf16):
  torch_eager          the plain formula below, eager
  torch_compile        torch.compile of the plain formula (attention written out, as in the .tc)
  torch_compile_sdpa   torch.compile with F.scaled_dot_product_attention(is_causal=True,
                       enable_gqa=True), what a PyTorch user writes
Each row: workload, impl, median_ms (CUDA events around one call, median over --reps after
warm-up, the L2 cache flushed before each), gflops, gbps (compulsory traffic: weights, x, tables
and output once), max_rel_err (||y - y_eager|| / ||y_eager||; 0 for eager itself), first_call_s.

How the formula matches examples/decoder_layer.tc (fn decoder_layer) exactly:
  - Weights are nn.Linear weights [out, in]: y = x @ W.T (the .tc's `x @ w.t()`).
  - RMSNorm: statistics in f32, eps 1e-5, x * rsqrt(mean(x^2) + eps) rounded to bf16, then times
    the bf16 weight (LlamaRMSNorm; the .tc's `rmsnorm`).
  - RoPE: rotate-half convention with cos/sin tables [S, 128] given as bf16 inputs:
    x * cos + cat(-x[..., 64:], x[..., :64]) * sin, in bf16 (the .tc's `rope`); applied to q and
    k after splitting heads ([S, H*128] -> [H, S, 128]). The tables are Llama 3's (theta 500000),
    but any tables time the same.
  - Heads: query head i uses key/value head floor(i * 8 / 32) (4 consecutive query heads per K/V
    head, as repeat_kv and enable_gqa do); the .tc views q as [8, 4, S, 128] and broadcasts K/V.
  - Attention: scores (q @ k^T in bf16 with f32 accumulation) cast to f32, times 1/sqrt(128);
    causal mask (key t <= query s) with -inf; softmax in f32 (max-subtracted); probabilities
    rounded to bf16, times V; heads merged back to [S, 4096] in head order; then o_proj.
  - Residuals: h = x + o_proj(attn); out = h + down(silu(gate(n)) * up(n)) with n = rmsnorm(h);
    silu computed in f32 and rounded to bf16 (F.silu on bf16 does the same), then times up(n).
SDPA computes the same function up to rounding (its kernels keep the probabilities' rounding to
bf16 before V, but accumulate online); no dropout, no KV cache, batch 1.
"""
import argparse, json, math, sys, time

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP = 4096, 32, 8, 128, 14336
EPS, THETA = 1e-5, 500000.0


def rmsnorm(x, w):
    import torch
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


def rope(x, cos, sin):
    import torch
    half = HEAD_DIM // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def attention_plain(q, k, v):
    """q [H, S, 128], k and v [KV, S, 128] -> [H, S, 128], written out as in the .tc."""
    import torch
    s_len = q.shape[1]
    g = HEADS // KV_HEADS
    q = q.reshape(KV_HEADS, g, s_len, HEAD_DIM)
    keys, values = k[:, None], v[:, None]  # broadcast over the group, not copied
    s = (q @ keys.transpose(-1, -2)).float() * HEAD_DIM ** -0.5
    pos = torch.arange(s_len, device=q.device)
    s = s.masked_fill(~(pos[:, None] >= pos[None, :]), float("-inf"))
    p = torch.softmax(s, -1)  # exp(s - max) / sum, in f32
    return (p.to(q.dtype) @ values).reshape(HEADS, s_len, HEAD_DIM)


def attention_sdpa(q, k, v):
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)[0]


def mlp(x, p):
    """The gated MLP: silu in f32, rounded to bf16, times up(x), then down."""
    import torch.nn.functional as F
    g = F.linear(x, p["w_gate"])
    silu = (g.float() * g.float().sigmoid()).to(g.dtype)
    return F.linear(silu * F.linear(x, p["w_up"]), p["w_down"])


def layer(x, cos, sin, p, attention):
    import torch.nn.functional as F
    s_len = x.shape[0]
    n = rmsnorm(x, p["attn_norm"])
    heads = lambda t, h: t.view(s_len, h, HEAD_DIM).transpose(0, 1)
    q = rope(heads(F.linear(n, p["wq"]), HEADS), cos, sin)
    k = rope(heads(F.linear(n, p["wk"]), KV_HEADS), cos, sin)
    v = heads(F.linear(n, p["wv"]), KV_HEADS)
    o = attention(q, k, v).transpose(0, 1).reshape(s_len, HIDDEN)
    h = x + F.linear(o, p["wo"])
    return h + mlp(rmsnorm(h, p["mlp_norm"]), p)


def mlp_work(s_len):
    """The gated MLP's FLOPs and compulsory bytes (its three weights, x and the output once)."""
    return 2.0 * s_len * HIDDEN * 3 * MLP, 2.0 * (3 * MLP * HIDDEN + 2 * s_len * HIDDEN)


def work(s_len):
    """FLOPs (2 per multiply-add; causal attention counts the kept pairs) and compulsory bytes."""
    proj = 2.0 * s_len * HIDDEN * (2 * HIDDEN + 2 * KV_HEADS * HEAD_DIM + 3 * MLP)
    attn = 4.0 * HEAD_DIM * HEADS * s_len * (s_len + 1) / 2
    weights = 2 * HIDDEN * HIDDEN + 2 * KV_HEADS * HEAD_DIM * HIDDEN + 3 * MLP * HIDDEN + 2 * HIDDEN
    return proj + attn, 2.0 * (weights + 2 * s_len * HIDDEN + 2 * s_len * HEAD_DIM)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["layer", "mlp"], default="layer")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    import torch
    dev, bf16 = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    rand = lambda *shape, scale=1.0: (torch.randn(*shape, device=dev, generator=g) * scale).to(bf16)
    kv = KV_HEADS * HEAD_DIM
    p = {
        "attn_norm": rand(HIDDEN, scale=0.1) + 1, "mlp_norm": rand(HIDDEN, scale=0.1) + 1,
        "wq": rand(HIDDEN, HIDDEN, scale=HIDDEN ** -0.5), "wk": rand(kv, HIDDEN, scale=HIDDEN ** -0.5),
        "wv": rand(kv, HIDDEN, scale=HIDDEN ** -0.5), "wo": rand(HIDDEN, HIDDEN, scale=HIDDEN ** -0.5),
        "w_gate": rand(MLP, HIDDEN, scale=HIDDEN ** -0.5), "w_up": rand(MLP, HIDDEN, scale=HIDDEN ** -0.5),
        "w_down": rand(HIDDEN, MLP, scale=MLP ** -0.5),
    }
    s = args.seq
    x = rand(s, HIDDEN)
    inv_freq = THETA ** (-torch.arange(0, HEAD_DIM, 2, device=dev, dtype=torch.float32) / HEAD_DIM)
    angle = torch.arange(s, device=dev, dtype=torch.float32)[:, None] * inv_freq
    angle = torch.cat([angle, angle], -1)
    cos, sin = angle.cos().to(bf16), angle.sin().to(bf16)

    if args.part == "mlp":
        impls = [
            ("torch_eager", lambda: mlp(x, p)),
            ("torch_compile", torch.compile(lambda: mlp(x, p), dynamic=False)),
        ]
        workload, (flops, nbytes) = f"gated_mlp_llama3_8b_bf16_m{s}", mlp_work(s)
    else:
        impls = [
            ("torch_eager", lambda: layer(x, cos, sin, p, attention_plain)),
            ("torch_compile", torch.compile(lambda: layer(x, cos, sin, p, attention_plain), dynamic=False)),
            ("torch_compile_sdpa", torch.compile(lambda: layer(x, cos, sin, p, attention_sdpa), dynamic=False)),
        ]
        workload, (flops, nbytes) = f"decoder_layer_llama3_8b_bf16_s{s}", work(s)
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    reference = None
    with torch.no_grad():
        for name, fn in impls:
            t0 = time.time()
            y = fn()
            torch.cuda.synchronize()
            first_s = time.time() - t0
            if reference is None:
                reference = y.float()
            err = ((y.float() - reference).norm() / reference.norm()).item()
            for _ in range(args.warmup):
                fn()
            times = []
            for _ in range(args.reps):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            ms = times[len(times) // 2]
            row = {"workload": workload, "impl": name, "median_ms": round(ms, 5),
                   "gflops": round(flops / ms / 1e6, 1), "gbps": round(nbytes / ms / 1e6, 1),
                   "max_rel_err": round(err, 6), "first_call_s": round(first_s, 2)}
            out.write(json.dumps(row) + "\n")
            out.flush()
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
