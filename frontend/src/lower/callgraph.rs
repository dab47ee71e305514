//! Calls between fns: the order to lower them in (callees first) and recursion, which is an error
//! because calls are inlined.

use std::collections::HashMap;

use crate::ast::{ExprKind, FnAst};
use crate::diag::Diag;
use crate::span::Sp;

/// What the call graph says.
#[derive(Debug)]
pub(crate) struct CallGraph {
    /// Every fn, each after the fns it calls (where there is no cycle).
    pub order: Vec<usize>,
    /// Fns that close a cycle: calls to them are not inlined.
    pub recursive: Vec<bool>,
    /// One error per call that closes a cycle, with the fn it is in.
    pub diags: Vec<(usize, Diag)>,
}

/// The names on a cycle, shortened when long.
fn cycle_text(fns: &[FnAst], path: &[usize]) -> String {
    const SHOWN: usize = 8;
    let name = |i: usize| fns.get(i).map_or("?", |f| f.name.text.as_str());
    let mut parts: Vec<String> = path.iter().take(SHOWN).map(|&i| format!("`{}`", name(i))).collect();
    if path.len() > SHOWN {
        parts.push(format!("… ({} more)", path.len() - SHOWN));
    }
    if let Some(&first) = path.first() {
        parts.push(format!("`{}`", name(first)));
    }
    parts.join(" → ")
}

/// Analyzes the calls among `fns`; `by_name` maps callable names to fns.
pub(crate) fn analyze(fns: &[FnAst], by_name: &HashMap<&str, usize>) -> CallGraph {
    let edges: Vec<Vec<(usize, Sp)>> = fns
        .iter()
        .map(|f| {
            f.nodes
                .iter()
                .filter_map(|e| match &e.kind {
                    ExprKind::Call { callee, .. } => by_name.get(callee.text.as_str()).map(|&g| (g, e.sp)),
                    _ => None,
                })
                .collect()
        })
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    let n = fns.len();
    let mut state = vec![State::New; n];
    // Position of each open fn on the stack.
    let mut position = vec![0usize; n];
    let mut order = Vec::with_capacity(n);
    let mut recursive = vec![false; n];
    let mut diags = Vec::new();
    for root in 0..n {
        if state[root] != State::New {
            continue;
        }
        state[root] = State::Open;
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(top) = stack.last_mut() {
            let (f, next_edge) = *top;
            let Some(&(g, sp)) = edges.get(f).and_then(|es| es.get(next_edge)) else {
                state[f] = State::Done;
                order.push(f);
                stack.pop();
                continue;
            };
            top.1 += 1;
            match state[g] {
                State::New => {
                    state[g] = State::Open;
                    position[g] = stack.len();
                    stack.push((g, 0));
                }
                State::Open => {
                    recursive[g] = true;
                    let path: Vec<usize> = stack.get(position[g]..).unwrap_or(&[]).iter().map(|&(h, _)| h).collect();
                    let gname = fns.get(g).map_or("?", |x| x.name.text.as_str());
                    let diag = if g == f {
                        Diag::new(format!("`{gname}` calls itself"), sp, "recursive call")
                    } else {
                        Diag::new(format!("recursive call to `{gname}`"), sp, "this call closes a cycle")
                            .with_note(format!("the cycle: {}", cycle_text(fns, &path)))
                    };
                    diags
                        .push((f, diag.with_note("calls are inlined, so fns cannot call themselves, directly or not")));
                }
                State::Done => {}
            }
        }
    }
    CallGraph { order, recursive, diags }
}
