//! Typed LLVM IR text: values with their types ([`V`], [`Ty`]) and [`TypedFunc`], a [`Func`]
//! whose instructions take and return them and work the same for one lane (`float`) or many
//! (`<16 x float>`), so the CPU tier's emitters, conversions and polynomials are written once.

use std::collections::BTreeSet;
use std::fmt::{self, Write};

use super::Func;

/// An element type of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `float`.
    F32,
    /// `half` (only loaded, stored and converted).
    F16,
    /// `i64` (indices).
    I64,
    /// `i32`.
    I32,
    /// `i16` (f16/bf16 bit patterns in memory).
    I16,
    /// `i8` (bools in memory).
    I8,
    /// `i1` (conditions and bools in registers).
    I1,
    /// `ptr`.
    Ptr,
}

impl Elem {
    fn name(self) -> &'static str {
        match self {
            Elem::F32 => "float",
            Elem::F16 => "half",
            Elem::I64 => "i64",
            Elem::I32 => "i32",
            Elem::I16 => "i16",
            Elem::I8 => "i8",
            Elem::I1 => "i1",
            Elem::Ptr => "ptr",
        }
    }

    /// The short name LLVM uses in overloaded intrinsic names (`f32`, `i32`, ...).
    fn suffix(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::F16 => "f16",
            Elem::I64 => "i64",
            Elem::I32 => "i32",
            Elem::I16 => "i16",
            Elem::I8 => "i8",
            Elem::I1 => "i1",
            Elem::Ptr => "p0",
        }
    }

    /// Size in bytes of one element in memory.
    pub fn bytes(self) -> u32 {
        match self {
            Elem::F32 | Elem::I32 => 4,
            Elem::F16 | Elem::I16 => 2,
            Elem::I64 | Elem::Ptr => 8,
            Elem::I8 | Elem::I1 => 1,
        }
    }
}

/// A value type: an element type and a lane count (1 means a scalar, not a one-lane vector).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ty {
    /// The element type.
    pub elem: Elem,
    /// Lanes (1: scalar).
    pub lanes: u32,
}

impl Ty {
    /// A type of `lanes` elements.
    pub fn new(elem: Elem, lanes: u32) -> Ty {
        Ty { elem, lanes }
    }

    /// The scalar type of `elem`.
    pub fn scalar(elem: Elem) -> Ty {
        Ty { elem, lanes: 1 }
    }

    /// The same lane count with another element type.
    pub fn with(self, elem: Elem) -> Ty {
        Ty { elem, ..self }
    }

    /// The overloaded-intrinsic suffix (`f32`, `v16f32`).
    pub fn suffix(self) -> String {
        if self.lanes == 1 { self.elem.suffix().to_string() } else { format!("v{}{}", self.lanes, self.elem.suffix()) }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            f.write_str(self.elem.name())
        } else {
            write!(f, "<{} x {}>", self.lanes, self.elem.name())
        }
    }
}

/// A typed operand: an SSA name (`%t3`) or a constant literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V {
    /// The type.
    pub ty: Ty,
    /// The operand text.
    pub text: String,
}

impl fmt::Display for V {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.ty, self.text)
    }
}

/// The LLVM literal of an f32 value (hex of its exact double).
fn float_literal(x: f32) -> String {
    if x.is_nan() {
        return "0x7FF8000000000000".to_string();
    }
    format!("0x{:016X}", f64::from(x).to_bits())
}

/// Float predicates of `fcmp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FPred {
    /// Ordered equal.
    Oeq,
    /// Unordered or not equal.
    Une,
    /// Ordered and not equal.
    One,
    /// Ordered less than.
    Olt,
    /// Ordered less or equal.
    Ole,
    /// Ordered greater than.
    Ogt,
    /// Ordered greater or equal.
    Oge,
    /// Unordered or greater than.
    Ugt,
    /// Unordered or less than.
    Ult,
    /// Unordered (either operand NaN).
    Uno,
}

impl FPred {
    fn name(self) -> &'static str {
        match self {
            FPred::Oeq => "oeq",
            FPred::Une => "une",
            FPred::One => "one",
            FPred::Olt => "olt",
            FPred::Ole => "ole",
            FPred::Ogt => "ogt",
            FPred::Oge => "oge",
            FPred::Ugt => "ugt",
            FPred::Ult => "ult",
            FPred::Uno => "uno",
        }
    }
}

/// Integer predicates of `icmp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IPred {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Signed less than.
    Slt,
    /// Signed less or equal.
    Sle,
    /// Signed greater than.
    Sgt,
    /// Signed greater or equal.
    Sge,
    /// Unsigned less than.
    Ult,
    /// Unsigned less or equal.
    Ule,
    /// Unsigned greater than.
    Ugt,
    /// Unsigned greater or equal.
    Uge,
}

impl IPred {
    fn name(self) -> &'static str {
        match self {
            IPred::Eq => "eq",
            IPred::Ne => "ne",
            IPred::Slt => "slt",
            IPred::Sle => "sle",
            IPred::Sgt => "sgt",
            IPred::Sge => "sge",
            IPred::Ult => "ult",
            IPred::Ule => "ule",
            IPred::Ugt => "ugt",
            IPred::Uge => "uge",
        }
    }
}

/// The text of one function of typed values under construction: its body, the stack slots of
/// its entry block, and the declarations it needs. Its blocks are labelled `b0, b1, ...` apart
/// from its values (`%t0, %t1, ...`).
#[derive(Debug)]
pub struct TypedFunc {
    body: Func,
    allocas: String,
    labels: u32,
    /// Use `llvm.fma` for multiply-adds (else `fmul` + `fadd`).
    pub fma: bool,
}

impl TypedFunc {
    /// An empty function body; code starts in block `start`.
    pub fn new(fma: bool) -> TypedFunc {
        TypedFunc { body: Func::with_entry("start", 0), allocas: String::new(), labels: 0, fma }
    }

    /// The function definition `{signature} {...}`: an `entry` block of the stack slots that
    /// branches to `start`, then the body.
    pub fn finish(self, signature: &str) -> (String, BTreeSet<String>) {
        let (code, decls) = self.body.into_text();
        (format!("{signature} {{\nentry:\n{}  br label %start\n{code}\n}}\n", self.allocas), decls)
    }

    /// Emits `%new = <rhs>` and returns it as a value of type `ty`.
    pub fn inst(&mut self, ty: Ty, rhs: &str) -> V {
        V { ty, text: self.body.v(rhs) }
    }

    /// Emits an instruction without a result.
    pub fn line(&mut self, text: &str) {
        self.body.op(text);
    }

    /// Declares a function the module must provide (an intrinsic or an import).
    pub fn declare(&mut self, decl: String) {
        self.body.declare(decl);
    }

    /// A stack slot of type `ty` (in the entry block), as a pointer.
    pub fn alloca(&mut self, ty: Ty) -> V {
        let name = self.body.fresh();
        let align = ty.elem.bytes() * ty.lanes.next_power_of_two();
        let _ = writeln!(self.allocas, "  {name} = alloca {ty}, align {align}");
        V { ty: Ty::scalar(Elem::Ptr), text: name }
    }

    /// A new block label.
    pub fn label(&mut self) -> String {
        let n = self.labels;
        self.labels += 1;
        format!("b{n}")
    }

    /// Starts block `label` (the previous block must be terminated).
    pub fn start(&mut self, label: &str) {
        self.body.start_block(label);
    }

    /// `br label %to`.
    pub fn br(&mut self, to: &str) {
        self.body.br(to);
    }

    /// `br i1 cond, label %yes, label %no`.
    pub fn cond_br(&mut self, cond: &V, yes: &str, no: &str) {
        self.line(&format!("br {cond}, label %{yes}, label %{no}"));
    }

    /// `ret void`.
    pub fn ret(&mut self) {
        self.line("ret void");
    }

    // ---- constants ----

    /// An f32 constant in `lanes` lanes.
    pub fn fc(&self, lanes: u32, x: f32) -> V {
        Self::splat_const(Ty::new(Elem::F32, lanes), &float_literal(x))
    }

    /// An integer constant of element type `elem` in `lanes` lanes.
    pub fn ic(&self, elem: Elem, lanes: u32, x: i64) -> V {
        Self::splat_const(Ty::new(elem, lanes), &x.to_string())
    }

    /// An i1 constant.
    pub fn bc(&self, lanes: u32, b: bool) -> V {
        Self::splat_const(Ty::new(Elem::I1, lanes), if b { "true" } else { "false" })
    }

    fn splat_const(ty: Ty, lit: &str) -> V {
        let text = if ty.lanes == 1 { lit.to_string() } else { format!("splat ({} {lit})", ty.elem.name()) };
        V { ty, text }
    }

    /// An i64 constant.
    pub fn i64c(&self, x: i64) -> V {
        self.ic(Elem::I64, 1, x)
    }

    // ---- arithmetic ----

    fn bin(&mut self, op: &str, a: &V, b: &V) -> V {
        self.inst(a.ty, &format!("{op} {a}, {}", b.text))
    }

    /// `fadd`.
    pub fn fadd(&mut self, a: &V, b: &V) -> V {
        self.bin("fadd", a, b)
    }
    /// `fsub`.
    pub fn fsub(&mut self, a: &V, b: &V) -> V {
        self.bin("fsub", a, b)
    }
    /// `fmul`.
    pub fn fmul(&mut self, a: &V, b: &V) -> V {
        self.bin("fmul", a, b)
    }
    /// `fdiv`.
    pub fn fdiv(&mut self, a: &V, b: &V) -> V {
        self.bin("fdiv", a, b)
    }
    /// `fneg`.
    pub fn fneg(&mut self, a: &V) -> V {
        self.inst(a.ty, &format!("fneg {a}"))
    }
    /// Integer `add` (wrapping).
    pub fn add(&mut self, a: &V, b: &V) -> V {
        self.bin("add", a, b)
    }
    /// Integer `sub` (wrapping).
    pub fn sub(&mut self, a: &V, b: &V) -> V {
        self.bin("sub", a, b)
    }
    /// Integer `mul` (wrapping).
    pub fn mul(&mut self, a: &V, b: &V) -> V {
        self.bin("mul", a, b)
    }
    /// `and`.
    pub fn and(&mut self, a: &V, b: &V) -> V {
        self.bin("and", a, b)
    }
    /// `or`.
    pub fn or(&mut self, a: &V, b: &V) -> V {
        self.bin("or", a, b)
    }
    /// `xor`.
    pub fn xor(&mut self, a: &V, b: &V) -> V {
        self.bin("xor", a, b)
    }
    /// `sdiv` (the caller guarantees a safe divisor).
    pub fn sdiv(&mut self, a: &V, b: &V) -> V {
        self.bin("sdiv", a, b)
    }

    /// `udiv` (the caller guarantees a nonzero divisor).
    pub fn udiv(&mut self, a: &V, b: &V) -> V {
        self.bin("udiv", a, b)
    }
    /// `urem` (the caller guarantees a nonzero divisor).
    pub fn urem(&mut self, a: &V, b: &V) -> V {
        self.bin("urem", a, b)
    }

    /// `x << k` in every lane.
    pub fn shl(&mut self, x: &V, k: i64) -> V {
        let k = self.ic(x.ty.elem, x.ty.lanes, k);
        self.bin("shl", x, &k)
    }
    /// `x >> k` (logical) in every lane.
    pub fn lshr(&mut self, x: &V, k: i64) -> V {
        let k = self.ic(x.ty.elem, x.ty.lanes, k);
        self.bin("lshr", x, &k)
    }
    /// `x >> k` (arithmetic) in every lane.
    pub fn ashr(&mut self, x: &V, k: i64) -> V {
        let k = self.ic(x.ty.elem, x.ty.lanes, k);
        self.bin("ashr", x, &k)
    }

    /// `fcmp`.
    pub fn fcmp(&mut self, p: FPred, a: &V, b: &V) -> V {
        self.inst(a.ty.with(Elem::I1), &format!("fcmp {} {a}, {}", p.name(), b.text))
    }

    /// `icmp`.
    pub fn icmp(&mut self, p: IPred, a: &V, b: &V) -> V {
        self.inst(a.ty.with(Elem::I1), &format!("icmp {} {a}, {}", p.name(), b.text))
    }

    /// `select` (the condition may be a scalar `i1` with vector operands).
    pub fn select(&mut self, c: &V, a: &V, b: &V) -> V {
        self.inst(a.ty, &format!("select {c}, {a}, {b}"))
    }

    /// A conversion instruction (`bitcast`, `zext`, `sitofp`, ...) to `to`.
    pub fn conv(&mut self, op: &str, x: &V, to: Ty) -> V {
        self.inst(to, &format!("{op} {x} to {to}"))
    }

    /// Reinterprets the bits of `x` as element type `elem`.
    pub fn bitcast(&mut self, x: &V, elem: Elem) -> V {
        self.conv("bitcast", x, x.ty.with(elem))
    }

    /// Calls `name` (declared as returning `ret` and taking the operands' types).
    pub fn call(&mut self, ret: Ty, name: &str, args: &[&V]) -> V {
        let types: Vec<String> = args.iter().map(|a| a.ty.to_string()).collect();
        self.declare(format!("declare {ret} @{name}({})", types.join(", ")));
        let list: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        self.inst(ret, &format!("call {ret} @{name}({})", list.join(", ")))
    }

    /// Calls the intrinsic `llvm.<base>.<suffix of ty>` returning `ty`.
    pub fn intr(&mut self, base: &str, ty: Ty, args: &[&V]) -> V {
        let name = format!("llvm.{base}.{}", ty.suffix());
        self.call(ty, &name, args)
    }

    /// `max(a, b)`, NaN if either is NaN (`a` when they tie, as the interpreter).
    ///
    /// Three instructions on x86 (compare, `maxps`, masked move) where `llvm.maximum` takes about
    /// six: elementwise max orders no zeros (reductions use `llvm.maximum`, contract §5).
    pub fn max_nan(&mut self, a: &V, b: &V) -> V {
        self.minmax_nan(FPred::Ogt, a, b)
    }

    /// `min(a, b)`, NaN if either is NaN (`a` when they tie, as the interpreter).
    pub fn min_nan(&mut self, a: &V, b: &V) -> V {
        self.minmax_nan(FPred::Olt, a, b)
    }

    fn minmax_nan(&mut self, p: FPred, a: &V, b: &V) -> V {
        // `b` wins only if strictly better; a NaN `a` loses every comparison, so it stays.
        let better = self.fcmp(p, b, a);
        let m = self.select(&better, b, a);
        // A NaN `b` must win too.
        let b_nan = self.fcmp(FPred::Uno, b, b);
        self.select(&b_nan, b, &m)
    }

    /// `a * b + c`, fused when the CPU has FMA.
    pub fn mul_add(&mut self, a: &V, b: &V, c: &V) -> V {
        if self.fma {
            self.intr("fma", a.ty, &[a, b, c])
        } else {
            let p = self.fmul(a, b);
            self.fadd(&p, c)
        }
    }

    /// `a * k + c` with a constant `k`.
    pub fn mul_add_c(&mut self, a: &V, k: f32, c: &V) -> V {
        let k = self.fc(a.ty.lanes, k);
        self.mul_add(a, &k, c)
    }

    /// Horner evaluation of `coeffs[0] * x^(n-1) + ... + coeffs[n-1]`.
    pub fn horner(&mut self, x: &V, coeffs: &[f32]) -> V {
        let mut iter = coeffs.iter();
        let first = iter.next().copied().unwrap_or(0.0);
        let mut p = self.fc(x.ty.lanes, first);
        for &c in iter {
            let c = self.fc(x.ty.lanes, c);
            p = self.mul_add(&p, x, &c);
        }
        p
    }

    // ---- vectors ----

    /// Broadcasts the scalar `s` to `lanes` lanes.
    pub fn splat(&mut self, s: &V, lanes: u32) -> V {
        if lanes == 1 {
            return s.clone();
        }
        let ty = Ty::new(s.ty.elem, lanes);
        let one = Ty::new(s.ty.elem, 1);
        let single = self.inst(Ty::new(s.ty.elem, 1), &format!("insertelement <1 x {one}> poison, {s}, i64 0"));
        self.inst(
            ty,
            &format!("shufflevector <1 x {one}> {}, <1 x {one}> poison, <{lanes} x i32> zeroinitializer", single.text),
        )
    }

    /// Lane `lane` of vector `v`.
    pub fn extract(&mut self, v: &V, lane: u32) -> V {
        self.inst(Ty::scalar(v.ty.elem), &format!("extractelement {v}, i64 {lane}"))
    }

    /// `v` with lane `lane` replaced by the scalar `s`.
    pub fn insert(&mut self, v: &V, s: &V, lane: u32) -> V {
        self.inst(v.ty, &format!("insertelement {v}, {s}, i64 {lane}"))
    }

    // ---- memory ----

    /// The address of element `index` (an i64) of an array of `elem` at `base`.
    pub fn gep(&mut self, elem: Elem, base: &V, index: &V) -> V {
        self.inst(Ty::scalar(Elem::Ptr), &format!("getelementptr {}, {base}, {index}", elem.name()))
    }

    /// `load ty, ptr p, align a`.
    pub fn load(&mut self, ty: Ty, p: &V, align: u32) -> V {
        self.inst(ty, &format!("load {ty}, {p}, align {align}"))
    }

    /// `store v, ptr p, align a`.
    pub fn store(&mut self, v: &V, p: &V, align: u32) {
        self.line(&format!("store {v}, {p}, align {align}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_print_as_llvm_spells_them() {
        assert_eq!(Ty::new(Elem::F32, 16).to_string(), "<16 x float>");
        assert_eq!(Ty::scalar(Elem::I1).to_string(), "i1");
        assert_eq!(Ty::new(Elem::F32, 16).suffix(), "v16f32");
        assert_eq!(float_literal(1.0), "0x3FF0000000000000");
        let f = TypedFunc::new(true);
        assert_eq!(f.fc(8, 0.5).to_string(), "<8 x float> splat (float 0x3FE0000000000000)");
    }
}
