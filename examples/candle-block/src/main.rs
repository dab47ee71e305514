//! Runs the Llama-style block of `src/lib.rs` with candle's ops and with tcc kernels on candle's
//! CPU, checks that they agree (exit 1 when any element is outside the tolerance) and prints the
//! median time of each part and of the whole block, both ways.
//!
//! `cargo run --release -- [--tokens S] [--hidden D] [--heads H] [--kv-heads KV] [--mlp F] [--reps N]`

use std::process::ExitCode;
use std::time::{Duration, Instant};

use candle_block::{Config, HEAD_DIM, Kernels, Weights, attention_with, block, error_ratio, mlp_with, qkv, random};
use tcc::candle_core::{Device, Result, Tensor};

/// f32 throughout; tcc's fused kernels use polynomial `exp`, and sum in another order.
const RTOL: f32 = 1e-3;
const ATOL: f32 = 1e-4;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses `--name value` pairs into the config and the repetitions.
fn args() -> std::result::Result<(Config, usize), String> {
    let mut c = Config { tokens: 64, hidden: 256, heads: 4, kv_heads: 2, mlp: 688 };
    let mut reps = 10;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: usize = value.parse().map_err(|_| format!("{flag} takes a positive integer, got `{value}`"))?;
        match flag.as_str() {
            "--tokens" => c.tokens = n,
            "--hidden" => c.hidden = n,
            "--heads" => c.heads = n,
            "--kv-heads" => c.kv_heads = n,
            "--mlp" => c.mlp = n,
            "--reps" => reps = n,
            _ => return Err(format!("unknown flag {flag} (--tokens, --hidden, --heads, --kv-heads, --mlp, --reps)")),
        }
    }
    let sizes = [c.tokens, c.hidden, c.heads, c.kv_heads, c.mlp, reps];
    if sizes.contains(&0) || c.hidden != c.heads * HEAD_DIM || !c.heads.is_multiple_of(c.kv_heads) {
        return Err(format!(
            "sizes must be positive, hidden = heads × {HEAD_DIM} and heads a multiple of kv-heads: {c:?}"
        ));
    }
    Ok((c, reps))
}

/// The median wall time of `reps` calls of `f` (after one untimed call).
fn median(reps: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<Duration> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn ms(d: Duration) -> String {
    format!("{:9.3} ms", d.as_secs_f64() * 1e3)
}

fn run() -> std::result::Result<bool, Box<dyn std::error::Error>> {
    let (c, reps) = args()?;
    let device = Device::Cpu;
    let w = Weights::random(&c, &device)?;
    let x = random(&[c.tokens, c.hidden], 42, 1.0, &device)?;
    println!(
        "candle-block: {} tokens, hidden {}, {} query heads over {} key/value heads of {HEAD_DIM}, MLP {}; f32 on the CPU ({})",
        c.tokens,
        c.hidden,
        c.heads,
        c.kv_heads,
        c.mlp,
        tcc::Device::default_cpu()?.name()
    );

    // The first tcc call of each kernel optimizes and compiles it for these shapes.
    let start = Instant::now();
    let tcc_out = block(Kernels::Tcc, &c, &x, &w)?;
    println!("first tcc block (optimizes and compiles its 3 tcc fns): {}", ms(start.elapsed()));

    // Checks: each part on the same inputs, then the whole block.
    let (q, k, v) = qkv(Kernels::Candle, &c, &x, &w)?;
    let h = random(&[c.tokens, c.hidden], 43, 1.0, &device)?;
    let parts: [(&str, Tensor, Tensor); 3] = [
        ("attention", attention_with(Kernels::Tcc, &q, &k, &v)?, attention_with(Kernels::Candle, &q, &k, &v)?),
        ("mlp", mlp_with(Kernels::Tcc, &h, &w)?, mlp_with(Kernels::Candle, &h, &w)?),
        ("block", tcc_out, block(Kernels::Candle, &c, &x, &w)?),
    ];
    let mut ok = true;
    for (name, actual, expected) in &parts {
        let (ratio, diff) = error_ratio(actual, expected, RTOL, ATOL)?;
        let verdict = if ratio <= 1.0 { "ok" } else { "MISMATCH" };
        println!("check {name:<9} max |tcc - candle| = {diff:.3e} ({:.2} of the tolerance): {verdict}", ratio);
        ok &= ratio <= 1.0;
    }

    println!("median of {reps} runs      candle ops    tcc kernels   candle/tcc");
    let timings = [
        (
            "attention",
            median(reps, || attention_with(Kernels::Candle, &q, &k, &v))?,
            median(reps, || attention_with(Kernels::Tcc, &q, &k, &v))?,
        ),
        ("mlp", median(reps, || mlp_with(Kernels::Candle, &h, &w))?, median(reps, || mlp_with(Kernels::Tcc, &h, &w))?),
        (
            "block",
            median(reps, || block(Kernels::Candle, &c, &x, &w))?,
            median(reps, || block(Kernels::Tcc, &c, &x, &w))?,
        ),
    ];
    for (name, candle, tcc) in timings {
        println!("{name:<23} {}  {}  {:9.2}x", ms(candle), ms(tcc), candle.as_secs_f64() / tcc.as_secs_f64());
    }
    if !ok {
        eprintln!("tcc's kernels differ from candle's ops beyond rtol {RTOL}, atol {ATOL}");
    }
    Ok(ok)
}
