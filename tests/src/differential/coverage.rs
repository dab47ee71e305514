//! What a run exercised: every op kind × dtype, and the shapes (dims of 1, prime dims, ranks).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use tcc_ir::testing::GeneratedProgram;
use tcc_ir::{BinaryOp, CompareOp, DType, Op, ReduceOp, UnaryOp};

/// Counts over every program a run generated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coverage {
    /// Programs counted.
    pub programs: u64,
    /// Nodes per (op kind, dtype): the result dtype, except for comparisons (the operands' dtype,
    /// since every comparison yields bool) and casts (`cast` keyed by `from->to`).
    pub ops: BTreeMap<(String, String), u64>,
    /// Values (nodes) with at least one dimension of size 1.
    pub values_with_dim_one: u64,
    /// Values with at least one dimension of a prime size (2 excluded: every power-of-two path
    /// handles it).
    pub values_with_prime_dim: u64,
    /// Rank-0 values.
    pub scalars: u64,
    /// Values counted.
    pub values: u64,
    /// How often each dimension size occurred (over every value's resolved shape).
    pub dim_sizes: BTreeMap<usize, u64>,
    /// Values per rank.
    pub ranks: BTreeMap<usize, u64>,
    /// Programs using shape variables.
    pub programs_with_shape_vars: u64,
}

/// True for a prime `n` > 2.
pub fn is_odd_prime(n: usize) -> bool {
    n > 2 && !n.is_multiple_of(2) && (3..).step_by(2).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d))
}

impl Coverage {
    /// Counts one program.
    pub fn add(&mut self, p: &GeneratedProgram) {
        self.programs += 1;
        if !p.bindings.is_empty() {
            self.programs_with_shape_vars += 1;
        }
        let g = &p.graph;
        for node in &g.nodes {
            let dtype = |id: tcc_ir::NodeId| g.nodes.get(id.index()).map_or(node.ty.dtype, |n| n.ty.dtype);
            let key = match &node.op {
                Op::Compare(_, a, _) => (node.op.kind_name(), dtype(*a).name().to_string()),
                Op::Cast(a) => ("cast".to_string(), format!("{}->{}", dtype(*a).name(), node.ty.dtype.name())),
                _ => (node.op.kind_name(), node.ty.dtype.name().to_string()),
            };
            *self.ops.entry(key).or_insert(0) += 1;
            let Some(dims) = node.ty.shape.resolve(&p.bindings) else { continue };
            self.values += 1;
            *self.ranks.entry(dims.len()).or_insert(0) += 1;
            if dims.is_empty() {
                self.scalars += 1;
            }
            if dims.contains(&1) {
                self.values_with_dim_one += 1;
            }
            if dims.iter().any(|&d| is_odd_prime(d)) {
                self.values_with_prime_dim += 1;
            }
            for d in dims {
                *self.dim_sizes.entry(d).or_insert(0) += 1;
            }
        }
    }

    /// Merges another run's counts.
    pub fn merge(&mut self, o: &Coverage) {
        self.programs += o.programs;
        self.programs_with_shape_vars += o.programs_with_shape_vars;
        self.values_with_dim_one += o.values_with_dim_one;
        self.values_with_prime_dim += o.values_with_prime_dim;
        self.scalars += o.scalars;
        self.values += o.values;
        for (k, v) in &o.ops {
            *self.ops.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &o.dim_sizes {
            *self.dim_sizes.entry(*k).or_insert(0) += v;
        }
        for (k, v) in &o.ranks {
            *self.ranks.entry(*k).or_insert(0) += v;
        }
    }

    /// Every (op kind, dtype) the IR's typing rules allow (casts: every pair of distinct dtypes), for the
    /// "each at least N times" check.
    pub fn expected() -> BTreeSet<(String, String)> {
        let mut set = BTreeSet::new();
        for d in DType::ALL {
            let name = d.name().to_string();
            for u in UnaryOp::ALL.into_iter().filter(|u| u.accepts(d)) {
                set.insert((u.name().to_string(), name.clone()));
            }
            for b in BinaryOp::ALL.into_iter().filter(|b| b.accepts(d)) {
                set.insert((b.name().to_string(), name.clone()));
            }
            for c in CompareOp::ALL {
                set.insert((c.name().to_string(), name.clone()));
            }
            for r in ReduceOp::ALL.into_iter().filter(|r| r.accepts(d)) {
                set.insert((format!("reduce_{}", r.name()), name.clone()));
            }
            for kind in ["input", "select", "broadcast", "reshape", "permute", "slice", "concat"] {
                set.insert((kind.to_string(), name.clone()));
            }
            if d.is_float() {
                set.insert(("matmul".to_string(), name.clone()));
            }
            // A cast to its own dtype is valid IR, but the generator never draws one.
            for to in DType::ALL.into_iter().filter(|&to| to != d) {
                set.insert(("cast".to_string(), format!("{}->{}", name, to.name())));
            }
        }
        set.insert(("const".to_string(), DType::F32.name().to_string()));
        set
    }

    /// The (op kind, dtype) pairs of [`Coverage::expected`] counted fewer than `min` times.
    pub fn below(&self, min: u64) -> Vec<((String, String), u64)> {
        Coverage::expected()
            .into_iter()
            .map(|k| {
                let n = self.ops.get(&k).copied().unwrap_or(0);
                (k, n)
            })
            .filter(|(_, n)| *n < min)
            .collect()
    }

    /// The report as Markdown: an op × dtype table, the cast matrix and the shape counts.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let dtypes: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        let _ = writeln!(s, "{} programs; {} values.\n", self.programs, self.values);
        let _ = writeln!(s, "| op | {} |", dtypes.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(dtypes.len()));
        let kinds: BTreeSet<&String> = self.ops.keys().filter(|(k, _)| k != "cast").map(|(k, _)| k).collect();
        let expected = Coverage::expected();
        for kind in kinds {
            let cells: Vec<String> = dtypes
                .iter()
                .map(|d| {
                    let key = (kind.clone(), (*d).to_string());
                    match (self.ops.get(&key), expected.contains(&key)) {
                        (Some(n), _) => n.to_string(),
                        (None, true) => "0".to_string(),
                        (None, false) => "-".to_string(),
                    }
                })
                .collect();
            let _ = writeln!(s, "| {kind} | {} |", cells.join(" | "));
        }
        let _ = writeln!(s, "\nCasts (rows: from, columns: to):\n");
        let _ = writeln!(s, "| from \\ to | {} |", dtypes.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(dtypes.len()));
        for from in &dtypes {
            let cells: Vec<String> = dtypes
                .iter()
                .map(|to| {
                    let key = ("cast".to_string(), format!("{from}->{to}"));
                    self.ops.get(&key).copied().unwrap_or(0).to_string()
                })
                .collect();
            let _ = writeln!(s, "| {from} | {} |", cells.join(" | "));
        }
        let pct = |n: u64| if self.values == 0 { 0.0 } else { 100.0 * n as f64 / self.values as f64 };
        let _ = writeln!(
            s,
            "\nShapes: {} values ({:.1}%) with a dim of 1, {} ({:.1}%) with an odd prime dim, {} scalars; {} programs with shape variables.",
            self.values_with_dim_one,
            pct(self.values_with_dim_one),
            self.values_with_prime_dim,
            pct(self.values_with_prime_dim),
            self.scalars,
            self.programs_with_shape_vars
        );
        let ranks: Vec<String> = self.ranks.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        let _ = writeln!(s, "Ranks: {}.", ranks.join(", "));
        let mut dims: Vec<String> =
            self.dim_sizes.iter().filter(|(d, _)| **d <= 33).map(|(d, n)| format!("{d}: {n}")).collect();
        for (lo, hi) in [(34, 127), (128, 1023), (1024, usize::MAX)] {
            let n: u64 = self.dim_sizes.range(lo..=hi).map(|(_, n)| n).sum();
            dims.push(if hi == usize::MAX { format!("{lo}+: {n}") } else { format!("{lo}-{hi}: {n}") });
        }
        let _ = writeln!(s, "Dimension sizes (size: occurrences over every value's dims): {}.", dims.join(", "));
        let below = self.below(50);
        if below.is_empty() {
            let _ = writeln!(s, "Every op × dtype the typing rules allow occurred at least 50 times.");
        } else {
            let list: Vec<String> = below.iter().map(|((k, d), n)| format!("{k}/{d} ({n})")).collect();
            let _ = writeln!(s, "Below 50: {}.", list.join(", "));
        }
        s
    }
}
