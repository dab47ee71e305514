//! Times a few kernels on the CPU device: `cargo run --release -p tcc-runtime --example cpu_bench`.
//! Prints the median of several runs; run it while nothing else is compiling.

use std::time::Instant;

use tcc_ir::{
    BinaryOp, DType, Graph, Kernel, KernelClass, Launch, Op, Program, ReduceOp, Schedule, Shape, TensorType, Tier,
    UnaryOp, ValueRef,
};
use tcc_runtime::{CpuDevice, HostTensor, RuntimeError};

fn ty(dims: &[u64]) -> TensorType {
    TensorType { dtype: DType::F32, shape: Shape::from_consts(dims) }
}

fn program(g: Graph, class: KernelClass) -> Program {
    let mut schedule = Schedule::default_for(Tier::Cranelift);
    // TILES=MCxNCxKC and MICRO=MRxNR override the matmul tiles.
    let parse = |name: &str| -> Option<Vec<u32>> {
        std::env::var(name).ok().map(|v| v.split('x').filter_map(|x| x.parse().ok()).collect())
    };
    if let Some(t) = parse("TILES").filter(|t| t.len() == 3) {
        (schedule.tile_m, schedule.tile_n, schedule.tile_k) = (t[0], t[1], t[2]);
    }
    if let Some(t) = parse("MICRO").filter(|t| t.len() == 2) {
        (schedule.micro_m, schedule.micro_n) = (t[0], t[1]);
    }
    let buffers = g.outputs.iter().map(|o| g.nodes[o.index()].ty.clone()).collect();
    let n_out = g.outputs.len();
    let launch = Launch {
        kernel: Kernel { name: g.name.clone(), class, graph: g.clone(), schedule },
        inputs: (0..g.params.len()).map(ValueRef::Param).collect(),
        outputs: (0..n_out).map(ValueRef::Buffer).collect(),
    };
    Program {
        name: g.name.clone(),
        params: g.params.clone(),
        buffers,
        launches: vec![launch],
        outputs: (0..n_out).map(ValueRef::Buffer).collect(),
    }
}

fn time(dev: &CpuDevice, p: &Program, inputs: &[HostTensor]) -> Result<f64, RuntimeError> {
    dev.run(p, inputs)?;
    let mut times: Vec<f64> = (0..9)
        .map(|_| {
            let t = Instant::now();
            dev.run(p, inputs).map(|_| t.elapsed().as_secs_f64())
        })
        .collect::<Result<_, _>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn random(dims: &[usize]) -> Result<HostTensor, RuntimeError> {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32) / 500.0 - 1.0).collect();
    HostTensor::from_vec(dims.to_vec(), data)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads = std::env::var("THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(0);
    let dev = CpuDevice::with_threads(threads)?;
    println!("threads: {}, caps: {:?}", dev.threads(), dev.backend().caps());
    let (r, c) = (4096u64, 1024u64);

    if std::env::var("MM_ONLY").is_err() {
        let mut g = Graph::new("copy");
        let x = g.add_param("x", ty(&[r, c]))?;
        let y = g.push(Op::Unary(UnaryOp::Neg, x))?;
        g.outputs.push(y);
        let t = time(&dev, &program(g, KernelClass::Pointwise), &[random(&[r as usize, c as usize])?])?;
        println!("neg f32 {r}x{c}: {:.3} ms, {:.1} GB/s", t * 1e3, (2 * r * c * 4) as f64 / t / 1e9);

        let mut g = Graph::new("bias_gelu");
        let x = g.add_param("x", ty(&[r, c]))?;
        let b = g.add_param("b", ty(&[c]))?;
        let s = g.push(Op::Binary(BinaryOp::Add, x, b))?;
        let y = g.push(Op::Unary(UnaryOp::Gelu, s))?;
        g.outputs.push(y);
        if std::env::var("DUMP").is_ok() {
            return dump(&dev, &program(g, KernelClass::Pointwise));
        }
        let t = time(
            &dev,
            &program(g, KernelClass::Pointwise),
            &[random(&[r as usize, c as usize])?, random(&[c as usize])?],
        )?;
        println!("bias+gelu f32 {r}x{c}: {:.3} ms, {:.1} GB/s", t * 1e3, (2 * r * c * 4) as f64 / t / 1e9);

        let mut g = Graph::new("softmax");
        let x = g.add_param("x", ty(&[r, c]))?;
        let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true })?;
        let d = g.push(Op::Binary(BinaryOp::Sub, x, m))?;
        let e = g.push(Op::Unary(UnaryOp::Exp, d))?;
        let s = g.push(Op::Reduce { op: ReduceOp::Sum, input: e, axes: vec![1], keepdim: true })?;
        let y = g.push(Op::Binary(BinaryOp::Div, e, s))?;
        g.outputs.push(y);
        let t = time(&dev, &program(g, KernelClass::RowReduction), &[random(&[r as usize, c as usize])?])?;
        println!("softmax f32 {r}x{c}: {:.3} ms, {:.1} GB/s", t * 1e3, (2 * r * c * 4) as f64 / t / 1e9);
    }

    let sizes: Vec<u64> = if std::env::var("MM_ONLY").is_ok() { vec![1024] } else { vec![256, 512, 1024] };
    for n in sizes {
        let mut g = Graph::new("matmul");
        let a = g.add_param("a", ty(&[n, n]))?;
        let w = g.add_param("w", ty(&[n, n]))?;
        let y = g.push(Op::MatMul(a, w))?;
        g.outputs.push(y);
        let inputs = [random(&[n as usize, n as usize])?, random(&[n as usize, n as usize])?];
        if std::env::var("DUMP_MM").is_ok() {
            return dump(&dev, &program(g, KernelClass::MatMul));
        }
        let t = time(&dev, &program(g, KernelClass::MatMul), &inputs)?;
        println!("matmul f32 {n}^3: {:.3} ms, {:.1} GFLOP/s", t * 1e3, (2 * n * n * n) as f64 / t / 1e9);
    }
    Ok(())
}

#[allow(dead_code)]
fn dump(dev: &CpuDevice, p: &Program) -> Result<(), Box<dyn std::error::Error>> {
    let lk = dev.backend().lower(&p.launches[0].kernel, &Default::default())?;
    println!("{lk:#?}");
    println!("{}", dev.backend().disassemble(&lk)?);
    Ok(())
}
