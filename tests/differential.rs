//! The differential suite's fixed CI budget: seeds `0..TCC_DIFF_PROGRAMS` (default 500) of the
//! driver in `tcc_tests::differential`, on every CPU backend built in (the interpreter after the
//! optimizer, `cpu:cranelift`, and `cpu:llvm` with feature `llvm`); seeds `0..300` of the
//! `high_rank` preset (`TCC_DIFF_HIGH_RANK_PROGRAMS`); the regression seeds; and
//! (feature `gpu-tests`) the CUDA GPU. Longer runs: the `soak` binary (RELIABILITY.md).

use tcc_tests::differential::coverage::Coverage;
use tcc_tests::differential::paths::{self, PathProgram};
use tcc_tests::differential::{Backend, Driver, Totals};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run(backends: &[Backend], seeds: impl IntoIterator<Item = u64>) -> Totals {
    let mut driver = Driver::new(backends).unwrap_or_else(|e| panic!("{e}"));
    let mut totals = Totals::default();
    for seed in seeds {
        totals.add(&driver.run_seed(seed));
    }
    totals
}

#[test]
fn random_programs_agree_with_the_interpreter_on_every_cpu_backend() {
    let n = env_u64("TCC_DIFF_PROGRAMS", 500);
    let start = env_u64("TCC_DIFF_START", 0);
    let totals = run(&Backend::cpu_defaults(), start..start + n);
    assert!(totals.failing.is_empty(), "{}", totals.summary());
    for b in Backend::cpu_defaults() {
        assert_eq!(totals.checked.get(&b), Some(&n), "{} did not check every program", b.name());
    }
}

#[test]
fn random_high_rank_programs_agree_with_the_interpreter_on_every_cpu_backend() {
    // Ranks 5 to 8 with dims of 1 to 4 (the rotation stops at rank 4).
    let n = env_u64("TCC_DIFF_HIGH_RANK_PROGRAMS", 300);
    let preset = tcc_tests::differential::presets::by_name("high_rank").unwrap();
    let mut driver = Driver::new(&Backend::cpu_defaults()).unwrap().with_preset(preset);
    let mut totals = Totals::default();
    for seed in 0..n {
        totals.add(&driver.run_seed(seed));
    }
    assert!(totals.failing.is_empty(), "{}", totals.summary());
    assert!(totals.coverage.ranks.range(5..).map(|(_, n)| n).sum::<u64>() > 0, "no value of rank 5 to 8");
}

/// Seeds that once failed (see RELIABILITY.md for what each found); each must pass now.
const REGRESSION_SEEDS: &[u64] = &[
    10536,    // gelu of a large negative x: the interpreter cancelled to 0 (fixed in ir/src/interp/scalar.rs)
    7300023,  // `x / d` divided in one loop and multiplied by a hoisted reciprocal in another (issue 30)
    20007843, // an f16 `>` that LLVM 19's AVX512-FP16 lowering turned into `<` (codegen/src/cpu/llvm/host.rs)
];

#[test]
fn regression_seeds_agree_with_the_interpreter() {
    let totals = run(&Backend::cpu_defaults(), REGRESSION_SEEDS.iter().copied());
    assert!(totals.failing.is_empty(), "{}", totals.summary());
}

#[test]
fn a_seed_always_means_the_same_program() {
    let mut a = Driver::new(&[Backend::InterpOptimized]).unwrap();
    let mut b = Driver::new(&[Backend::InterpOptimized]).unwrap();
    for seed in [0, 1, 7, 123_456_789] {
        let (ra, rb) = (a.run_seed(seed), b.run_seed(seed));
        let text = |r: &tcc_tests::differential::SeedReport| {
            r.program.as_ref().map(|p| (tcc_ir::text::print_graph(&p.graph), p.bindings.clone()))
        };
        assert!(text(&ra).is_some());
        assert_eq!(text(&ra), text(&rb), "seed {seed}");
        assert_eq!(ra.preset, rb.preset);
    }
}

#[test]
fn the_ci_budget_covers_every_op_and_dtype_and_odd_shapes() {
    // Generation alone is cheap: count what the first 300 seeds hold.
    let mut cov = Coverage::default();
    for seed in 0..300 {
        let preset = tcc_tests::differential::presets::for_seed(seed);
        cov.add(&tcc_ir::testing::generate(&preset.config, seed).unwrap());
    }
    let missing = cov.below(1);
    assert!(missing.is_empty(), "never generated: {missing:?}");
    assert!(cov.values_with_dim_one * 10 > cov.values, "{}", cov.to_markdown());
    assert!(cov.values_with_prime_dim * 10 > cov.values, "{}", cov.to_markdown());
    assert!(cov.scalars > 0 && cov.programs_with_shape_vars > 0);
}

#[test]
fn a_backend_that_is_not_built_in_is_refused_by_name() {
    if !Backend::Cuda.built_in() {
        let e = Driver::new(&[Backend::Cuda]).unwrap_err();
        assert!(e.to_string().contains("cuda") && e.to_string().contains("gpu-tests"), "{e}");
    }
    assert_eq!(Backend::from_name("cpu:cranelift"), Some(Backend::Cranelift));
    assert_eq!(Backend::from_name("cpu:nope"), None);
}

/// Seeds that once failed on the GPU only (see RELIABILITY.md); each must pass now.
#[cfg(feature = "gpu-tests")]
const GPU_REGRESSION_SEEDS: &[u64] = &[
    30001436, // ptxas 13.0 dropped an i32 negation folded into a three-input min (codegen/src/ptx/math.rs `ineg`)
];

#[cfg(feature = "gpu-tests")]
#[test]
fn gpu_regression_seeds_agree_with_the_interpreter() {
    let totals = run(&[Backend::Cuda], GPU_REGRESSION_SEEDS.iter().copied());
    assert!(totals.failing.is_empty(), "{}", totals.summary());
}

/// The GPU (feature `gpu-tests`): seeds `0..TCC_GPU_PROGRAMS` (default 1000) on the CUDA device.
#[cfg(feature = "gpu-tests")]
#[test]
fn random_programs_agree_with_the_interpreter_on_the_gpu() {
    let n = env_u64("TCC_GPU_PROGRAMS", 1000);
    let totals = run(&[Backend::Cuda], 0..n);
    eprintln!("{}", totals.summary());
    assert!(totals.failing.is_empty(), "{}", totals.summary());
    assert_eq!(totals.checked.get(&Backend::Cuda), Some(&n));
}

#[test]
fn discontinuities_are_recognized_and_guarded_ops_are_not_ones() {
    use tcc_ir::{BinaryOp, CompareOp, DType, Dim, Graph, Op, Shape, TensorType, UnaryOp};
    use tcc_tests::differential::tolerance::{allowed_outliers, has_discontinuity};
    let f32v = TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Const(7)]) };
    let base = || {
        let mut g = Graph::new("g");
        let x = g.add_param("x", f32v.clone()).unwrap();
        (g, x)
    };
    // Guarded log(abs(x) + 1), exp(min(x, 3)) and pow(abs(x) + 1, x): continuous.
    let (mut g, x) = base();
    let a = g.push(Op::Unary(UnaryOp::Abs, x)).unwrap();
    let c = g.constant(1.0, DType::F32).unwrap();
    let p = g.push(Op::Binary(BinaryOp::Add, a, c)).unwrap();
    g.push(Op::Unary(UnaryOp::Log, p)).unwrap();
    g.push(Op::Binary(BinaryOp::Pow, p, x)).unwrap();
    g.push(Op::Binary(BinaryOp::Div, x, p)).unwrap();
    let three = g.constant(3.0, DType::F32).unwrap();
    let m = g.push(Op::Binary(BinaryOp::Min, x, three)).unwrap();
    g.push(Op::Unary(UnaryOp::Exp, m)).unwrap();
    assert!(!has_discontinuity(&g));
    // Each unguarded op, a comparison and a float-to-int cast: discontinuous.
    let i32v = TensorType { dtype: DType::I32, shape: Shape(vec![Dim::Const(7)]) };
    let unguarded = |x| {
        [
            (Op::Unary(UnaryOp::Rsqrt, x), f32v.clone()),
            (Op::Unary(UnaryOp::Exp, x), f32v.clone()),
            (Op::Binary(BinaryOp::Div, x, x), f32v.clone()),
            (Op::Binary(BinaryOp::Pow, x, x), f32v.clone()),
            (Op::Compare(CompareOp::Lt, x, x), TensorType { dtype: DType::Bool, ..f32v.clone() }),
            (Op::Cast(x), i32v.clone()),
        ]
    };
    for i in 0..6 {
        let (mut g, x) = base();
        let (op, ty) = unguarded(x)[i].clone();
        g.push_typed(op, ty).unwrap();
        assert!(has_discontinuity(&g), "case {i}");
    }
    assert_eq!((allowed_outliers(4), allowed_outliers(100), allowed_outliers(1000)), (1, 2, 20));
}

/// Seeds of the `high_rank` preset (`soak --preset high_rank`) that once failed.
const HIGH_RANK_REGRESSION_SEEDS: &[u64] = &[
    // pow of a negative base with an exponent 1 ulp below 1.0 in the interpreter and 1.0 on
    // cranelift (sigmoid rounding): NaN against a number, a discontinuity the driver now allows.
    4673,
];

#[test]
fn high_rank_regression_seeds_agree_with_the_interpreter() {
    let preset = tcc_tests::differential::presets::by_name("high_rank").unwrap();
    let mut driver = Driver::new(&Backend::cpu_defaults()).unwrap().with_preset(preset);
    for &seed in HIGH_RANK_REGRESSION_SEEDS {
        let r = driver.run_seed(seed);
        assert!(r.failures.is_empty(), "{}", r.describe());
    }
}

/// Every backend this build has: the CPU ones, and the CUDA GPU with feature `gpu-tests`.
fn every_backend() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|b| b.built_in()).collect()
}

/// `paths::run` as a `Result` carrying the failures' text.
fn check_paths_program(driver: &mut Driver, seed: u64, family: &'static str, p: &PathProgram) -> Result<(), String> {
    let r = paths::run(driver, seed, family, p);
    if r.failures.is_empty() { Ok(()) } else { Err(r.describe()) }
}

#[test]
fn the_reduced_program_of_issue_30_is_exact_on_every_backend() {
    // `x / d` read as `y` and as `y.t().t()`, compared with `!=`: the CPU tiers once divided in
    // the scalar loop and multiplied by a hoisted reciprocal in the vector loop, and 6 of
    // input seeds 1..8 then had an element that differed from itself.
    let p = paths::from_source(paths::REDUCED_ISSUE_30, vec![0.0]).unwrap();
    let mut driver = Driver::new(&every_backend()).unwrap();
    for seed in 1..=16 {
        if let Err(e) = check_paths_program(&mut driver, seed, "issue-30", &p) {
            panic!("input seed {seed}: {e}\n{}", p.source);
        }
    }
}

#[test]
fn a_value_read_through_different_paths_equals_itself_on_every_backend() {
    // `TCC_DIFF_PATH_PROGRAMS` programs from `TCC_DIFF_START` (CI rotates the start).
    let n = env_u64("TCC_DIFF_PATH_PROGRAMS", 300);
    let start = env_u64("TCC_DIFF_START", 0);
    let mut driver = Driver::new(&every_backend()).unwrap();
    let mut failing = Vec::new();
    for seed in start..start + n {
        let p = paths::program(seed).unwrap_or_else(|e| panic!("paths seed {seed}: {e}"));
        if let Err(e) = check_paths_program(&mut driver, seed, "paths", &p) {
            failing.push(format!("paths seed {seed}: {e}\n{}", p.source));
        }
    }
    assert!(failing.is_empty(), "{} of {n} failing:\n{}", failing.len(), failing.join("\n\n"));
}

#[test]
fn the_paths_family_covers_every_comparison_dtype_and_a_dim_of_one() {
    let sources: Vec<String> = (0..300).map(|s| paths::program(s).unwrap().source).collect();
    for needle in [
        " == ",
        " != ",
        " < ",
        " <= ",
        " > ",
        " >= ",
        "f16[",
        "bf16[",
        "f32[",
        "[1, ",
        "x / d",
        "exp(",
        "t().t()",
        "permute",
        "broadcast_to",
        ".slice(1,",
    ] {
        assert!(sources.iter().any(|s| s.contains(needle)), "no program has `{needle}`");
    }
    assert_eq!(paths::program(7).unwrap().source, paths::program(7).unwrap().source);
}

#[test]
fn comparisons_of_a_value_with_a_slice_of_itself_are_exact_on_every_backend() {
    // Seed 20007843 reduced: on a CPU with AVX512-FP16, LLVM 19 compiled the f16 `p2 > s` (`s` a
    // slice, loaded from memory) as `p2 < s`. Every comparison, float dtype and a few lane counts.
    let mut driver = Driver::new(&every_backend()).unwrap();
    let mut failing = Vec::new();
    for dtype in ["f16", "bf16", "f32"] {
        for op in ["<", "<=", ">", ">=", "==", "!="] {
            for n in [8, 16, 37] {
                let src = format!(
                    "fn f(p2: {dtype}[2, 1, {n}], p3: bool[1, 2, 1, {n}]) -> bool[1, 2, 1, {n}] {{
                        let s = p2.slice(0, 1, 2);
                        select(p3, p2 {op} s, p3)
                    }}"
                );
                let gp = paths::parse(&src).unwrap();
                let r = driver.run_program(20007843, "compare", gp, tcc_tests::differential::Check::Exact);
                if !r.failures.is_empty() {
                    failing.push(format!("{src}\n{}", r.describe()));
                }
            }
        }
    }
    assert!(failing.is_empty(), "{}", failing.join("\n\n"));
}
