//! A small writer of LLVM IR text: fresh value names, blocks, counted loops and `if` blocks.
//!
//! The PTX backend writes LLVM IR as text and lets LLVM parse and verify it: the text is easy to
//! read, dump (`--emit llvm`) and test, and a mistake in it is a verifier error, never a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::symbols;

/// The body of one function being written.
#[derive(Debug, Default)]
pub(crate) struct Func {
    lines: Vec<String>,
    next: u32,
    block: String,
    /// Declarations of the intrinsics this function calls.
    pub(crate) decls: BTreeSet<String>,
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
    /// An empty function body whose first block is `entry`.
    pub(crate) fn new() -> Func {
        Func { lines: vec!["entry:".into()], next: 0, block: "entry".into(), decls: BTreeSet::new() }
    }

    /// A fresh value name.
    pub(crate) fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%t{}", self.next)
    }

    /// A fresh block label (without `%`).
    pub(crate) fn label(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
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

    /// Calls intrinsic `name` returning `ret` with typed arguments `(type, value)`; declares it.
    pub(crate) fn call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        self.declare(ret, name, args);
        let list = args.iter().map(|(t, v)| format!("{t} {v}")).collect::<Vec<_>>().join(", ");
        self.v(format!("call {ret} @{name}({list})"))
    }

    /// Calls a void intrinsic; declares it.
    pub(crate) fn call_void(&mut self, name: &str, args: &[(&str, &str)]) {
        self.declare("void", name, args);
        let list = args.iter().map(|(t, v)| format!("{t} {v}")).collect::<Vec<_>>().join(", ");
        self.op(format!("call void @{name}({list})"));
    }

    fn declare(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) {
        let tys = args.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ");
        let attrs = if name.contains("barrier") || name.contains("shfl") { "" } else { " nounwind" };
        self.decls.insert(format!("declare {ret} @{name}({tys}){attrs}"));
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

    /// The finished body text (after a final `ret void`).
    pub(crate) fn finish(mut self) -> (String, BTreeSet<String>) {
        self.op("ret void");
        (self.lines.join("\n"), self.decls)
    }
}

/// A module being written: kernels, shared-memory globals and declarations.
#[derive(Debug, Default)]
pub(crate) struct ModuleText {
    /// `;` comment lines after the target triple (none in a kernel's own module).
    comments: Vec<String>,
    /// (name, definition line).
    globals: Vec<(String, String)>,
    decls: BTreeSet<String>,
    funcs: Vec<String>,
    kernels: Vec<(String, u32, Vec<usize>)>,
}

impl ModuleText {
    /// Adds a kernel entry `name(params)` whose blocks have `block_threads` threads.
    pub(crate) fn add_kernel(&mut self, name: &str, params: &[String], body: Func, block_threads: u32) {
        self.add_kernel_with_grid_constants(name, params, body, block_threads, &[]);
    }

    /// [`Self::add_kernel`] where the parameters at the 0-based positions `grid_constants` are
    /// `byval` structs read in place (`grid_constant`: their address is the parameter's own, as
    /// TMA tensor maps need, never a copy in local memory).
    pub(crate) fn add_kernel_with_grid_constants(
        &mut self,
        name: &str,
        params: &[String],
        body: Func,
        block_threads: u32,
        grid_constants: &[usize],
    ) {
        let (text, decls) = body.finish();
        self.decls.extend(decls);
        self.funcs.push(format!("define void @{name}({}) {{\n{text}\n}}", params.join(", ")));
        self.kernels.push((name.to_string(), block_threads, grid_constants.to_vec()));
    }

    /// Declares a static shared-memory array `[count x elem]` named `name`.
    pub(crate) fn add_shared(&mut self, name: &str, elem: &str, count: u64) {
        let line = format!("@{name} = internal addrspace(3) global [{count} x {elem}] undef, align 16");
        self.globals.push((name.to_string(), line));
    }

    /// Declares the dynamic shared-memory array `name` (its size is given at launch).
    pub(crate) fn add_extern_shared(&mut self, name: &str) {
        self.globals.push((name.to_string(), format!("@{name} = external addrspace(3) global [0 x i8], align 16")));
    }

    /// Adds a `;` comment line at the top of the module (after the target triple).
    pub(crate) fn add_comment(&mut self, text: &str) {
        self.comments.push(format!("; {}", symbols::comment_text(text)));
    }

    /// The names this module defines: its entries and its shared-memory globals.
    pub(crate) fn defined_symbols(&self) -> BTreeSet<String> {
        self.kernels
            .iter()
            .map(|(name, ..)| name.clone())
            .chain(self.globals.iter().map(|(name, _)| name.clone()))
            .collect()
    }

    /// The declarations this module makes (`declare ...` lines).
    pub(crate) fn declarations(&self) -> impl Iterator<Item = &str> {
        self.decls.iter().map(String::as_str)
    }

    /// Moves everything `other` defines and declares into this module, its defined symbols
    /// renamed by `map` (entries, globals and every reference to them in its functions).
    /// Identical declarations are kept once; the caller checks that no two declarations of one
    /// name differ.
    pub(crate) fn append_renamed(&mut self, other: ModuleText, map: &BTreeMap<String, String>) {
        let rename = |name: String| map.get(&name).cloned().unwrap_or(name);
        self.comments.extend(other.comments);
        self.globals.extend(other.globals.into_iter().map(|(name, line)| (rename(name), symbols::rename(&line, map))));
        self.decls.extend(other.decls);
        self.funcs.extend(other.funcs.iter().map(|f| symbols::rename(f, map)));
        self.kernels.extend(other.kernels.into_iter().map(|(name, threads, gc)| (rename(name), threads, gc)));
    }

    /// The module text.
    pub(crate) fn finish(&self) -> String {
        let mut out = String::from("target triple = \"nvptx64-nvidia-cuda\"\n\n");
        if !self.comments.is_empty() {
            for c in &self.comments {
                let _ = writeln!(out, "{c}");
            }
            out.push('\n');
        }
        for (_, g) in &self.globals {
            let _ = writeln!(out, "{g}");
        }
        out.push('\n');
        for d in &self.decls {
            let _ = writeln!(out, "{d}");
        }
        out.push('\n');
        for f in &self.funcs {
            let _ = writeln!(out, "{f}\n");
        }
        let mut md = Vec::new();
        let mut ids = Vec::new();
        for (name, threads, grid_constants) in &self.kernels {
            ids.push(format!("!{}", md.len()));
            md.push(format!("!{} = !{{ptr @{name}, !\"kernel\", i32 1}}", md.len()));
            ids.push(format!("!{}", md.len()));
            md.push(format!("!{} = !{{ptr @{name}, !\"maxntidx\", i32 {threads}}}", md.len()));
            // Without a minimum, ptxas may cap registers for occupancy and spill (seen on sm_90a).
            ids.push(format!("!{}", md.len()));
            md.push(format!("!{} = !{{ptr @{name}, !\"minctasm\", i32 1}}", md.len()));
            if !grid_constants.is_empty() {
                // 1-based parameter indices (LLVM 19's NVPTX form).
                let list: Vec<String> = grid_constants.iter().map(|i| format!("i32 {}", i + 1)).collect();
                ids.push(format!("!{}", md.len()));
                md.push(format!("!{} = !{{ptr @{name}, !\"grid_constant\", !{}}}", md.len(), md.len() + 1));
                md.push(format!("!{} = !{{{}}}", md.len(), list.join(", ")));
            }
        }
        let _ = writeln!(out, "!nvvm.annotations = !{{{}}}", ids.join(", "));
        for m in md {
            let _ = writeln!(out, "{m}");
        }
        out
    }
}
