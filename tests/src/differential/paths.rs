//! The `paths` family of the differential suite: one elementwise value consumed through several
//! index paths (a permute pair, `t().t()`, concat and slice, a broadcast, a reshape round trip)
//! and compared with itself by `==`, `!=`, `<`, `<=`, `>` or `>=`.
//!
//! The interpreter computes the value once, so every comparison is constant: all true or all
//! false. A backend that computes the same value in two ways inside one kernel (a reciprocal
//! multiply beside a division, a vector and a scalar form of a transcendental, a loop body and its
//! tail) flips some of them, which tolerances would hide: these programs are checked bit for bit
//! ([`super::Check::Exact`]). Issue 30 found the first such bug; its reduced program is
//! [`REDUCED_ISSUE_30`].
//!
//! Values stay away from NaN (every domain is guarded), so `x == x` holds for every element.

use tcc_frontend::parse_source;
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::{GeneratedProgram, SplitMix64};
use tcc_ir::{Bindings, DType};

use super::{Check, Driver, Failure, SeedReport};

/// The program issue 30 reduced from seed 7300023: `x / d` through `y.t().t()` and `y`, compared
/// with `!=` after a concat that broadcasts (the CPU tiers computed the quotient two ways).
pub const REDUCED_ISSUE_30: &str = "fn f(x: f32[1, 4], d: f32[1]) -> i32[3, 4] {
    let y = x / d;
    let z = y.t().t();
    (concat([z, y, z], 0) != z).cast::<i32>()
}";

/// A program of the family: its source, the program, and the value every element of each output
/// must have under the interpreter (1 for true, 0 for false).
#[derive(Debug, Clone)]
pub struct PathProgram {
    /// The DSL source (printed with a failing seed).
    pub source: String,
    /// The lowered program (no shape variables).
    pub program: GeneratedProgram,
    /// Per output, the value of every element.
    pub constant: Vec<f64>,
}

/// The first fn of `source` (no shape variables) as a program for [`Driver::run_program`].
pub fn parse(source: &str) -> Result<GeneratedProgram, String> {
    let module = parse_source("paths.tc", source).map_err(|d| d.render(false))?;
    let graph = module.functions.into_iter().next().ok_or("the source has no fn")?;
    Ok(GeneratedProgram { graph, bindings: Bindings::default() })
}

/// Parses `source` (one fn, no shape variables) into a program whose outputs are all `constant`
/// (one value per output).
pub fn from_source(source: &str, constant: Vec<f64>) -> Result<PathProgram, String> {
    Ok(PathProgram { source: source.to_string(), program: parse(source)?, constant })
}

/// The program of `seed` (the same seed always gives the same program).
pub fn program(seed: u64) -> Result<PathProgram, String> {
    let (source, constant) = source(seed);
    from_source(&source, constant)
}

/// Runs `p` on inputs drawn from `seed` on every backend of `driver`, checked bit for bit
/// against the interpreter, whose outputs must themselves be the constants `p` promises (a
/// `reference` failure otherwise). `family` names the program in the report.
pub fn run(driver: &mut Driver, seed: u64, family: &'static str, p: &PathProgram) -> SeedReport {
    let mut report = driver.run_program(seed, family, p.program.clone(), Check::Exact);
    let reference = p
        .program
        .random_inputs(seed)
        .map_err(|e| format!("inputs: {e}"))
        .and_then(|inputs| run_graph(&p.program.graph, &inputs).map_err(|e| format!("interpreter: {e}")))
        .and_then(|outputs| check_constant(p, &outputs).map_err(|e| format!("the interpreter: {e}")));
    if let Err(message) = reference {
        report.failures.push(Failure::reference(message));
    }
    report
}

/// Which outputs of `outputs` are not constant as [`PathProgram::constant`] says, as text.
pub fn check_constant(p: &PathProgram, outputs: &[Tensor]) -> Result<(), String> {
    for (i, (out, &want)) in outputs.iter().zip(&p.constant).enumerate() {
        if let Some(at) = out.data.iter().position(|&v| v != want) {
            return Err(format!("output {i}: element {at} is {} where every element must be {want}", out.data[at]));
        }
    }
    if outputs.len() != p.constant.len() {
        return Err(format!("{} outputs, expected {}", outputs.len(), p.constant.len()));
    }
    Ok(())
}

/// A comparison and whether it holds between a value and itself.
const COMPARISONS: [(&str, bool); 6] =
    [("==", true), ("!=", false), ("<", false), ("<=", true), (">", false), (">=", true)];

/// First steps on `x` and the divisor-like input `d`: each is finite and never NaN for the
/// normal, nonzero inputs of [`tcc_ir::testing::random_inputs`].
const FIRST: [&str; 6] = ["x / d", "d / x", "x * d", "x - d", "(x - d) / (abs(x) + 1.5)", "x"];

/// Second steps on `v`: NaN-free for every non-NaN `v` (infinities included).
const SECOND: [&str; 11] = [
    "v",
    "exp(v)",
    "tanh(v)",
    "sigmoid(v)",
    "gelu(v)",
    "log(abs(v) + 1.0)",
    "sqrt(abs(v))",
    "rsqrt(abs(v) + 0.5)",
    "pow(abs(v) + 0.5, min(abs(d), 4.0))",
    "v / d",
    "1.0 / (exp(v) + 2.0)",
];

/// Dims: 1, small primes and sizes around the vector widths (4, 8, 16 lanes) and their tails.
const DIMS: [u64; 14] = [1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 37];

fn source(seed: u64) -> (String, Vec<f64>) {
    let mut rng = SplitMix64(seed ^ 0x5041_5448_5331_3330);
    let pick =
        |rng: &mut SplitMix64, items: &[u64]| items.get(rng.below(items.len() as u64) as usize).copied().unwrap_or(1);
    let dtype = match rng.below(5) {
        0 => DType::F16,
        1 => DType::BF16,
        _ => DType::F32,
    };
    let (r, c) = (pick(&mut rng, &DIMS), pick(&mut rng, &DIMS));
    let d_shape = match rng.below(5) {
        0 => String::new(),
        1 => "1".to_string(),
        2 => format!("{r}, 1"),
        3 => format!("{c}"),
        _ => format!("{r}, {c}"),
    };
    let first = rng.pick(&FIRST).copied().unwrap_or("x");
    let second = rng.pick(&SECOND).copied().unwrap_or("v").replace('v', &format!("({first})"));
    let paths = paths(r, c);
    let mut path = || rng.pick(&paths).cloned().unwrap_or_else(|| "y".to_string());
    let (p1, p2, p3, p4, p5) = (path(), path(), path(), path(), path());
    let (op1, want1) = rng.pick(&COMPARISONS).copied().unwrap_or(("==", true));
    let (op2, want2) = rng.pick(&COMPARISONS).copied().unwrap_or(("==", true));
    let t = dtype.to_string();
    let source = format!(
        "fn f(x: {t}[{r}, {c}], d: {t}[{d_shape}]) -> (i32[{r}, {c}], bool[3, {r}, {c}]) {{
    let y = {second};
    let a = {p1};
    let b = {p2};
    let s = {p3}.reshape([1, {r}, {c}]);
    let u = {p4}.reshape([1, {r}, {c}]);
    ((a {op1} b).cast::<i32>(), concat([s, u, s], 0) {op2} {p5})
}}"
    );
    (source, vec![f64::from(u8::from(want1)), f64::from(u8::from(want2))])
}

/// Expressions of shape `[r, c]` equal to `y` element for element, each through another path.
fn paths(r: u64, c: u64) -> Vec<String> {
    let mut p = vec![
        "y".to_string(),
        "y.t().t()".to_string(),
        format!("y.reshape([{}]).reshape([{r}, {c}])", r * c),
        format!("concat([y, y], 0).slice(0, {r}, {})", 2 * r),
        format!("y.broadcast_to([2, {r}, {c}]).slice(0, 1, 2).reshape([{r}, {c}])"),
        format!("y.reshape([1, {r}, {c}]).permute([1, 2, 0]).permute([2, 0, 1]).reshape([{r}, {c}])"),
        format!("y.reshape([{r}, {c}, 1]).transpose(0, 2).transpose(0, 2).reshape([{r}, {c}])"),
    ];
    if c >= 2 {
        let k = c / 2;
        p.push(format!("concat([y.slice(1, 0, {k}), y.slice(1, {k}, {c})], 1)"));
    }
    if r >= 2 {
        // Rotate the rows by one and back.
        let rot = format!("concat([y.slice(0, 1, {r}), y.slice(0, 0, 1)], 0)");
        p.push(format!("concat([{rot}.slice(0, {m}, {r}), {rot}.slice(0, 0, {m})], 0)", m = r - 1));
    }
    p
}
