//! Lowering checked syntax to the IR: one [`tcc_ir::Graph`] per fn, calls inlined.
//!
//! Fns are lowered callees first. Each is lowered on its own, so its errors are reported once; a call
//! to it from another fn inlines its body again under the caller's shapes, and errors that only those
//! shapes cause are reported at the call. Nodes are built only through the IR's `Graph` methods, so
//! the IR's type rules decide what is well typed, and its errors are translated into diagnostics.

mod builtins;
mod callgraph;
mod cx;
mod errors;
mod eval;
mod frame;
mod types;
mod value;

use std::collections::{HashMap, HashSet};

use tcc_ir::Graph;

use crate::ast::FnAst;
use crate::diag::Diag;
use cx::{Budget, FUNCTIONS, MAX_WORK, Program};

/// The graphs of `fns` (in source order) and the errors found, each with the fn it belongs to.
/// `broken` names items that failed to parse: calls to them fail silently.
pub(crate) fn lower_module(fns: &[FnAst], broken: HashSet<String>) -> (Vec<Graph>, Vec<(usize, Diag)>) {
    let mut diags = Vec::new();
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, f) in fns.iter().enumerate() {
        let name = f.name.text.as_str();
        if FUNCTIONS.contains(&name) {
            diags.push((
                i,
                Diag::new(format!("`{name}` is a builtin function and cannot be redefined"), f.name.sp, "builtin name")
                    .with_help("choose another name"),
            ));
        } else if let Some(&first) = by_name.get(name) {
            let mut diag =
                Diag::new(format!("the fn `{name}` is defined more than once"), f.name.sp, "defined again here");
            if let Some(first) = fns.get(first) {
                diag = diag.with_label(first.name.sp, "first defined here");
            }
            diags.push((i, diag));
        } else {
            by_name.insert(name, i);
        }
    }
    let graph = callgraph::analyze(fns, &by_name);
    diags.extend(graph.diags);
    let mut prog = Program { fns, by_name, broken, unusable: graph.recursive };
    let mut budget = Budget { ops_used: 0, work_left: MAX_WORK, suggestions_left: crate::diagnostics::MAX_SHOWN };
    let mut graphs: Vec<Graph> = fns.iter().map(|f| Graph::new(f.name.text.clone())).collect();
    for &f in &graph.order {
        let outcome = frame::lower_fn(&prog, f, &mut budget);
        diags.extend(outcome.diags.into_iter().map(|d| (f, d)));
        if !outcome.ok
            && let Some(u) = prog.unusable.get_mut(f)
        {
            *u = true;
        }
        if let Some(slot) = graphs.get_mut(f) {
            *slot = outcome.graph;
        }
        if outcome.fatal {
            break;
        }
    }
    (graphs, diags)
}
