//! [`ModuleText`]: an NVPTX module of LLVM IR text: kernel entries (each a [`Func`] body),
//! shared-memory globals, declarations and the `nvvm.annotations` that mark the entries.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::llvm_text::Func;
use crate::symbols;

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
