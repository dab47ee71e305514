//! The block's tcc kernels: RMSNorm, causal grouped-query attention and the gated MLP, in f32 and
//! in bf16 (statistics, scores and softmax in f32, as a bf16 model computes them). Head dimension
//! 64; every other size is a shape variable bound at the call.

tcc::kernel! {
    // RMSNorm over the last axis, eps 1e-5.
    fn rmsnorm(x: f32[S, D], weight: f32[D]) -> f32[S, D] {
        x * rsqrt((x * x).mean(-1, keepdim) + 0.00001) * weight
    }

    // Causal attention: G query heads share each of the KV key/value heads (broadcast, not
    // copied); the mask is math of positions (query s sees keys t <= s).
    fn attention(q: f32[KV, G, S, 64], k: f32[KV, S, 64], v: f32[KV, S, 64]) -> f32[KV, G, S, 64] {
        let keys = k.reshape([KV, 1, S, 64]).broadcast_to([KV, G, S, 64]);
        let values = v.reshape([KV, 1, S, 64]).broadcast_to([KV, G, S, 64]);
        let s = (q @ keys.t()) * 0.125; // 1 / sqrt(64)
        let keep = iota(S).reshape([S, 1]) >= iota(S);
        let s = select(keep, s, -inf);
        let e = exp(s - s.max(-1, keepdim));
        (e / e.sum(-1, keepdim)) @ values
    }

    // The gated MLP: down(silu(gate(x)) * up(x)), weights as candle's Linear stores them [out, in].
    fn mlp(x: f32[S, D], gate: f32[F, D], up: f32[F, D], down: f32[D, F]) -> f32[S, D] {
        let g = x @ gate.t();
        (g * sigmoid(g) * (x @ up.t())) @ down.t()
    }

    // RMSNorm in bf16: f32 statistics, the normalized value rounded to bf16 before the weight.
    fn rmsnorm_bf16(x: bf16[S, D], weight: bf16[D]) -> bf16[S, D] {
        let xf = x.cast::<f32>();
        (xf * rsqrt((xf * xf).mean(-1, keepdim) + 0.00001)).cast::<bf16>() * weight
    }

    // Causal attention in bf16: scores and softmax in f32, the probabilities rounded to bf16
    // before V.
    fn attention_bf16(q: bf16[KV, G, S, 64], k: bf16[KV, S, 64], v: bf16[KV, S, 64]) -> bf16[KV, G, S, 64] {
        let keys = k.reshape([KV, 1, S, 64]).broadcast_to([KV, G, S, 64]);
        let values = v.reshape([KV, 1, S, 64]).broadcast_to([KV, G, S, 64]);
        let s = (q @ keys.t()).cast::<f32>() * 0.125;
        let keep = iota(S).reshape([S, 1]) >= iota(S);
        let s = select(keep, s, -inf);
        let e = exp(s - s.max(-1, keepdim));
        (e / e.sum(-1, keepdim)).cast::<bf16>() @ values
    }

    // The gated MLP in bf16: silu in f32.
    fn mlp_bf16(x: bf16[S, D], gate: bf16[F, D], up: bf16[F, D], down: bf16[D, F]) -> bf16[S, D] {
        let g = (x @ gate.t()).cast::<f32>();
        let silu = (g * sigmoid(g)).cast::<bf16>();
        (silu * (x @ up.t())) @ down.t()
    }
}
