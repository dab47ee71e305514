//! Turning a [`Recipe`] into a well-typed graph, deterministically.
//!
//! Every node goes through [`Graph::push`] / [`Graph::push_typed`], so the type rules of
//! [`crate::infer`] hold by construction; a step whose op cannot be made well typed, or whose
//! result would exceed the configured rank or size, adds nothing.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::infer::{broadcast_shapes, infer};
use crate::op::{BinaryOp, CompareOp, NodeId, Op, TensorType, UnaryOp};
use crate::shape::{Bindings, Dim, Shape};

use super::GeneratedProgram;
use super::config::GenConfig;
use super::recipe::{BaseRecipe, ParamRecipe, Recipe, Step};

/// Dimension sizes: 1, small primes, powers of two, and sizes just off a tile grid (33, 65, 127)
/// or spanning several tiles (96, 100, 127), the larger ones listed twice to weigh them up.
const SIZES: [u64; 18] = [3, 1, 2, 5, 7, 13, 4, 17, 8, 31, 16, 64, 127, 33, 96, 127, 65, 100];
/// Names of shape variables, one per base axis.
const VARS: [&str; 6] = ["M", "N", "K", "B", "S", "T"];
/// Ordinary constants.
const CONSTANTS: [f64; 10] = [1.0, 0.5, 2.0, -1.0, 3.0, -0.25, 0.0, 1.5, 7.0, -4.0];
/// Special constants: infinities, NaN, signed zero, values that overflow f16 or saturate i32, tiny.
const SPECIAL: [f64; 8] = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0, 1e5, 1e-9, 3e9, -3e9];
/// Offsets `c` of the domain guard `abs(x) + c`.
const OFFSETS: [f64; 3] = [1.0, 0.5, 2.0];
/// Bound of the guard `min(x, c)` before `exp`.
const EXP_BOUND: f64 = 3.0;
/// Largest `batch * m * n * k` of a generated matmul.
const MAX_MATMUL_WORK: u64 = 1 << 22;

/// The kinds of steps, each listed as often as its weight.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Unary,
    Binary,
    Compare,
    Select,
    Cast,
    Constant,
    Broadcast,
    Reshape,
    Permute,
    Slice,
    Concat,
    Reduce,
    MatMul,
    Iota,
}

/// Builds the program a recipe describes under `cfg` (already normalized).
pub(crate) fn build(cfg: &GenConfig, recipe: &Recipe) -> GeneratedProgram {
    let mut b = Builder::new(cfg);
    b.set_base(&recipe.base);
    for p in &recipe.params {
        b.param(p);
    }
    if b.values.is_empty() {
        // Unreachable with a normalized config (every parameter is addable); kept so the
        // generator never returns a graph without outputs.
        let ty = TensorType { dtype: DType::F32, shape: Shape::scalar() };
        if let Ok(id) = b.g.add_param("p0", ty) {
            b.values.push(id);
        }
    }
    let kinds = b.kinds();
    if !kinds.is_empty() {
        for s in &recipe.steps {
            let kind = kinds[usize::from(s.kind) % kinds.len()];
            // A step that cannot be made well typed adds nothing.
            let _ = b.step(kind, s);
        }
    }
    b.set_outputs(&recipe.outputs);
    GeneratedProgram { graph: b.g, bindings: b.bindings }
}

struct Builder<'a> {
    cfg: &'a GenConfig,
    g: Graph,
    bindings: Bindings,
    /// Every value so far, in creation order (params, constants and ops).
    values: Vec<NodeId>,
    /// The base shape parameters derive from.
    base: Vec<Dim>,
    /// [`SIZES`] at most `cfg.max_dim`.
    sizes: Vec<u64>,
}

impl<'a> Builder<'a> {
    fn new(cfg: &'a GenConfig) -> Builder<'a> {
        let mut sizes: Vec<u64> = SIZES.iter().copied().filter(|&s| s <= cfg.max_dim).collect();
        if sizes.is_empty() {
            sizes.push(1);
        }
        Builder {
            cfg,
            g: Graph::new("generated"),
            bindings: Bindings::new(),
            values: Vec::new(),
            base: Vec::new(),
            sizes,
        }
    }

    fn size(&self, raw: usize) -> u64 {
        self.sizes[raw % self.sizes.len()]
    }

    fn kinds(&self) -> Vec<Kind> {
        let o = &self.cfg.ops;
        let table: [(Kind, bool, usize); 14] = [
            (Kind::Unary, !o.unary.is_empty(), 4),
            (Kind::Binary, !o.binary.is_empty(), 5),
            (Kind::Reduce, !o.reduce.is_empty(), 2),
            (Kind::MatMul, o.matmul, 1),
            (Kind::Compare, !o.compare.is_empty(), 1),
            (Kind::Select, o.select, 1),
            (Kind::Cast, o.cast, 1),
            (Kind::Constant, o.constant, 1),
            (Kind::Broadcast, o.broadcast, 1),
            (Kind::Reshape, o.reshape, 1),
            (Kind::Permute, o.permute, 1),
            (Kind::Slice, o.slice, 1),
            (Kind::Concat, o.concat, 1),
            (Kind::Iota, o.iota, 1),
        ];
        table.iter().filter(|(_, on, _)| *on).flat_map(|&(k, _, w)| std::iter::repeat_n(k, w)).collect()
    }

    // ----- shapes -------------------------------------------------------------------------------

    /// The element count of `shape` under the bindings.
    fn numel(&self, shape: &Shape) -> Option<u64> {
        shape.dims().iter().try_fold(1u64, |acc, d| acc.checked_mul(d.resolve(&self.bindings)?))
    }

    /// True if a value of `shape` is within the configured rank and size.
    fn fits(&self, shape: &Shape) -> bool {
        shape.rank() <= self.cfg.max_rank && self.numel(shape).is_some_and(|n| n <= self.cfg.max_elements)
    }

    /// Shrinks the largest constant dimensions of `dims` until the element count is at most `cap`.
    fn fit_dims(&self, dims: &mut [Dim], cap: u64) {
        while self.numel(&Shape(dims.to_vec())).is_none_or(|n| n > cap) {
            let largest = dims
                .iter_mut()
                .filter_map(|d| match d {
                    Dim::Const(n) if *n > 1 => Some(n),
                    _ => None,
                })
                .max_by_key(|n| **n);
            match largest {
                Some(n) => *n = (*n / 4).max(1),
                None => return,
            }
        }
    }

    fn set_base(&mut self, r: &BaseRecipe) {
        let ranks: Vec<usize> = [2usize, 1, 3, 4, 5, 6, 7, 8].into_iter().filter(|&k| k <= self.cfg.max_rank).collect();
        let rank = ranks.get(usize::from(r.rank) % ranks.len().max(1)).copied().unwrap_or(1);
        let mut dims: Vec<Dim> = (0..rank).map(|i| Dim::Const(self.size(usize::from(r.dims[i])))).collect();
        self.fit_dims(&mut dims, (self.cfg.max_elements / 2).max(1));
        let use_vars = self.cfg.allow_shape_vars && r.vars % 4 == 1;
        for (i, d) in dims.iter_mut().enumerate() {
            if let (true, Some(name), Dim::Const(n)) = (use_vars && (r.vars >> 2) & (1 << i) != 0, VARS.get(i), &*d) {
                self.bindings.insert((*name).to_string(), *n);
                *d = Dim::Var((*name).to_string());
            }
        }
        self.base = dims;
    }

    fn param(&mut self, r: &ParamRecipe) {
        let dtype = self.cfg.dtypes[usize::from(r.dtype) % self.cfg.dtypes.len()];
        let base = self.base.clone();
        let rank = base.len();
        let mut dims: Vec<Dim> = match r.form % 8 {
            0 | 1 => base,
            // A suffix of the base shape: broadcasts against it with a different rank.
            2 => base[(1 + usize::from(r.size) % rank.max(1)).min(rank)..].to_vec(),
            // The base shape with some axes of size 1.
            3 | 4 => {
                let mut d = base.clone();
                for (i, x) in d.iter_mut().enumerate() {
                    if (r.mask >> i) & 1 == 1 {
                        *x = Dim::Const(1);
                    }
                }
                if d == base
                    && let Some(first) = d.first_mut()
                {
                    *first = Dim::Const(1);
                }
                d
            }
            // A matmul weight `[k, n]` (or `[batch..., k, n]`) whose k is the base's last axis.
            5 => {
                let mut d = if r.mask & 1 == 1 && rank > 2 { base[..rank - 2].to_vec() } else { Vec::new() };
                d.push(base.last().cloned().unwrap_or(Dim::Const(1)));
                d.push(Dim::Const(self.size(usize::from(r.size))));
                d
            }
            // An unrelated shape of constant dimensions.
            6 => {
                let rk = usize::from(r.mask) % (self.cfg.max_rank + 1);
                (0..rk).map(|i| Dim::Const(self.size(usize::from(r.size) * (i + 1) + i * 3))).collect()
            }
            // A bias-like vector along the base's last axis.
            _ => base.last().cloned().into_iter().collect(),
        };
        dims.truncate(self.cfg.max_rank);
        self.fit_dims(&mut dims, self.cfg.max_elements);
        let name = format!("p{}", self.g.params.len());
        if let Ok(id) = self.g.add_param(name, TensorType { dtype, shape: Shape(dims) }) {
            self.values.push(id);
        }
    }

    fn set_outputs(&mut self, picks: &[u16]) {
        let Some(&last) = self.values.last() else { return };
        self.g.outputs.push(last);
        for &raw in picks {
            if let Some(v) = self.pick(raw, |_| true)
                && !self.g.outputs.contains(&v)
            {
                self.g.outputs.push(v);
            }
        }
    }

    // ----- values -------------------------------------------------------------------------------

    fn ty(&self, id: NodeId) -> Option<TensorType> {
        self.g.ty(id).cloned()
    }

    /// A value satisfying `pred`, searching back from a start chosen by `raw`: three times in four one of
    /// the three most recent values (so chains grow deep), otherwise any value; `raw = 0` starts at
    /// the most recent value.
    fn pick(&self, raw: u16, pred: impl Fn(&TensorType) -> bool) -> Option<NodeId> {
        self.pick_id(raw, |id| self.g.ty(id).is_some_and(&pred))
    }

    /// Appends `op` with its inferred type if it fits the configured sizes.
    fn add(&mut self, op: Op) -> Option<NodeId> {
        let ty = infer(&self.g, &op).ok()?;
        self.add_typed(op, ty)
    }

    /// Appends `op` with the chosen type `ty` if it is valid and fits the configured sizes.
    fn add_typed(&mut self, op: Op, ty: TensorType) -> Option<NodeId> {
        if !self.fits(&ty.shape) {
            return None;
        }
        let id = self.g.push_typed(op, ty).ok()?;
        self.values.push(id);
        Some(id)
    }

    /// Appends a constant; it becomes a candidate operand of later steps if `candidate`.
    fn constant(&mut self, value: f64, dtype: DType, candidate: bool) -> Option<NodeId> {
        let id = self.g.constant(value, dtype).ok()?;
        if candidate {
            self.values.push(id);
        }
        Some(id)
    }

    /// The broadcast of two shapes, if compatible and within the configured sizes.
    fn broadcast(&self, a: &Shape, b: &Shape) -> Option<Shape> {
        broadcast_shapes(a, b).ok().filter(|s| self.fits(s))
    }

    // ----- guards -------------------------------------------------------------------------------

    /// True if this step keeps values in the ops' domains (always, unless special values are on
    /// and the step's `w` pick is a multiple of 8).
    fn guarded(&self, s: &Step) -> bool {
        !self.cfg.special_values || !s.w.is_multiple_of(8)
    }

    fn has_unary(&self, op: UnaryOp) -> bool {
        self.cfg.ops.unary.contains(&op)
    }

    fn has_binary(&self, op: BinaryOp) -> bool {
        self.cfg.ops.binary.contains(&op)
    }

    /// `abs(a) + c` (positive, for log/sqrt/rsqrt/pow/div), or `a` if those ops are not enabled.
    fn positive(&mut self, a: NodeId, raw: u16) -> Option<NodeId> {
        if !(self.has_unary(UnaryOp::Abs) && self.has_binary(BinaryOp::Add) && self.cfg.ops.constant) {
            return Some(a);
        }
        let dtype = self.ty(a)?.dtype;
        let abs = self.add(Op::Unary(UnaryOp::Abs, a))?;
        let c = self.constant(OFFSETS[usize::from(raw) % OFFSETS.len()], dtype, false)?;
        self.add(Op::Binary(BinaryOp::Add, abs, c))
    }

    /// `min(a, 3)` (bounded above, for exp), or `a` if those ops are not enabled.
    fn bounded(&mut self, a: NodeId) -> Option<NodeId> {
        if !(self.has_binary(BinaryOp::Min) && self.cfg.ops.constant) {
            return Some(a);
        }
        let dtype = self.ty(a)?.dtype;
        let c = self.constant(EXP_BOUND, dtype, false)?;
        self.add(Op::Binary(BinaryOp::Min, a, c))
    }

    // ----- steps --------------------------------------------------------------------------------

    fn step(&mut self, kind: Kind, s: &Step) -> Option<NodeId> {
        match kind {
            Kind::Unary => self.unary(s),
            Kind::Binary => self.binary(s),
            Kind::Compare => self.compare(s),
            Kind::Select => self.select(s),
            Kind::Cast => self.cast(s),
            Kind::Constant => self.const_step(s),
            Kind::Broadcast => self.broadcast_step(s),
            Kind::Reshape => self.reshape(s),
            Kind::Permute => self.permute(s),
            Kind::Slice => self.slice(s),
            Kind::Concat => self.concat(s),
            Kind::Reduce => self.reduce(s),
            Kind::MatMul => self.matmul(s),
            Kind::Iota => self.iota(s),
        }
    }

    fn unary(&mut self, s: &Step) -> Option<NodeId> {
        let ops = &self.cfg.ops.unary;
        let op = *ops.get(usize::from(s.z) % ops.len().max(1))?;
        let a = self.pick(s.x, |t| op.accepts(t.dtype))?;
        let guarded = self.guarded(s);
        let operand = match op {
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt if guarded => self.positive(a, s.y)?,
            UnaryOp::Exp if guarded => self.bounded(a)?,
            _ => a,
        };
        self.add(Op::Unary(op, operand))
    }

    fn binary(&mut self, s: &Step) -> Option<NodeId> {
        let ops = &self.cfg.ops.binary;
        let op = *ops.get(usize::from(s.z) % ops.len().max(1))?;
        let a = self.pick(s.x, |t| op.accepts(t.dtype))?;
        let ta = self.ty(a)?;
        let b = self.pick(s.y, |t| t.dtype == ta.dtype && self.broadcast(&ta.shape, &t.shape).is_some())?;
        let (a, b) = match op {
            BinaryOp::Div if self.guarded(s) && ta.dtype.is_float() => (a, self.positive(b, s.w >> 3)?),
            BinaryOp::Pow if self.guarded(s) => {
                let base = self.positive(a, s.w >> 3)?;
                let exponent = if self.has_unary(UnaryOp::Tanh) { self.add(Op::Unary(UnaryOp::Tanh, b))? } else { b };
                (base, exponent)
            }
            _ => (a, b),
        };
        self.add(Op::Binary(op, a, b))
    }

    fn compare(&mut self, s: &Step) -> Option<NodeId> {
        let ops = &self.cfg.ops.compare;
        let op = *ops.get(usize::from(s.z) % ops.len().max(1))?;
        let a = self.pick(s.x, |_| true)?;
        let ta = self.ty(a)?;
        let b = self.pick(s.y, |t| t.dtype == ta.dtype && self.broadcast(&ta.shape, &t.shape).is_some())?;
        self.add(Op::Compare(op, a, b))
    }

    fn select(&mut self, s: &Step) -> Option<NodeId> {
        let cond = match self.pick(s.x, |t| t.dtype == DType::Bool) {
            Some(c) => c,
            None => {
                // No bool value yet: make one, `a > 0`.
                let ops = &self.cfg.ops.compare;
                let op = if ops.is_empty() { CompareOp::Gt } else { ops[usize::from(s.w) % ops.len()] };
                let a = self.pick(s.x, |t| t.dtype != DType::Bool)?;
                let zero = self.constant(0.0, self.ty(a)?.dtype, false)?;
                self.add(Op::Compare(op, a, zero))?
            }
        };
        let tc = self.ty(cond)?;
        let on_true = self.pick(s.y, |t| self.broadcast(&tc.shape, &t.shape).is_some())?;
        let tt = self.ty(on_true)?;
        let both = self.broadcast(&tc.shape, &tt.shape)?;
        let on_false = self.pick(s.z, |t| t.dtype == tt.dtype && self.broadcast(&both, &t.shape).is_some())?;
        self.add(Op::Select { cond, on_true, on_false })
    }

    fn cast(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |_| true)?;
        let ta = self.ty(a)?;
        let dtypes = &self.cfg.dtypes;
        let i = usize::from(s.z) % dtypes.len();
        let mut target = dtypes[i];
        if target == ta.dtype {
            target = dtypes[(i + 1) % dtypes.len()];
        }
        if target == ta.dtype {
            return None;
        }
        self.add_typed(Op::Cast(a), TensorType { dtype: target, shape: ta.shape })
    }

    /// Positions along one axis of an existing value (so that they combine with it), or of a
    /// configured size.
    fn iota(&mut self, s: &Step) -> Option<NodeId> {
        let len = match self.pick(s.x, |t| t.shape.rank() > 0) {
            Some(a) => {
                let dims = self.ty(a)?.shape.0.clone();
                dims.get(usize::from(s.y) % dims.len().max(1))?.clone()
            }
            None => Dim::Const(self.size(usize::from(s.z))),
        };
        self.add_typed(Op::Iota, TensorType { dtype: DType::I32, shape: Shape(vec![len]) })
    }

    fn const_step(&mut self, s: &Step) -> Option<NodeId> {
        let dtype = self.cfg.dtypes[usize::from(s.y) % self.cfg.dtypes.len()];
        let x = usize::from(s.x);
        let value = if self.guarded(s) { CONSTANTS[x % CONSTANTS.len()] } else { SPECIAL[x % SPECIAL.len()] };
        self.constant(value, dtype, true)
    }

    fn broadcast_step(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |_| true)?;
        let ta = self.ty(a)?;
        let mut dims = ta.shape.0.clone();
        for (i, d) in dims.iter_mut().enumerate() {
            if d.is_one() && (s.y >> i) & 1 == 1 {
                *d = Dim::Const(self.size(usize::from(s.z) + i));
            }
        }
        for k in 0..usize::from(s.w % 3) {
            if dims.len() < self.cfg.max_rank {
                dims.insert(0, Dim::Const(self.size(usize::from(s.z >> 4) + k)));
            }
        }
        if dims == ta.shape.0 {
            if dims.len() >= self.cfg.max_rank {
                return None;
            }
            dims.insert(0, Dim::Const(self.size(usize::from(s.z >> 8)).max(2)));
        }
        self.add_typed(Op::Broadcast(a), TensorType { dtype: ta.dtype, shape: Shape(dims) })
    }

    fn reshape(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |_| true)?;
        let ta = self.ty(a)?;
        let dims = &ta.shape.0;
        let z = usize::from(s.z);
        let new = (0..5).find_map(|attempt| reshaped(dims, (usize::from(s.y) + attempt) % 5, z, self.cfg.max_rank))?;
        self.add_typed(Op::Reshape(a), TensorType { dtype: ta.dtype, shape: Shape(new) })
    }

    fn permute(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |t| t.shape.rank() >= 2)?;
        let rank = self.ty(a)?.shape.rank();
        let mut left: Vec<usize> = (0..rank).collect();
        let mut code = usize::from(s.y);
        let mut perm = Vec::with_capacity(rank);
        for i in 0..rank {
            let k = code % (rank - i);
            code /= rank - i;
            perm.push(left.remove(k));
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            perm.swap(rank - 2, rank - 1);
        }
        self.add(Op::Permute { input: a, perm })
    }

    fn slice(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |t| t.shape.dims().iter().any(|d| matches!(d, Dim::Const(n) if *n >= 2)))?;
        let ta = self.ty(a)?;
        let axes: Vec<(usize, u64)> = ta
            .shape
            .dims()
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match d {
                Dim::Const(n) if *n >= 2 => Some((i, *n)),
                _ => None,
            })
            .collect();
        let (axis, n) = *axes.get(usize::from(s.y) % axes.len().max(1))?;
        let start = u64::from(s.z) % n;
        let mut end = start + 1 + u64::from(s.w) % (n - start);
        if start == 0 && end == n {
            end = n - 1;
        }
        self.add(Op::Slice { input: a, axis, start, end })
    }

    fn concat(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |t| t.shape.dims().iter().any(|d| d.as_const().is_some()))?;
        let ta = self.ty(a)?;
        let axes: Vec<usize> =
            ta.shape.dims().iter().enumerate().filter(|(_, d)| d.as_const().is_some()).map(|(i, _)| i).collect();
        let axis = *axes.get(usize::from(s.y) % axes.len().max(1))?;
        let joins = |t: &TensorType| {
            t.dtype == ta.dtype
                && t.shape.rank() == ta.shape.rank()
                && t.shape
                    .dims()
                    .iter()
                    .zip(ta.shape.dims())
                    .enumerate()
                    .all(|(i, (x, y))| if i == axis { x.as_const().is_some() } else { x == y })
        };
        let mut inputs = vec![a];
        for i in 0..1 + s.z % 3 {
            inputs.push(self.pick(s.w.wrapping_add(i.wrapping_mul(97)), joins)?);
        }
        self.add(Op::Concat { inputs, axis })
    }

    fn reduce(&mut self, s: &Step) -> Option<NodeId> {
        let ops = &self.cfg.ops.reduce;
        let op = *ops.get(usize::from(s.z) % ops.len().max(1))?;
        let a = self.pick(s.x, |t| op.accepts(t.dtype) && t.shape.rank() >= 1)?;
        let rank = self.ty(a)?.shape.rank();
        // Mostly the last axis (row reductions), sometimes the first, sometimes a random set.
        let mut axes: Vec<usize> = match s.y % 4 {
            0 | 1 => vec![rank - 1],
            2 => (0..rank).filter(|i| (s.y >> (2 + i)) & 1 == 1).collect(),
            _ => vec![0],
        };
        if axes.is_empty() {
            axes.push(rank - 1);
        }
        self.add(Op::Reduce { op, input: a, axes, keepdim: s.w & 1 == 1 })
    }

    fn matmul(&mut self, s: &Step) -> Option<NodeId> {
        let a = self.pick(s.x, |t| t.dtype.is_float() && t.shape.rank() >= 2)?;
        let b = match self.pick_id(s.y, |b| self.matmul_fits(a, b)) {
            Some(b) => b,
            None if self.cfg.ops.permute => {
                // `a @ a^T` always has matching inner dimensions.
                let rank = self.ty(a)?.shape.rank();
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.swap(rank - 2, rank - 1);
                let t = self.add(Op::Permute { input: a, perm })?;
                if !self.matmul_fits(a, t) {
                    return None;
                }
                t
            }
            None => return None,
        };
        self.add(Op::MatMul(a, b))
    }

    /// True if `a @ b` is well typed and within the configured sizes and work.
    fn matmul_fits(&self, a: NodeId, b: NodeId) -> bool {
        infer(&self.g, &Op::MatMul(a, b))
            .ok()
            .is_some_and(|t| self.fits(&t.shape) && self.matmul_work(a, &t) <= MAX_MATMUL_WORK)
    }

    /// Like [`Builder::pick`], with a predicate on the value's id.
    fn pick_id(&self, raw: u16, pred: impl Fn(NodeId) -> bool) -> Option<NodeId> {
        let n = self.values.len();
        let raw = usize::from(raw);
        let start = if raw & 0xC000 != 0xC000 { raw % 3 } else { raw } % n.max(1);
        (0..n).map(|k| self.values[n - 1 - (start + k) % n]).find(|&id| pred(id))
    }

    /// `batch * m * n * k` of `a @ b` whose result type is `out`.
    fn matmul_work(&self, a: NodeId, out: &TensorType) -> u64 {
        let k =
            self.ty(a).and_then(|t| t.shape.dims().last().and_then(|d| d.resolve(&self.bindings))).unwrap_or(u64::MAX);
        self.numel(&out.shape).and_then(|n| n.checked_mul(k)).unwrap_or(u64::MAX)
    }
}

/// A shape with the same element count as `dims` for every binding, by transform `which`:
/// 0 inserts a 1, 1 removes a 1, 2 merges two adjacent constant axes, 3 splits a composite constant
/// axis, 4 flattens an all-constant shape. `None` if the transform does not apply.
fn reshaped(dims: &[Dim], which: usize, z: usize, max_rank: usize) -> Option<Vec<Dim>> {
    let rank = dims.len();
    let mut d = dims.to_vec();
    match which {
        0 if rank < max_rank => d.insert(z % (rank + 1), Dim::Const(1)),
        1 => {
            let ones: Vec<usize> = (0..rank).filter(|&i| d[i].is_one()).collect();
            d.remove(*ones.get(z % ones.len().max(1))?);
        }
        2 => {
            let pairs: Vec<usize> = (0..rank.saturating_sub(1))
                .filter(|&i| d[i].as_const().is_some() && d[i + 1].as_const().is_some())
                .collect();
            let i = *pairs.get(z % pairs.len().max(1))?;
            let product = d[i].as_const()?.checked_mul(d[i + 1].as_const()?)?;
            d.splice(i..i + 2, [Dim::Const(product)]);
        }
        3 if rank < max_rank => {
            let splits: Vec<(usize, u64)> = (0..rank)
                .filter_map(|i| {
                    let n = d[i].as_const()?;
                    (2..n).take_while(|p| p * p <= n).find(|p| n % p == 0).map(|p| (i, p))
                })
                .collect();
            let (i, p) = *splits.get(z % splits.len().max(1))?;
            let n = d[i].as_const()?;
            d.splice(i..=i, [Dim::Const(p), Dim::Const(n / p)]);
        }
        4 if rank != 1 => {
            let n = d.iter().try_fold(1u64, |acc, x| acc.checked_mul(x.as_const()?))?;
            d = vec![Dim::Const(n)];
        }
        _ => return None,
    }
    Some(d)
}
