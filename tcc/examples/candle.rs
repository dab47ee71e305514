//! tcc kernels on candle tensors: a custom op of one input, and `apply` for four.
//!
//! `cargo run -p tcc --example candle --features candle`

use tcc::candle::{KernelOp, apply};
use tcc::candle_core::{D, Device, Tensor};

tcc::kernel! {
    fn softmax(x: f32[N, C]) -> f32[N, C] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    fn mlp(x: f32[M, D], gate: f32[F, D], up: f32[F, D], down: f32[D, F]) -> f32[M, D] {
        let g = x @ gate.t();
        (g * sigmoid(g) * (x @ up.t())) @ down.t()
    }
}

fn main() -> tcc::candle_core::Result<()> {
    let cpu = Device::Cpu;
    let x = Tensor::randn(0f32, 1.0, (4, 32), &cpu)?;
    // One input: candle's CustomOp1 (CustomOp2 and CustomOp3 take two and three).
    let y = x.apply_op1_no_bwd(&KernelOp::new(softmax::kernel()))?;
    let e = x.broadcast_sub(&x.max_keepdim(D::Minus1)?)?.exp()?;
    let reference = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    println!("softmax: max |tcc - candle| = {:.2e}", (&y - &reference)?.abs()?.max_all()?.to_scalar::<f32>()?);
    // Any number of inputs (and outputs): tcc::candle::apply.
    let (gate, up, down) = (
        Tensor::randn(0f32, 0.2, (64, 32), &cpu)?,
        Tensor::randn(0f32, 0.2, (64, 32), &cpu)?,
        Tensor::randn(0f32, 0.1, (32, 64), &cpu)?,
    );
    let out = apply(mlp::kernel(), &[&x, &gate, &up, &down])?;
    let reference = (x.matmul(&gate.t()?)?.silu()? * x.matmul(&up.t()?)?)?.matmul(&down.t()?)?;
    println!(
        "mlp {:?}: max |tcc - candle| = {:.2e}",
        out[0].dims(),
        (&out[0] - &reference)?.abs()?.max_all()?.to_scalar::<f32>()?
    );
    Ok(())
}
