//! The CUDA runtime. Without a driver: opening a device is a clear error, never a panic. With
//! feature `gpu-tests` (a CUDA device): the PTX backend against the interpreter on random
//! programs, hand-built kernels and every example, as the CPU backend's differential tests do.

use tcc_runtime::cuda::{CudaDevice, CudaError};

fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[test]
fn opening_a_device_never_panics_and_names_a_missing_driver() {
    match CudaDevice::open(0) {
        Err(e @ CudaError::NoDriver) => {
            assert!(!driver_present());
            assert!(e.to_string().starts_with("no CUDA driver found (libcuda.so)"), "{e}");
        }
        Ok(d) => assert!(d.info().sm_count > 0 && !d.info().name.is_empty()),
        Err(e) => assert!(driver_present() && !e.to_string().is_empty(), "{e}"),
    }
    match CudaDevice::open(1 << 20) {
        Err(CudaError::NoDriver) => assert!(!driver_present()),
        Err(CudaError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, 1 << 20),
        other => panic!("device 2^20 should not exist: {other:?}"),
    }
}

#[cfg(feature = "gpu-tests")]
mod gpu {
    use std::sync::OnceLock;

    use proptest::prelude::*;
    use tcc_ir::interp::{Tensor, run_graph};
    use tcc_ir::testing::{GenConfig, GeneratedProgram, Tolerance, arb_graph, compare_outputs, random_inputs};
    use tcc_ir::{Bindings, Graph, KernelClass, Op, Program};
    use tcc_runtime::HostTensor;
    use tcc_runtime::cuda::{CudaDevice, TimingOptions};

    use crate::common::{per_op, whole};

    fn device() -> &'static CudaDevice {
        static D: OnceLock<CudaDevice> = OnceLock::new();
        D.get_or_init(|| match CudaDevice::open(0) {
            Ok(d) => {
                eprintln!("gpu-tests on {:?}", d.info());
                d
            }
            Err(e) => panic!("feature `gpu-tests` needs a CUDA device: {e}"),
        })
    }

    fn tolerance() -> Tolerance {
        // Approximate transcendentals and f32 accumulation in a different order than the f64
        // interpreter: allow a rare flip of a nearly tied comparison, as the CPU tests do.
        Tolerance { outlier_fraction: 0.02, ..Tolerance::default() }.scaled(4.0)
    }

    fn run(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let out = device().run_program(program, &host).map_err(|e| e.to_string())?;
        Ok(out.iter().map(HostTensor::to_interp).collect())
    }

    /// The optimizer's best program for the GPU and its first alternative.
    fn optimized(g: &Graph, bindings: &Bindings) -> Result<Vec<Program>, String> {
        let model = match device().info().arch {
            tcc_codegen::ptx::GpuArch::Sm90a => tcc_passes::TargetModel::sm_90a(),
            tcc_codegen::ptx::GpuArch::Sm80 => tcc_passes::TargetModel::sm_80(),
        };
        let mut opts = tcc_passes::OptimizeOptions::new(model);
        opts.bindings = bindings.clone();
        opts.top_k = 1;
        let o = tcc_passes::optimize(g, &opts).map_err(|e| format!("optimizer: {e}"))?;
        Ok(std::iter::once(o.program).chain(o.alternatives).collect())
    }

    fn check(g: &Graph, inputs: &[Tensor], bindings: &Bindings) -> Result<(), String> {
        let expected = run_graph(g, inputs).map_err(|e| format!("interp: {e}"))?;
        let mut programs = vec![("whole graph", whole(g, KernelClass::Generic)), ("one kernel per op", per_op(g))];
        programs.extend(optimized(g, bindings)?.into_iter().map(|p| ("optimizer", p)));
        for (what, program) in programs {
            let actual = run(&program, inputs).map_err(|e| format!("{what}: {e}"))?;
            compare_outputs(&expected, &actual, &tolerance()).map_err(|m| format!("{what}: {m}"))?;
        }
        Ok(())
    }

    fn run_case(gp: &GeneratedProgram, seed: u64) -> Result<(), TestCaseError> {
        let inputs = gp.random_inputs(seed).map_err(|e| TestCaseError::reject(e.to_string()))?;
        check(&gp.graph, &inputs, &gp.bindings).map_err(|e| TestCaseError::fail(format!("{e}\n{:#?}", gp.graph)))
    }

    /// Cases per property (`TCC_GPU_CASES`, default 64).
    fn cases() -> u32 {
        std::env::var("TCC_GPU_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

        #[test]
        fn random_programs_match_the_interpreter_on_the_gpu(gp in arb_graph(GenConfig { max_ops: 24, max_elements: 6_000, ..GenConfig::default() }), seed in any::<u64>()) {
            run_case(&gp, seed)?;
        }

        #[test]
        fn random_pointwise_programs_match_the_interpreter_on_the_gpu(gp in arb_graph(GenConfig { max_ops: 32, ..GenConfig::pointwise_only() }), seed in any::<u64>()) {
            run_case(&gp, seed)?;
        }

        #[test]
        fn random_float_programs_with_large_tensors_match(gp in arb_graph(GenConfig { max_ops: 12, max_dim: 3000, max_elements: 2_000_000, ..GenConfig::float_only() }), seed in any::<u64>()) {
            run_case(&gp, seed)?;
        }
    }

    fn example_bindings() -> Bindings {
        // Every shape variable of examples/ (the attention and decoder-layer ones too).
        [("M", 8u64), ("N", 200), ("S", 96), ("T", 80), ("B", 2), ("D", 64), ("H", 3), ("KV", 2), ("G", 2), ("F", 96)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// The most multiply-adds of products an example may take to be checked on the interpreter.
    const MAX_INTERP_MACS: f64 = 2e8;

    /// The multiply-adds of `g`'s products at `bindings`.
    fn matmul_work(g: &tcc_ir::Graph, bindings: &Bindings) -> f64 {
        let numel = |n: tcc_ir::NodeId| {
            g.ty(n).map_or(0.0, |t| t.shape.dims().iter().map(|d| d.resolve(bindings).unwrap_or(1) as f64).product())
        };
        g.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, node)| match node.op {
                tcc_ir::Op::MatMul(a, _) => {
                    let depth = g.ty(a)?.shape.dims().last()?.resolve(bindings).unwrap_or(1) as f64;
                    Some(numel(tcc_ir::NodeId(i as u32)) * depth)
                }
                _ => None,
            })
            .sum()
    }

    #[test]
    fn every_example_matches_the_interpreter_on_the_gpu() {
        // Run from the repository root on the GPU machine (the source path baked in at build
        // time may not exist there); TCC_EXAMPLES overrides both.
        let dir = std::env::var_os("TCC_EXAMPLES")
            .map(std::path::PathBuf::from)
            .into_iter()
            .chain([std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples"), "examples".into()])
            .find(|d| d.is_dir())
            .expect("examples/ not found: run from the repository root or set TCC_EXAMPLES");
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut checked = 0;
        for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "tc")) {
            let text = std::fs::read_to_string(path).unwrap();
            let module = tcc_frontend::parse_source(&path.display().to_string(), &text).unwrap();
            for g in &module.functions {
                // The whole decoder layer (4096-wide weights) is billions of f64 multiply-adds on
                // the interpreter; its functions are checked one by one at the bound sizes.
                if matmul_work(g, &example_bindings()) > MAX_INTERP_MACS {
                    println!("{} `{}`: skipped, too large for the interpreter", path.display(), g.name);
                    continue;
                }
                let inputs = random_inputs(g, &example_bindings(), 7).unwrap();
                check(g, &inputs, &example_bindings())
                    .unwrap_or_else(|e| panic!("{} `{}`: {e}", path.display(), g.name));
                checked += 1;
            }
        }
        assert!(checked >= 7, "only {checked} example functions");
    }

    /// examples/decoder_layer.tc with its sizes shrunk in the source (hidden 4096 -> 512, 32 query
    /// and 8 key/value heads -> 4 and 2, MLP 14336 -> 384; head_dim stays 128), as the CLI's
    /// interpreter test of the layer does.
    fn small_decoder_layer() -> Graph {
        let shrink = [
            ("14336", "384"),
            ("4096", "512"),
            ("[1024,", "[256,"),
            ("[S, 32, 128]", "[S, 4, 128]"),
            ("[S, 8, 128]", "[S, 2, 128]"),
            ("[8, 4, S, 128]", "[2, 2, S, 128]"),
        ];
        let path = [std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples"), "examples".into()]
            .into_iter()
            .map(|d| d.join("decoder_layer.tc"))
            .find(|p| p.is_file())
            .expect("examples/decoder_layer.tc not found: run from the repository root");
        let mut source = std::fs::read_to_string(path).unwrap();
        for (from, to) in shrink {
            assert!(source.contains(from), "`{from}` in examples/decoder_layer.tc");
            source = source.replace(from, to);
        }
        let module = tcc_frontend::parse_source("decoder_layer_small.tc", &source).unwrap();
        module.functions.into_iter().find(|g| g.name == "decoder_layer").unwrap()
    }

    #[test]
    fn the_decoder_layer_at_small_sizes_matches_the_interpreter_on_the_gpu() {
        // The optimizer's programs: V read by the attention kernel through its [S, heads * d] ->
        // [heads, S, d] view (no permute kernel), the gated MLP as one dual product; at 1024
        // tokens on sm_90a the Q, K and V projections as one product whose columns the rotary
        // kernels and the attention (V) read in place.
        let g = small_decoder_layer();
        for s in [96u64, 200, 1024] {
            let bindings: Bindings = [("S".to_string(), s)].into_iter().collect();
            let mut inputs = random_inputs(&g, &bindings, 7).unwrap();
            // Weights of variance 1 / fan_in (so activations stay of order one), rounded to bf16.
            for w in [4usize, 5, 6, 7, 9, 10, 11] {
                let t = &mut inputs[w];
                let scale = 1.0 / (*t.shape.last().unwrap() as f64).sqrt();
                for x in &mut t.data {
                    *x = tcc_ir::DType::BF16.round(*x * scale);
                }
            }
            let expected = run_graph(&g, &inputs).unwrap();
            let programs = optimized(&g, &bindings).unwrap();
            let best = &programs[0];
            let kernels: Vec<&str> = best.launches.iter().map(|l| l.kernel.name.as_str()).collect();
            // One layout kernel left: the attention's output to [S, heads * d] (V's is read in place).
            assert!(kernels.iter().filter(|k| k.ends_with("_permute")).count() <= 1, "{kernels:?}");
            for (i, program) in programs.iter().enumerate() {
                let actual = run(program, &inputs).unwrap();
                compare_outputs(&expected, &actual, &tolerance())
                    .unwrap_or_else(|m| panic!("S={s}, program {i} ({} kernels): {m}", program.launches.len()));
            }
            let joined = best.launches.iter().any(|l| {
                l.kernel
                    .graph
                    .nodes
                    .iter()
                    .any(|n| matches!(n.op, Op::Concat { .. }) && l.kernel.class == KernelClass::MatMul)
            });
            if s == 1024 && device().info().arch == tcc_codegen::ptx::GpuArch::Sm90a {
                assert!(joined, "{kernels:?}");
            }
            eprintln!("decoder layer S={s}: {} kernels: {kernels:?}", best.launches.len());
        }
    }

    #[test]
    fn timing_with_events_gives_positive_medians() {
        let mut g = Graph::new("add");
        let ty = tcc_ir::TensorType { dtype: tcc_ir::DType::F32, shape: tcc_ir::Shape::from_consts(&[1 << 20]) };
        let x = g.add_param("x", ty.clone()).unwrap();
        let y = g.add_param("y", ty).unwrap();
        let s = g.push(tcc_ir::Op::Binary(tcc_ir::BinaryOp::Add, x, y)).unwrap();
        g.outputs.push(s);
        let inputs = random_inputs(&g, &Bindings::new(), 1).unwrap();
        let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
        let t = device().time_program(&whole(&g, KernelClass::Pointwise), &host, TimingOptions::default()).unwrap();
        assert_eq!(t.samples_ms.len(), 20);
        assert!(t.median_ms > 0.0 && t.min_ms <= t.median_ms, "{t:?}");
        eprintln!("add of 2^20 f32: median {:.4} ms", t.median_ms);
    }

    #[test]
    fn wrong_inputs_are_errors_not_panics() {
        let mut g = Graph::new("neg");
        let ty = tcc_ir::TensorType { dtype: tcc_ir::DType::F32, shape: tcc_ir::Shape::from_consts(&[4]) };
        let x = g.add_param("x", ty).unwrap();
        let n = g.push(tcc_ir::Op::Unary(tcc_ir::UnaryOp::Neg, x)).unwrap();
        g.outputs.push(n);
        let bad = HostTensor::from_slice(vec![5], &[1.0f32; 5]).unwrap();
        assert!(device().run_program(&whole(&g, KernelClass::Pointwise), &[bad]).is_err());
    }
}
