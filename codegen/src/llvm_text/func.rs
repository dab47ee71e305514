//! [`Func`]: the lines of one function body, with fresh value names, blocks, counted loops, `if`
//! blocks, and calls with the declarations they need.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The body of one function being written.
#[derive(Debug)]
pub(crate) struct Func {
    lines: Vec<String>,
    /// The number of the next fresh name (values and [`Func::label`]s share it).
    next: u32,
    block: String,
    decls: BTreeSet<String>,
}

/// A counted loop opened by [`Func::loop_begin`]: `for i in (start..end).step_by(step)` with
/// loop-carried values.
#[derive(Debug)]
pub(crate) struct Loop {
    /// The induction variable.
    pub(crate) i: String,
    /// The loop-carried values at the top of each iteration (and, after the loop, their finals).
    pub(crate) accs: Vec<String>,
    ty: String,
    acc_tys: Vec<String>,
    inits: Vec<String>,
    start: String,
    pred: String,
    head: String,
    exit: String,
    phi_line: usize,
}

impl Func {
    /// An empty function body whose first block is `entry`, its values named from `%t1` (a PTX
    /// kernel's).
    pub(crate) fn new() -> Func {
        Func::with_entry("entry", 1)
    }

    /// An empty function body whose first block is `block`, its values named from
    /// `%t{first_name}`.
    pub(crate) fn with_entry(block: &str, first_name: u32) -> Func {
        Func { lines: vec![format!("{block}:")], next: first_name, block: block.into(), decls: BTreeSet::new() }
    }

    fn number(&mut self) -> u32 {
        let n = self.next;
        self.next += 1;
        n
    }

    /// A fresh value name.
    pub(crate) fn fresh(&mut self) -> String {
        format!("%t{}", self.number())
    }

    /// A fresh block label (without `%`).
    pub(crate) fn label(&mut self, prefix: &str) -> String {
        format!("{prefix}{}", self.number())
    }

    /// Emits `%new = rhs` and returns `%new`.
    pub(crate) fn v(&mut self, rhs: impl AsRef<str>) -> String {
        let name = self.fresh();
        self.lines.push(format!("  {name} = {}", rhs.as_ref()));
        name
    }

    /// Emits an instruction with no result.
    pub(crate) fn op(&mut self, line: impl AsRef<str>) {
        self.lines.push(format!("  {}", line.as_ref()));
    }

    /// Adds a declaration line (`declare ...`) the module must hold; each is kept once.
    pub(crate) fn declare(&mut self, decl: String) {
        self.decls.insert(decl);
    }

    /// Calls intrinsic `name` returning `ret` with typed arguments `(type, value)`; declares it.
    pub(crate) fn call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        self.declare_intrinsic(ret, name, args);
        let list = args.iter().map(|(t, v)| format!("{t} {v}")).collect::<Vec<_>>().join(", ");
        self.v(format!("call {ret} @{name}({list})"))
    }

    /// Calls a void intrinsic; declares it.
    pub(crate) fn call_void(&mut self, name: &str, args: &[(&str, &str)]) {
        self.declare_intrinsic("void", name, args);
        let list = args.iter().map(|(t, v)| format!("{t} {v}")).collect::<Vec<_>>().join(", ");
        self.op(format!("call void @{name}({list})"));
    }

    /// Declares an intrinsic `nounwind`, except barriers and warp shuffles (declared without
    /// attributes).
    fn declare_intrinsic(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) {
        let tys = args.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ");
        let attrs = if name.contains("barrier") || name.contains("shfl") { "" } else { " nounwind" };
        self.declare(format!("declare {ret} @{name}({tys}){attrs}"));
    }

    /// Starts block `label` (the previous block must have ended with a branch).
    pub(crate) fn start_block(&mut self, label: &str) {
        self.lines.push(format!("{label}:"));
        self.block = label.to_string();
    }

    /// Ends the block with an unconditional branch.
    pub(crate) fn br(&mut self, label: &str) {
        self.op(format!("br label %{label}"));
    }

    /// Opens `for i in (start..end).step_by(step)` over integers of type `ty` (unsigned compare)
    /// with loop-carried values `(type, initial value)`; the body follows, then
    /// [`Func::loop_end`].
    pub(crate) fn loop_begin(&mut self, ty: &str, start: &str, end: &str, accs: &[(String, String)]) -> Loop {
        let head = self.label("head");
        let body = self.label("body");
        let exit = self.label("exit");
        let pred = self.block.clone();
        self.br(&head);
        self.start_block(&head);
        let i = self.fresh();
        let acc_names: Vec<String> = accs.iter().map(|_| self.fresh()).collect();
        let phi_line = self.lines.len();
        self.lines.push(String::new());
        let c = self.v(format!("icmp ult {ty} {i}, {end}"));
        self.op(format!("br i1 {c}, label %{body}, label %{exit}"));
        self.start_block(&body);
        Loop {
            i,
            accs: acc_names,
            ty: ty.to_string(),
            acc_tys: accs.iter().map(|(t, _)| t.clone()).collect(),
            inits: accs.iter().map(|(_, v)| v.clone()).collect(),
            start: start.to_string(),
            pred,
            head,
            exit,
            phi_line,
        }
    }

    /// Closes a loop: advances by `step`, feeds `next` back as the loop-carried values and
    /// continues after the loop, where `lp.accs` hold the final values.
    pub(crate) fn loop_end(&mut self, lp: &Loop, step: &str, next: &[String]) {
        let inext = self.v(format!("add {} {}, {step}", lp.ty, lp.i));
        let latch = self.block.clone();
        self.br(&lp.head);
        let mut phis = format!("  {} = phi {} [ {}, %{} ], [ {inext}, %{latch} ]", lp.i, lp.ty, lp.start, lp.pred);
        for (((name, ty), init), nv) in lp.accs.iter().zip(&lp.acc_tys).zip(&lp.inits).zip(next) {
            let _ = write!(phis, "\n  {name} = phi {ty} [ {init}, %{} ], [ {nv}, %{latch} ]", lp.pred);
        }
        if let Some(line) = self.lines.get_mut(lp.phi_line) {
            *line = phis;
        }
        self.start_block(&lp.exit);
    }

    /// The label of the block being written.
    pub(crate) fn current_block(&self) -> String {
        self.block.clone()
    }

    /// Ends the block with `br i1 cond, label %yes, label %no`.
    pub(crate) fn cond_br(&mut self, cond: &str, yes: &str, no: &str) {
        self.op(format!("br i1 {cond}, label %{yes}, label %{no}"));
    }

    /// Opens `if cond { ... }`; returns the label to pass to [`Func::if_end`].
    pub(crate) fn if_begin(&mut self, cond: &str) -> String {
        let then = self.label("then");
        let cont = self.label("cont");
        self.op(format!("br i1 {cond}, label %{then}, label %{cont}"));
        self.start_block(&then);
        cont
    }

    /// Closes an `if` block.
    pub(crate) fn if_end(&mut self, cont: &str) {
        self.br(cont);
        self.start_block(cont);
    }

    /// The body's lines as text (no newline after the last) and its declarations.
    pub(crate) fn into_text(self) -> (String, BTreeSet<String>) {
        (self.lines.join("\n"), self.decls)
    }

    /// The finished body text after a final `ret void` (a PTX kernel's), and its declarations.
    pub(crate) fn finish(mut self) -> (String, BTreeSet<String>) {
        self.op("ret void");
        self.into_text()
    }
}
