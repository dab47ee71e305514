//! Runs the Llama-style block of `src/lib.rs` with candle's ops and with tcc kernels on candle's
//! CPU or CUDA device, checks that they agree (exit 1 when any element is outside the tolerance)
//! and prints the median time of each part and of the whole block, both ways.
//!
//! `cargo run --release -- [--tokens S] [--hidden D] [--heads H] [--kv-heads KV] [--mlp F] [--reps N]
//! [--device cpu|cuda] [--dtype f32|bf16]` (`--device cuda` needs the crate's feature `cuda`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use candle_block::{Config, HEAD_DIM, Kernels, Weights, attention_with, block, error_ratio, mlp_with, qkv, random};
use tcc::candle_core::{DType, Device, Result, Tensor};

/// The tolerance `(rtol, atol)` of the check in `dtype`: in f32, tcc's fused kernels use a
/// polynomial `exp` and sum in another order; in bf16 both sides round their intermediates to
/// bf16 (8 bits of mantissa) at different points.
fn tolerance(dtype: DType) -> (f32, f32) {
    match dtype {
        DType::BF16 => (3e-2, 3e-2),
        _ => (1e-3, 1e-4),
    }
}

/// What to run: sizes, repetitions, device and dtype.
struct Options {
    config: Config,
    reps: usize,
    device: Device,
    dtype: DType,
}

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

/// Parses `--name value` pairs.
fn args() -> std::result::Result<Options, String> {
    let mut c = Config { tokens: 64, hidden: 256, heads: 4, kv_heads: 2, mlp: 688 };
    let mut reps = 10;
    let mut device = Device::Cpu;
    let mut dtype = DType::F32;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--device" => device = open(&value)?,
            "--dtype" => {
                dtype = match value.as_str() {
                    "f32" => DType::F32,
                    "bf16" => DType::BF16,
                    _ => return Err(format!("--dtype takes f32 or bf16, got `{value}`")),
                }
            }
            _ => {
                let n: usize = value.parse().map_err(|_| format!("{flag} takes a positive integer, got `{value}`"))?;
                match flag.as_str() {
                    "--tokens" => c.tokens = n,
                    "--hidden" => c.hidden = n,
                    "--heads" => c.heads = n,
                    "--kv-heads" => c.kv_heads = n,
                    "--mlp" => c.mlp = n,
                    "--reps" => reps = n,
                    _ => {
                        return Err(format!(
                            "unknown flag {flag} (--tokens, --hidden, --heads, --kv-heads, --mlp, --reps, --device, --dtype)"
                        ));
                    }
                }
            }
        }
    }
    let sizes = [c.tokens, c.hidden, c.heads, c.kv_heads, c.mlp, reps];
    if sizes.contains(&0) || c.hidden != c.heads * HEAD_DIM || !c.heads.is_multiple_of(c.kv_heads) {
        return Err(format!(
            "sizes must be positive, hidden = heads × {HEAD_DIM} and heads a multiple of kv-heads: {c:?}"
        ));
    }
    Ok(Options { config: c, reps, device, dtype })
}

/// candle's device named `name`.
fn open(name: &str) -> std::result::Result<Device, String> {
    match name {
        "cpu" => Ok(Device::Cpu),
        #[cfg(feature = "cuda")]
        "cuda" => Device::new_cuda(0).map_err(|e| format!("opening CUDA device 0: {e}")),
        #[cfg(not(feature = "cuda"))]
        "cuda" => Err("--device cuda needs this crate's feature `cuda` (cargo run --features cuda)".into()),
        _ => Err(format!("--device takes cpu or cuda, got `{name}`")),
    }
}

/// Where the block runs, for the header line.
fn describe(device: &Device) -> std::result::Result<String, Box<dyn std::error::Error>> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(cuda) => Ok(tcc::candle::cuda_device(cuda)?.name()),
        _ => Ok(format!("the CPU, tcc on {}", tcc::Device::default_cpu()?.name())),
    }
}

/// The median wall time of `reps` calls of `f` (after one untimed call), each waiting for
/// `device` to finish (a GPU runs the calls' kernels asynchronously).
fn median(device: &Device, reps: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<Duration> {
    f()?;
    device.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        device.synchronize()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn ms(d: Duration) -> String {
    format!("{:9.3} ms", d.as_secs_f64() * 1e3)
}

fn run() -> std::result::Result<bool, Box<dyn std::error::Error>> {
    let Options { config: c, reps, device, dtype } = args()?;
    let (rtol, atol) = tolerance(dtype);
    let w = Weights::random(&c, &device)?.to_dtype(dtype)?;
    let x = random(&[c.tokens, c.hidden], 42, 1.0, &device)?.to_dtype(dtype)?;
    println!(
        "candle-block: {} tokens, hidden {}, {} query heads over {} key/value heads of {HEAD_DIM}, MLP {}; {} on {}",
        c.tokens,
        c.hidden,
        c.heads,
        c.kv_heads,
        c.mlp,
        dtype.as_str(),
        describe(&device)?
    );

    // The first tcc call of each kernel optimizes and compiles it for these shapes.
    let start = Instant::now();
    let tcc_out = block(Kernels::Tcc, &c, &x, &w)?;
    device.synchronize()?;
    println!("first tcc block (optimizes and compiles its 3 tcc fns): {}", ms(start.elapsed()));

    // Checks: each part on the same inputs, then the whole block.
    let (q, k, v) = qkv(Kernels::Candle, &c, &x, &w)?;
    let h = random(&[c.tokens, c.hidden], 43, 1.0, &device)?.to_dtype(dtype)?;
    let parts: [(&str, Tensor, Tensor); 3] = [
        ("attention", attention_with(Kernels::Tcc, &q, &k, &v)?, attention_with(Kernels::Candle, &q, &k, &v)?),
        ("mlp", mlp_with(Kernels::Tcc, &h, &w)?, mlp_with(Kernels::Candle, &h, &w)?),
        ("block", tcc_out, block(Kernels::Candle, &c, &x, &w)?),
    ];
    let mut ok = true;
    for (name, actual, expected) in &parts {
        let (ratio, diff) = error_ratio(actual, expected, rtol, atol)?;
        let verdict = if ratio <= 1.0 { "ok" } else { "MISMATCH" };
        println!("check {name:<9} max |tcc - candle| = {diff:.3e} ({:.2} of the tolerance): {verdict}", ratio);
        ok &= ratio <= 1.0;
    }

    println!("median of {reps} runs      candle ops    tcc kernels   candle/tcc");
    let d = &device;
    let timings = [
        (
            "attention",
            median(d, reps, || attention_with(Kernels::Candle, &q, &k, &v))?,
            median(d, reps, || attention_with(Kernels::Tcc, &q, &k, &v))?,
        ),
        (
            "mlp",
            median(d, reps, || mlp_with(Kernels::Candle, &h, &w))?,
            median(d, reps, || mlp_with(Kernels::Tcc, &h, &w))?,
        ),
        (
            "block",
            median(d, reps, || block(Kernels::Candle, &c, &x, &w))?,
            median(d, reps, || block(Kernels::Tcc, &c, &x, &w))?,
        ),
    ];
    for (name, candle, tcc) in timings {
        println!("{name:<23} {}  {}  {:9.2}x", ms(candle), ms(tcc), candle.as_secs_f64() / tcc.as_secs_f64());
    }
    if !ok {
        eprintln!("tcc's kernels differ from candle's ops beyond rtol {rtol}, atol {atol}");
    }
    Ok(ok)
}
