//! Fused evaluation of one element of a value: follows index mappings (broadcast, reshape,
//! permute, slice, concat) back to loads of parameters or materialized values, and applies each
//! op's scalar semantics on the way. Evaluation never branches, so a value computed once in a
//! block is reused (memoized by node and flat index) for the rest of that block.

use std::collections::HashMap;

use tcc_ir::{DType, Graph, NodeId, Op};

use super::arch::GpuCaps;
use super::error::PtxError;
use super::math;
use super::plan::{Out, Plan, Src};
use crate::llvm_text::Func;

/// An index into a value: its flat (row-major) position, and optionally its multi-index and its
/// place in a vector of consecutive elements.
#[derive(Debug, Clone)]
pub(crate) struct Ix {
    /// Flat position (an integer of the kernel's index type).
    pub(crate) flat: String,
    /// One index per axis, when known.
    pub(crate) multi: Option<Vec<String>>,
    /// `(base, lane, width)`: `flat = base + lane`, and `base` is a multiple of `width`.
    pub(crate) vec: Option<(String, u32, u32)>,
}

impl Ix {
    /// A scalar index at `flat`.
    pub(crate) fn flat(flat: String) -> Ix {
        Ix { flat, multi: None, vec: None }
    }
}

/// Memoized values: computed elements by (node, flat index) and loaded vectors by (base, index).
pub(crate) type Memo = (HashMap<(NodeId, String), String>, HashMap<(Base, String), String>);

/// Where a load reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Base {
    /// Kernel parameter `i`.
    Param(usize),
    /// A materialized value.
    Mat(Src),
}

/// The state of one kernel entry being written.
pub(crate) struct Em<'a> {
    /// The function body.
    pub(crate) f: Func,
    /// The kernel graph.
    pub(crate) g: &'a Graph,
    /// Its plan.
    pub(crate) plan: &'a Plan,
    /// The target.
    pub(crate) caps: &'a GpuCaps,
    /// The index type (`i32` or `i64`).
    pub(crate) ix: &'static str,
    /// Values held in registers for the current element (reductions of the current row, the
    /// matmul accumulator): they take precedence over memory.
    pub(crate) env: HashMap<NodeId, String>,
    memo: HashMap<(NodeId, String), String>,
    vmemo: HashMap<(Base, String), String>,
}

impl<'a> Em<'a> {
    /// A new entry body.
    pub(crate) fn new(g: &'a Graph, plan: &'a Plan, caps: &'a GpuCaps) -> Em<'a> {
        Em {
            f: Func::new(),
            g,
            plan,
            caps,
            ix: if plan.index64 { "i64" } else { "i32" },
            env: HashMap::new(),
            memo: HashMap::new(),
            vmemo: HashMap::new(),
        }
    }

    /// Saves the memoized values: values computed inside a region that does not dominate what
    /// follows (a loop body, an `if` block) must be forgotten by [`Em::restore`] after it.
    pub(crate) fn save(&self) -> Memo {
        (self.memo.clone(), self.vmemo.clone())
    }

    /// Restores memoized values saved by [`Em::save`].
    pub(crate) fn restore(&mut self, saved: Memo) {
        self.memo = saved.0;
        self.vmemo = saved.1;
    }

    /// The dtype of node `n`.
    pub(crate) fn dtype(&self, n: NodeId) -> DType {
        self.g.nodes[n.index()].ty.dtype
    }

    /// The concrete dims of node `n`.
    pub(crate) fn dims(&self, n: NodeId) -> &'a [u64] {
        &self.plan.dims[n.index()]
    }

    /// Converts a sreg (`i32`) value to the index type.
    pub(crate) fn widen(&mut self, v: &str) -> String {
        if self.ix == "i64" { self.f.v(format!("zext i32 {v} to i64")) } else { v.to_string() }
    }

    /// Reads a special register (`tid.x`, `ctaid.x`, `ntid.x`, `nctaid.x`) as the index type.
    pub(crate) fn sreg(&mut self, name: &str) -> String {
        let v = self.f.call("i32", &format!("llvm.nvvm.read.ptx.sreg.{name}"), &[]);
        self.widen(&v)
    }

    /// `a * k + b` in the index type, folding trivial cases.
    pub(crate) fn mad(&mut self, a: &str, k: u64, b: &str) -> String {
        let t = match k {
            0 => "0".to_string(),
            1 => a.to_string(),
            _ => self.f.v(format!("mul nuw {} {a}, {k}", self.ix)),
        };
        if b == "0" {
            t
        } else if t == "0" {
            b.to_string()
        } else {
            self.f.v(format!("add nuw {} {t}, {b}", self.ix))
        }
    }

    /// The multi-index of `flat` in `dims` (row-major).
    pub(crate) fn delinearize(&mut self, flat: &str, dims: &[u64]) -> Vec<String> {
        let mut out = vec!["0".to_string(); dims.len()];
        let mut stride: u64 = 1;
        for (k, &d) in dims.iter().enumerate().rev() {
            if d > 1 {
                let q =
                    if stride == 1 { flat.to_string() } else { self.f.v(format!("udiv {} {flat}, {stride}", self.ix)) };
                // The leading non-trivial axis needs no remainder: the index is in range.
                let leading = dims[..k].iter().all(|&x| x <= 1);
                out[k] = if leading { q } else { self.f.v(format!("urem {} {q}, {d}", self.ix)) };
            }
            stride = stride.saturating_mul(d.max(1));
        }
        out
    }

    /// The flat position of a multi-index in `dims`.
    pub(crate) fn linearize(&mut self, multi: &[String], dims: &[u64]) -> String {
        let mut acc = "0".to_string();
        let mut stride: u64 = 1;
        for (k, &d) in dims.iter().enumerate().rev() {
            if d > 1 && multi[k] != "0" {
                acc = self.mad(&multi[k].clone(), stride, &acc);
            }
            stride = stride.saturating_mul(d.max(1));
        }
        acc
    }

    fn multi_of(&mut self, n: NodeId, ix: &Ix) -> Vec<String> {
        match &ix.multi {
            Some(m) => m.clone(),
            None => {
                let dims = self.dims(n);
                self.delinearize(&ix.flat, dims)
            }
        }
    }

    fn at_multi(&mut self, n: NodeId, multi: Vec<String>) -> Ix {
        let dims = self.dims(n);
        let flat = self.linearize(&multi, dims);
        Ix { flat, multi: Some(multi), vec: None }
    }

    /// The pointer expression of a base.
    fn base_ptr(&mut self, base: Base) -> String {
        match base {
            Base::Param(i) => format!("%in{i}"),
            Base::Mat(Src::Output(k)) => format!("%out{k}"),
            Base::Mat(Src::Scratch(0)) => "%scratch".to_string(),
            Base::Mat(Src::Scratch(off)) => {
                self.f.v(format!("getelementptr inbounds i8, ptr addrspace(1) %scratch, i64 {off}"))
            }
        }
    }

    /// Loads the element at `ix` of a tensor of `dtype` at `base`, as a register value.
    pub(crate) fn load(&mut self, base: Base, dtype: DType, ix: &Ix) -> Result<String, PtxError> {
        let st = math::stype(dtype);
        let size = dtype.size_bytes();
        let raw = match &ix.vec {
            Some((vbase, lane, width)) if *width > 1 => {
                let key = (base, vbase.clone());
                let vec = match self.vmemo.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let ptr = self.base_ptr(base);
                        let p = self
                            .f
                            .v(format!("getelementptr inbounds {st}, ptr addrspace(1) {ptr}, {} {vbase}", self.ix));
                        let align = (size * *width as usize).min(16);
                        let v = self.f.v(format!("load <{width} x {st}>, ptr addrspace(1) {p}, align {align}"));
                        self.vmemo.insert(key, v.clone());
                        v
                    }
                };
                self.f.v(format!("extractelement <{width} x {st}> {vec}, i32 {lane}"))
            }
            _ => {
                let ptr = self.base_ptr(base);
                let p =
                    self.f.v(format!("getelementptr inbounds {st}, ptr addrspace(1) {ptr}, {} {}", self.ix, ix.flat));
                self.f.v(format!("load {st}, ptr addrspace(1) {p}, align {size}"))
            }
        };
        math::from_storage(&mut self.f, self.caps, dtype, &raw)
    }

    /// Stores register value `v` of `dtype` at flat position `flat` of `dest`.
    pub(crate) fn store(&mut self, dest: Src, dtype: DType, flat: &str, v: &str) -> Result<(), PtxError> {
        let st = math::stype(dtype);
        let s = math::to_storage(&mut self.f, self.caps, dtype, v)?;
        let ptr = self.base_ptr(Base::Mat(dest));
        let p = self.f.v(format!("getelementptr inbounds {st}, ptr addrspace(1) {ptr}, {} {flat}", self.ix));
        self.f.op(format!("store {st} {s}, ptr addrspace(1) {p}, align {}", dtype.size_bytes()));
        Ok(())
    }

    /// Stores `width` consecutive register values of `dtype` at `base` (a multiple of `width`).
    pub(crate) fn store_vec(&mut self, dest: Src, dtype: DType, base: &str, vals: &[String]) -> Result<(), PtxError> {
        if vals.len() == 1 {
            return self.store(dest, dtype, base, &vals[0]);
        }
        let st = math::stype(dtype);
        let w = vals.len();
        let mut vec = "poison".to_string();
        for (lane, v) in vals.iter().enumerate() {
            let s = math::to_storage(&mut self.f, self.caps, dtype, v)?;
            vec = self.f.v(format!("insertelement <{w} x {st}> {vec}, {st} {s}, i32 {lane}"));
        }
        let ptr = self.base_ptr(Base::Mat(dest));
        let p = self.f.v(format!("getelementptr inbounds {st}, ptr addrspace(1) {ptr}, {} {base}", self.ix));
        let align = (dtype.size_bytes() * w).min(16);
        self.f.op(format!("store <{w} x {st}> {vec}, ptr addrspace(1) {p}, align {align}"));
        Ok(())
    }

    /// The value of node `n` at `ix`: from registers, memory (if materialized) or computed.
    pub(crate) fn eval(&mut self, n: NodeId, ix: &Ix) -> Result<String, PtxError> {
        if let Some(v) = self.env.get(&n) {
            return Ok(v.clone());
        }
        if let Some(&src) = self.plan.loc.get(&n) {
            return self.load(Base::Mat(src), self.dtype(n), ix);
        }
        self.eval_def(n, ix)
    }

    /// Computes node `n` at `ix` from its operands (even if it is materialized).
    pub(crate) fn eval_def(&mut self, n: NodeId, ix: &Ix) -> Result<String, PtxError> {
        if let Some(v) = self.env.get(&n) {
            return Ok(v.clone());
        }
        let key = (n, ix.flat.clone());
        if let Some(v) = self.memo.get(&key) {
            return Ok(v.clone());
        }
        let v = self.compute(n, ix)?;
        self.memo.insert(key, v.clone());
        Ok(v)
    }

    /// The value an output `o` of a stage stores at `ix`: computed if the stage defines it (its
    /// destination is where the node is materialized), else read from where it is.
    pub(crate) fn eval_out(&mut self, o: &Out, ix: &Ix) -> Result<String, PtxError> {
        if self.plan.loc.get(&o.node) == Some(&o.dest) { self.eval_def(o.node, ix) } else { self.eval(o.node, ix) }
    }

    /// The value of operand `a` of node `n` at the element `ix` of `n`, under broadcasting.
    pub(crate) fn operand(&mut self, n: NodeId, a: NodeId, ix: &Ix) -> Result<String, PtxError> {
        let (nd, ad) = (self.dims(n), self.dims(a));
        if nd == ad {
            return self.eval(a, ix);
        }
        if ad.iter().all(|&d| d == 1) {
            let zero = Ix { flat: "0".into(), multi: Some(vec!["0".into(); ad.len()]), vec: None };
            return self.eval(a, &zero);
        }
        let m = self.multi_of(n, ix);
        let offset = nd.len().saturating_sub(ad.len());
        let am: Vec<String> =
            ad.iter().enumerate().map(|(i, &d)| if d == 1 { "0".to_string() } else { m[offset + i].clone() }).collect();
        let aix = self.at_multi(a, am);
        self.eval(a, &aix)
    }

    fn compute(&mut self, n: NodeId, ix: &Ix) -> Result<String, PtxError> {
        let g = self.g;
        let node = &g.nodes[n.index()];
        let dtype = node.ty.dtype;
        match &node.op {
            Op::Input { index } => self.load(Base::Param(*index), dtype, ix),
            Op::Constant { value } => Ok(math::constant(dtype, *value)),
            // The element's position along the one axis, as an i32.
            Op::Iota if self.ix == "i64" => Ok(self.f.v(format!("trunc i64 {} to i32", ix.flat))),
            Op::Iota => Ok(ix.flat.clone()),
            Op::Unary(u, a) => {
                let x = self.operand(n, *a, ix)?;
                math::unary(&mut self.f, self.caps, *u, dtype, &x)
            }
            Op::Cast(a) => {
                let x = self.operand(n, *a, ix)?;
                let from = self.dtype(*a);
                math::cast(&mut self.f, self.caps, from, dtype, &x)
            }
            Op::Binary(b, x, y) => {
                let xv = self.operand(n, *x, ix)?;
                let yv = self.operand(n, *y, ix)?;
                math::binary(&mut self.f, self.caps, *b, dtype, &xv, &yv)
            }
            Op::Compare(c, x, y) => {
                let xv = self.operand(n, *x, ix)?;
                let yv = self.operand(n, *y, ix)?;
                let operand_dtype = self.dtype(*x);
                Ok(math::compare(&mut self.f, *c, operand_dtype, &xv, &yv))
            }
            Op::Select { cond, on_true, on_false } => {
                let c = self.operand(n, *cond, ix)?;
                let t = self.operand(n, *on_true, ix)?;
                let e = self.operand(n, *on_false, ix)?;
                let ty = math::ctype(dtype);
                Ok(self.f.v(format!("select i1 {c}, {ty} {t}, {ty} {e}")))
            }
            Op::Broadcast(a) => self.operand(n, *a, ix),
            Op::Reshape(a) => self.eval(*a, &Ix { flat: ix.flat.clone(), multi: None, vec: ix.vec.clone() }),
            Op::Permute { input, perm } => {
                let m = self.multi_of(n, ix);
                let mut im = vec!["0".to_string(); m.len()];
                for (i, &p) in perm.iter().enumerate() {
                    if let (Some(slot), Some(v)) = (im.get_mut(p), m.get(i)) {
                        *slot = v.clone();
                    }
                }
                let iix = self.at_multi(*input, im);
                self.eval(*input, &iix)
            }
            Op::Slice { input, axis, start, .. } => {
                let mut m = self.multi_of(n, ix);
                if *start > 0
                    && let Some(slot) = m.get_mut(*axis)
                {
                    *slot = if slot == "0" {
                        start.to_string()
                    } else {
                        self.f.v(format!("add nuw {} {slot}, {start}", self.ix))
                    };
                }
                let iix = self.at_multi(*input, m);
                self.eval(*input, &iix)
            }
            Op::Concat { inputs, axis } => self.concat(n, inputs, *axis, ix),
            Op::Reduce { .. } | Op::MatMul(..) => Err(PtxError::InvalidGraph {
                kernel: g.name.clone(),
                reason: format!("{n} ({}) is read before any stage computed it (a tcc bug)", node.op.kind_name()),
            }),
        }
    }

    /// Concat: every piece is evaluated at a clamped index (no out-of-range loads), then the one
    /// that holds the element is selected.
    fn concat(&mut self, n: NodeId, inputs: &[NodeId], axis: usize, ix: &Ix) -> Result<String, PtxError> {
        let m = self.multi_of(n, ix);
        let pos = m.get(axis).cloned().unwrap_or_else(|| "0".into());
        let ty = math::ctype(self.dtype(n));
        let mut result: Option<String> = None;
        let mut offset: u64 = 0;
        for &inp in inputs {
            let size = self.dims(inp).get(axis).copied().unwrap_or(1);
            let mut im = m.clone();
            // local = clamp(pos - offset, 0, size - 1), computed without wrapping below zero.
            let below = self.f.v(format!("icmp ult {} {pos}, {offset}", self.ix));
            let shifted = self.f.v(format!("sub {} {pos}, {offset}", self.ix));
            let low = self.f.v(format!("select i1 {below}, {} 0, {} {shifted}", self.ix, self.ix));
            let last = size.saturating_sub(1);
            let over = self.f.v(format!("icmp ugt {} {low}, {last}", self.ix));
            let local = self.f.v(format!("select i1 {over}, {} {last}, {} {low}", self.ix, self.ix));
            if let Some(slot) = im.get_mut(axis) {
                *slot = local;
            }
            let iix = self.at_multi(inp, im);
            let v = self.eval(inp, &iix)?;
            result = Some(match result {
                None => v,
                Some(prev) => {
                    let inside = self.f.v(format!("icmp uge {} {pos}, {offset}", self.ix));
                    self.f.v(format!("select i1 {inside}, {ty} {v}, {ty} {prev}"))
                }
            });
            offset += size;
        }
        result
            .ok_or_else(|| PtxError::InvalidGraph { kernel: self.g.name.clone(), reason: format!("{n}: empty concat") })
    }
}
