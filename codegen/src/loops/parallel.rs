//! Row splitting: groups the top-level nests of a loop kernel into phases and turns each phase's
//! outermost loop into rows that threads may run independently, when (and only when) different
//! rows provably write disjoint memory. Consecutive nests over the same rows fuse into one phase
//! (a softmax runs max, sum and output per row in one pass); a nest that cannot split its rows
//! runs as a serial phase.

use std::collections::HashMap;

use super::ir::{
    BufKind, Expr, ExprArena, ExprId, Extent, Index, LoopKernel, LoopRanges, MicroKernel, Phase, Stmt, VarId,
};

/// Re-plans `kernel`'s phases: unit loops removed, flat loops longer than `strip` strip-mined,
/// nests fused into row-parallel phases where that is safe.
pub fn split_rows(kernel: &mut LoopKernel, strip: u64) {
    let mut arena = ExprArena::from_exprs(std::mem::take(&mut kernel.exprs));
    let mut phases: Vec<Phase> = Vec::new();
    for nest in std::mem::take(&mut kernel.phases) {
        // A nest may be several statements (an accumulator's init, loop and store, once unit
        // loops are squeezed); they stay together in one phase.
        let mut group = squeeze(nest.body, &mut arena);
        let single = group.len() == 1 && matches!(group.first(), Some(Stmt::Loop { .. }));
        if !single {
            match phases.last_mut() {
                Some(last) if last.row_var.is_none() => last.body.extend(group),
                _ => phases.push(Phase::serial(group)),
            }
            continue;
        }
        let mut nest = group.swap_remove(0);
        if let Stmt::Loop { extent: Extent::Const(n), body, .. } = &nest
            && *n > strip
            && strip > 0
            && is_flat(body)
        {
            nest = strip_mine(nest, strip, kernel, &mut arena);
        }
        if let Some(last) = phases.last_mut()
            && let Some(fused) = fuse(last, &nest, kernel, &mut arena)
        {
            *last = fused;
            continue;
        }
        let empty = Phase::serial(Vec::new());
        match fuse(&empty, &nest, kernel, &mut arena) {
            Some(phase) => phases.push(phase),
            None => match phases.last_mut() {
                Some(last) if last.row_var.is_none() => last.body.push(nest),
                _ => phases.push(Phase::serial(vec![nest])),
            },
        }
    }
    for phase in &mut phases {
        while phase.rows < FEW_ROWS
            && let Some(collapsed) = collapse(phase, kernel, &mut arena)
        {
            *phase = collapsed;
        }
    }
    kernel.exprs = arena.into_exprs();
    kernel.phases = phases;
}

/// A row phase with fewer rows than this collapses its rows with the loop they run, when it can
/// ([`collapse`]): threads get work even where the outer loop is short (two batch entries).
const FEW_ROWS: u64 = 16;
/// ... as long as a collapsed row still has at least this many innermost iterations (finer rows
/// would cost more in calls than threads gain).
const ROW_WORK: u64 = 1 << 14;

/// `phase` with its rows collapsed with the one loop its body is (rows `r` of a body `for v in
/// 0..n { .. }` become rows `(r, v)`), when different iterations of that loop within one row
/// write disjoint memory too (checked with the row's own parts fixed: rows already differ there).
fn collapse(phase: &Phase, kernel: &mut LoopKernel, arena: &mut ExprArena) -> Option<Phase> {
    let r = phase.row_var?;
    let [Stmt::Loop { var: inner, extent: Extent::Const(n), body }] = phase.body.as_slice() else {
        return None;
    };
    if *n < 2 || Phase::serial(body.clone()).work() < ROW_WORK {
        return None;
    }
    let parts = if phase.row_parts.is_empty() { vec![(r, phase.rows)] } else { phase.row_parts.clone() };
    let zero = Index::constant(0);
    let mut pinned = body.clone();
    for &(v, _) in &parts {
        let mut memo = HashMap::new();
        pinned = pinned.iter().map(|s| substitute_stmt(s, v, &zero, arena, &mut memo)).collect();
    }
    let within = Phase { row_var: Some(*inner), rows: *n, row_parts: Vec::new(), body: pinned };
    if !rows_are_disjoint(kernel, arena, &within) {
        return None;
    }
    let row = VarId(kernel.vars);
    kernel.vars += 1;
    let mut row_parts = parts;
    row_parts.push((*inner, *n));
    Some(Phase { row_var: Some(row), rows: phase.rows.saturating_mul(*n), row_parts, body: body.clone() })
}

fn is_flat(body: &[Stmt]) -> bool {
    !body.iter().any(|b| matches!(b, Stmt::Loop { .. } | Stmt::If { .. } | Stmt::MicroKernel(_)))
}

/// Appends `nest` to `phase` as a row-parallel phase, if its outer loop matches the phase's rows
/// and every row still touches only its own block of every written buffer.
fn fuse(phase: &Phase, nest: &Stmt, kernel: &LoopKernel, arena: &mut ExprArena) -> Option<Phase> {
    let Stmt::Loop { var, extent: Extent::Const(n), body } = nest else {
        return None;
    };
    if *n < 2 {
        return None;
    }
    let (r, rows) = match phase.row_var {
        Some(r) if phase.rows == *n => (r, *n),
        None if phase.body.is_empty() => (*var, *n),
        _ => return None,
    };
    let mut memo = HashMap::new();
    let mut fused = phase.body.clone();
    fused.extend(body.iter().map(|s| substitute_stmt(s, *var, &Index::var(r), arena, &mut memo)));
    let candidate = Phase { row_var: Some(r), rows, row_parts: Vec::new(), body: fused };
    rows_are_disjoint(kernel, arena, &candidate).then_some(candidate)
}

/// Removes loops of trip count 1 (their variable is 0), so `[1, n]` nests become flat.
fn squeeze(body: Vec<Stmt>, arena: &mut ExprArena) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Loop { var, extent: Extent::Const(1), body } => {
                let zero = Index::constant(0);
                let mut m = HashMap::new();
                let inner: Vec<Stmt> = body.iter().map(|b| substitute_stmt(b, var, &zero, arena, &mut m)).collect();
                out.extend(squeeze(inner, arena));
            }
            Stmt::Loop { var, extent, body } => {
                out.push(Stmt::Loop { var, extent, body: squeeze(body, arena) });
            }
            Stmt::If { cond, body } => out.push(Stmt::If { cond, body: squeeze(body, arena) }),
            other => out.push(other),
        }
    }
    out
}

/// `for i in 0..n { body }` becomes `for b in 0..ceil(n/strip) { for j in 0..min(strip, n - strip*b) { body[i := strip*b + j] } }`.
fn strip_mine(stmt: Stmt, strip: u64, kernel: &mut LoopKernel, arena: &mut ExprArena) -> Stmt {
    let Stmt::Loop { var, extent: Extent::Const(n), body } = stmt else {
        return stmt;
    };
    let outer = VarId(kernel.vars);
    let inner = VarId(kernel.vars + 1);
    kernel.vars += 2;
    let by = Index::var(outer).scale(i64::try_from(strip).unwrap_or(i64::MAX)).add(&Index::var(inner));
    let mut memo = HashMap::new();
    let body = body.iter().map(|s| substitute_stmt(s, var, &by, arena, &mut memo)).collect();
    Stmt::Loop {
        var: outer,
        extent: Extent::Const(n.div_ceil(strip)),
        body: vec![Stmt::Loop {
            var: inner,
            extent: Extent::Tail { total: n, block: strip, outer: Index::var(outer) },
            body,
        }],
    }
}

/// `s` with loop variable `v` replaced by `by` everywhere (indices, expressions, tail extents).
pub fn substitute_stmt(
    s: &Stmt,
    v: VarId,
    by: &Index,
    arena: &mut ExprArena,
    memo: &mut HashMap<ExprId, ExprId>,
) -> Stmt {
    match s {
        Stmt::Loop { var, extent, body } => Stmt::Loop {
            var: *var,
            extent: extent.substitute(v, by),
            body: body.iter().map(|b| substitute_stmt(b, v, by, arena, memo)).collect(),
        },
        Stmt::If { cond, body } => Stmt::If {
            cond: arena.substitute(*cond, v, by, memo),
            body: body.iter().map(|b| substitute_stmt(b, v, by, arena, memo)).collect(),
        },
        Stmt::Store { buf, index, value } => {
            Stmt::Store { buf: *buf, index: index.substitute(v, by), value: arena.substitute(*value, v, by, memo) }
        }
        Stmt::AccInit { acc, value } => Stmt::AccInit { acc: *acc, value: arena.substitute(*value, v, by, memo) },
        Stmt::AccUpdate { acc, combine, value } => {
            Stmt::AccUpdate { acc: *acc, combine: *combine, value: arena.substitute(*value, v, by, memo) }
        }
        Stmt::MicroKernel(mk) => Stmt::MicroKernel(Box::new(MicroKernel {
            a_at: mk.a_at.substitute(v, by),
            b_at: mk.b_at.substitute(v, by),
            c_row: mk.c_row.substitute(v, by),
            c_col: mk.c_col.substitute(v, by),
            bound: (mk.bound.0.substitute(v, by), mk.bound.1),
            first: mk.first.substitute(v, by),
            depth: mk.depth.substitute(v, by),
            rows: mk.rows.substitute(v, by),
            cols: mk.cols.substitute(v, by),
            ..mk.as_ref().clone()
        })),
    }
}

/// True if, for every shared buffer the phase writes, every access of row `r` (writes and reads
/// alike) falls in the block `[s*r, s*r + s)` for one stride `s` per buffer.
fn rows_are_disjoint(kernel: &LoopKernel, arena: &ExprArena, phase: &Phase) -> bool {
    let Some(r) = phase.row_var else { return false };
    let mut extents = LoopRanges::default();
    extents.max.insert(r, phase.rows);
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    let mut roots = Vec::new();
    let mut tiles = Vec::new();
    for s in &phase.body {
        s.for_each_root(&mut |st| match st {
            Stmt::Loop { var, extent, .. } => {
                extents.max.insert(*var, extent.max());
                if let Extent::Tail { total, block, outer } = extent
                    && let [(o, 1)] = outer.terms.as_slice()
                    && outer.offset == 0
                {
                    extents.tails.insert(*var, (*total, i64::try_from(*block).unwrap_or(i64::MAX), Index::var(*o)));
                }
            }
            Stmt::Store { buf, index, value } => {
                writes.push((*buf, index.clone(), 1u64, 1u64, 0i64));
                roots.push(*value);
            }
            Stmt::AccInit { value, .. } | Stmt::AccUpdate { value, .. } | Stmt::If { cond: value, .. } => {
                roots.push(*value)
            }
            Stmt::MicroKernel(mk) => tiles.push(mk.as_ref().clone()),
        });
    }
    for mk in &tiles {
        // The tile writes within rows `bound` of C, whole rows of `ldc` elements; it reads its
        // own (call-local) panels.
        let first = mk.bound.0.scale(mk.ldc);
        writes.push((mk.c, first, 1, mk.bound.1.saturating_mul(u64::try_from(mk.ldc).unwrap_or(0)), 0));
        reads.push((mk.a, mk.a_at.clone()));
        reads.push((mk.b, mk.b_at.clone()));
    }
    let mut seen = vec![false; arena.len()];
    while let Some(e) = roots.pop() {
        match seen.get_mut(e.0 as usize) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        match arena.get(e) {
            Some(Expr::Load { buf, index }) => reads.push((*buf, index.clone())),
            Some(other) => roots.extend(other.operands()),
            None => {}
        }
    }
    let kind = |b| kernel.buf(b).map(|d| d.kind);
    let mut strides: HashMap<_, i64> = HashMap::new();
    for (buf, index, _, _, _) in &writes {
        match kind(*buf) {
            Some(BufKind::Local) => continue,
            Some(BufKind::Output(_) | BufKind::Scratch) => {}
            _ => return false,
        }
        let s = index.coef(r);
        if s <= 0 || *strides.entry(*buf).or_insert(s) != s {
            return false;
        }
    }
    let writes_ok = writes.iter().all(|(buf, index, mr, nr, ldc)| {
        if kind(*buf) == Some(BufKind::Local) {
            return true;
        }
        let s = strides.get(buf).copied().unwrap_or(0);
        // The last element written is `(mr-1)*ldc + nr-1` past the first.
        let span = i64::try_from(mr.saturating_sub(1)).unwrap_or(i64::MAX).saturating_mul(*ldc)
            + i64::try_from(nr.saturating_sub(1)).unwrap_or(i64::MAX);
        rest_within(index, r, s, span, &extents)
    });
    writes_ok
        && reads.iter().filter(|(b, _)| strides.contains_key(b)).all(|(buf, index)| {
            let s = strides.get(buf).copied().unwrap_or(0);
            index.coef(r) == s && rest_within(index, r, s, 0, &extents)
        })
}

/// True if `index - s*r` (plus up to `span` more elements) stays in `[0, s)` over the loop ranges.
fn rest_within(index: &Index, r: VarId, s: i64, span: i64, ranges: &LoopRanges) -> bool {
    if index.coef(r) != s {
        return false;
    }
    match ranges.range(index, &[r]) {
        Some((lo, hi)) => lo >= 0 && hi + i128::from(span) < i128::from(s),
        None => false,
    }
}
