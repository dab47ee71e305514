//! The optimizer's driver, in three saturation phases with separate runners:
//!
//! 1. **algebra + layout** over op nodes, extracted by the per-op cost (DAG-aware) into a graph;
//! 2. **fusion**: kernel nodes join the classes of the values they compute;
//! 3. **schedules**: each kernel node gets its candidate schedules as alternatives;
//!
//! then DAG-aware extraction by the kernel cost model gives the best program, and banning choices
//! of the best one gives the alternatives. Every phase runs under the budget's node and iteration
//! limits (the time limit is a safety net) and the best program found so far is always returned.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use egg::{BackoffScheduler, Id, Runner, SimpleScheduler};
use tcc_ir::target::Target;
use tcc_ir::{Bindings, Graph, Program, Schedule, ValueRef};

use crate::analysis::{EG, TensorAnalysis};
use crate::convert::{to_egraph, to_graph};
use crate::cost::{kernel_estimate, op_seconds};
use crate::error::PassError;
use crate::extract::{Extraction, extract, extract_sharing};
use crate::lang::{TNode, TOp};
use crate::options::{Budget, OptimizeOptions};
use crate::program::{BuiltKernel, build_program};
use crate::report::{KernelReport, PhaseReport, Report, StopReason};
use crate::rules::{algebra, fusion, layout, rewrites, run_incremental, schedule};
use crate::target::TargetModel;

/// The optimizer's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimized {
    /// The best program the cost model found.
    pub program: Program,
    /// The graph after the algebra and layout rewrites (what the kernels were formed from).
    pub simplified: Graph,
    /// Up to `top_k` other distinct programs, best first, for the autotuner.
    pub alternatives: Vec<Program>,
    /// What happened and why.
    pub report: Report,
}

fn phase_report(name: &'static str, runner: &Runner<TNode, TensorAnalysis>) -> PhaseReport {
    let mut applied: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for it in &runner.iterations {
        for (rule, n) in &it.applied {
            *applied.entry(rule.to_string()).or_default() += n;
        }
    }
    PhaseReport {
        name,
        stop_reason: StopReason::from_egg(runner.stop_reason.as_ref()),
        iterations: runner.iterations.len(),
        nodes: runner.egraph.total_size(),
        classes: runner.egraph.number_of_classes(),
        rules_applied: applied.into_iter().collect(),
    }
}

fn runner(egraph: EG, budget: &Budget, iterations: usize) -> Runner<TNode, TensorAnalysis> {
    let limit = budget.node_limit(egraph.number_of_classes());
    Runner::default()
        .with_egraph(egraph)
        .with_node_limit(limit)
        .with_iter_limit(iterations)
        .with_time_limit(budget.time_limit)
}

/// Phase 1: algebra and layout rewrites, extracted into a graph. Falls back to `g` (with a note)
/// if anything is inconsistent.
fn simplify(g: &Graph, opts: &OptimizeOptions, notes: &mut Vec<String>) -> (Graph, PhaseReport) {
    let built = to_egraph(g, TensorAnalysis::new(Vec::new(), true), false);
    let mut rules = algebra::rules();
    rules.extend(layout::rules());
    let r = runner(built.egraph, &opts.budget, opts.budget.max_iterations)
        .with_scheduler(BackoffScheduler::default())
        .run(&rewrites(&rules));
    let report = phase_report("algebra+layout", &r);
    if !r.egraph.analysis.errors.is_empty() {
        notes.push(format!(
            "algebra phase inconsistent ({}); kept the input graph",
            r.egraph.analysis.errors.join("; ")
        ));
        return (g.clone(), report);
    }
    let target = &opts.target;
    let b = &opts.bindings;
    let cost = |eg: &EG, c: Id, n: &TNode| -> Option<f64> {
        let kids: Vec<&tcc_ir::TensorType> = n.children.iter().map(|k| &eg[*k].data.ty).collect();
        Some(op_seconds(&n.op, &eg[c].data.ty, &kids, target, b))
    };
    let simplified = extract(&r.egraph, &built.roots, &cost, &BTreeSet::new())
        .ok_or_else(|| "no extraction".to_string())
        .and_then(|ex| to_graph(g, &r.egraph, &ex, &built.roots).map_err(|e| e.to_string()))
        .and_then(|sg| tcc_ir::verify::verify(&sg).map(|()| sg).map_err(|e| e.to_string()));
    match simplified {
        Ok(sg) => (sg, report),
        Err(e) => {
            notes.push(format!("algebra phase result rejected ({e}); kept the input graph"));
            (g.clone(), report)
        }
    }
}

/// The kernel cost of a node: kernels by the model, params free, bare ops not extractable.
struct KernelCost<'a> {
    target: &'a TargetModel,
    bindings: &'a Bindings,
    memo: RefCell<HashMap<(u32, Option<u32>), f64>>,
}

impl KernelCost<'_> {
    /// The cost of node `n` of class `class`. An unscheduled kernel whose class also holds a
    /// scheduled variant of its body is not extractable: it would run `Schedule::default_for`,
    /// which no candidate list offers (the model priced that generic tiling near the candidates
    /// and picked it for the decoder layer's joined product at 64 tokens, session 20).
    fn cost(&self, eg: &EG, class: Id, n: &TNode) -> Option<f64> {
        match n.op {
            // An output of a tuple: the tuple's kernel pays.
            TOp::Input(_) | TOp::Output(_) => Some(0.0),
            TOp::Kernel { body, sched: None } if has_scheduled_variant(eg, class, body) => None,
            TOp::Kernel { body, sched } => {
                if let Some(&c) = self.memo.borrow().get(&(body, sched)) {
                    return Some(c);
                }
                let b = eg.analysis.body(body)?;
                let (schedule, penalty) = match sched {
                    Some(s) => (*eg.analysis.schedule(s)?, 1.0),
                    None => (Schedule::default_for(self.target.tier()), 1.05),
                };
                let c = kernel_estimate(b, &schedule, self.target, self.bindings).seconds * penalty;
                self.memo.borrow_mut().insert((body, sched), c);
                Some(c)
            }
            _ => None,
        }
    }
}

/// Whether class `class` holds a kernel node of `body` with a schedule.
fn has_scheduled_variant(eg: &EG, class: Id, body: u32) -> bool {
    eg[class].nodes.iter().any(|m| matches!(m.op, TOp::Kernel { body: b, sched: Some(_) } if b == body))
}

/// How a report names a value: a parameter by its name, a kernel's result by the kernel's name,
/// and output `i` of a kernel with several as `name.i`.
fn value_name(v: ValueRef, program: &Program) -> String {
    match v {
        ValueRef::Param(i) => program.params.get(i).map_or_else(|| format!("param{i}"), |p| p.name.clone()),
        ValueRef::Buffer(b) => program
            .launches
            .iter()
            .find_map(|l| Some((l, l.outputs.iter().position(|&o| o == ValueRef::Buffer(b))?)))
            .map_or_else(
                || format!("buffer{b}"),
                |(l, i)| if l.outputs.len() > 1 { format!("{}.{i}", l.kernel.name) } else { l.kernel.name.clone() },
            ),
    }
}

fn kernel_reports(program: &Program, kernels: &[BuiltKernel], eg: &EG, target: Target) -> Vec<KernelReport> {
    program
        .launches
        .iter()
        .zip(kernels)
        .map(|(l, k)| {
            let body = eg.analysis.body(k.body);
            KernelReport {
                name: l.kernel.name.clone(),
                class: l.kernel.class,
                ops: body.map(|b| b.op_kinds()).unwrap_or_default(),
                schedule: l.kernel.schedule,
                kind: l.kernel.schedule_kind(target),
                source: tcc_ir::ScheduleSource::Default,
                estimate_us: k.estimate.seconds * 1e6,
                memory_bound: k.estimate.memory_bound,
                rules: body.map(|b| b.rules.iter().map(|r| r.to_string()).collect()).unwrap_or_default(),
                inputs: l.inputs.iter().map(|v| value_name(*v, program)).collect(),
                explanation: None,
            }
        })
        .collect()
}

/// The rules on egg's proof that kernel `k` equals an op node of the graph in its class, in proof
/// order without repeats, and the proof steps walked. `None` without explanations or when no op node of the graph is there.
fn explain_kernel(eg: &mut EG, node_ids: &[Id], k: &BuiltKernel) -> Option<(Vec<String>, usize)> {
    if !eg.are_explanations_enabled() {
        return None;
    }
    let class = eg.find(k.class);
    let original = *node_ids.iter().find(|&&i| eg.find(i) == class)?;
    let kernel = eg.add_uncanonical(k.node.clone());
    if eg.find(kernel) != eg.find(original) {
        return None;
    }
    let explanation = eg.explain_id_equivalence(original, kernel);
    Some(proof_rules(&explanation.explanation_trees))
}

/// The rules of a proof, depth first (a step's own rule, then its children's proofs in order),
/// without repeats, and how many proof steps were visited.
///
/// egg's proof trees share subproofs (`Rc`): the same rewrite of a value is one `TreeTerm` however
/// many terms contain it. Each is visited once, so this is linear in the proof's size as a DAG;
/// flattening the proof (`make_flat_explanation`) copies every shared subproof into each place it
/// appears, which grows exponentially with the depth of a program.
fn proof_rules(proof: &egg::TreeExplanation<TNode>) -> (Vec<String>, usize) {
    let mut rules: Vec<String> = Vec::new();
    let mut seen_rules: HashSet<egg::Symbol> = HashSet::new();
    let mut visited: HashSet<*const egg::TreeTerm<TNode>> = HashSet::new();
    let mut stack: Vec<&Rc<egg::TreeTerm<TNode>>> = proof.iter().rev().collect();
    while let Some(term) = stack.pop() {
        if !visited.insert(Rc::as_ptr(term)) {
            continue;
        }
        for rule in [term.forward_rule, term.backward_rule].into_iter().flatten() {
            if seen_rules.insert(rule) {
                rules.push(rule.to_string());
            }
        }
        stack.extend(term.child_proofs.iter().rev().flat_map(|steps| steps.iter().rev()));
    }
    (rules, visited.len())
}

/// Alternatives: re-extract with choices of the best program banned. For each of its most
/// expensive kernels: its next-best schedules (banning the chosen node, then the next, ...), and
/// another fusion choice (banning every schedule of its body). Distinct programs, cheapest first.
fn alternatives(
    source: &Graph,
    eg: &EG,
    best: &Extraction,
    roots: &[Id],
    cost: &dyn Fn(&EG, Id, &TNode) -> Option<f64>,
    opts: &OptimizeOptions,
    chosen: &Program,
) -> Vec<Program> {
    if opts.top_k == 0 {
        return Vec::new();
    }
    // Kernels by estimated cost, most expensive first (they matter most), ties by class id.
    let mut ranked: Vec<(Id, f64)> = best
        .choice
        .iter()
        .filter(|(_, n)| matches!(n.op, TOp::Kernel { .. }))
        .map(|(c, _)| (*c, best.node_cost.get(c).copied().unwrap_or(0.0)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Programs are told apart by their debug text (derived equality says a NaN constant differs
    // from itself).
    let mut found: Vec<(f64, Program)> = Vec::new();
    let mut seen: BTreeSet<String> = [format!("{chosen:?}")].into_iter().collect();
    let mut add = |ex: &Extraction, found: &mut Vec<(f64, Program)>| {
        if let Ok((p, _)) = build_program(source, eg, ex, roots, &opts.target)
            && tcc_ir::verify::verify_program(&p).is_ok()
            && seen.insert(format!("{p:?}"))
        {
            found.push((ex.total, p));
        }
    };
    for (class, _) in ranked.iter().take(opts.top_k + 1) {
        let Some(node) = best.choice.get(class) else { continue };
        let TOp::Kernel { body, .. } = node.op else { continue };
        // Next-best schedules of this kernel.
        let mut banned: BTreeSet<(Id, TNode)> = BTreeSet::new();
        let mut current = node.clone();
        for _ in 0..opts.top_k {
            banned.insert((*class, current.clone()));
            let Some(ex) = extract(eg, roots, cost, &banned) else { break };
            add(&ex, &mut found);
            match ex.choice.get(class) {
                Some(n) if matches!(n.op, TOp::Kernel { body: b, .. } if b == body) => current = n.clone(),
                _ => break,
            }
        }
        // Another fusion choice for this value.
        let same_body: BTreeSet<(Id, TNode)> = eg[*class]
            .nodes
            .iter()
            .filter(|n| matches!(n.op, TOp::Kernel { body: b, .. } if b == body))
            .map(|n| (*class, n.clone()))
            .collect();
        if let Some(ex) = extract(eg, roots, cost, &same_body) {
            add(&ex, &mut found);
        }
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    found.into_iter().take(opts.top_k).map(|(_, p)| p).collect()
}

/// Optimizes `g` for `opts.target`: the best program by the cost model, `top_k` alternatives and
/// a report. Deterministic for a given input and options unless the time limit fires (reported).
pub fn optimize(g: &Graph, opts: &OptimizeOptions) -> Result<Optimized, PassError> {
    tcc_ir::verify::verify(g).map_err(|e| PassError::InvalidInput(e.to_string()))?;
    let mut notes = Vec::new();
    let (simplified, algebra_report) = simplify(g, opts, &mut notes);

    // Phase 2: fusion.
    let mut analysis = TensorAnalysis::new(Vec::new(), false);
    analysis.target = Some(opts.target.clone());
    analysis.bindings = opts.bindings.clone();
    let mut built = to_egraph(&simplified, analysis, opts.explain);
    let roots = built.roots.clone();
    fusion::seed_all(&mut built.egraph);
    let fused = run_incremental(
        runner(built.egraph, &opts.budget, opts.budget.max_iterations).with_scheduler(SimpleScheduler),
        &fusion::rules(),
    );
    let fusion_report = phase_report("fusion", &fused);

    // Phase 3: schedule variants, one iteration.
    let schedule_limit = opts.budget.node_limit(fused.egraph.number_of_classes()).saturating_mul(4);
    let mut scheduled = runner(fused.egraph, &opts.budget, 1)
        .with_node_limit(schedule_limit)
        .with_scheduler(SimpleScheduler)
        .run(&rewrites(&schedule::rules()));
    let mut schedule_report = phase_report("schedules", &scheduled);
    if schedule_report.stop_reason == StopReason::IterationLimit(1) {
        schedule_report.stop_reason = StopReason::Saturated; // one pass is all it needs
    }
    let eg = &scheduled.egraph;
    if !eg.analysis.errors.is_empty() {
        return Err(PassError::Internal(eg.analysis.errors.join("; ")));
    }

    let model = KernelCost { target: &opts.target, bindings: &opts.bindings, memo: RefCell::new(HashMap::new()) };
    let cost = |e: &EG, class: Id, n: &TNode| model.cost(e, class, n);
    let joined = fusion::joined_product_classes(eg);
    let best = extract_sharing(eg, &roots, &cost, &BTreeSet::new(), &joined)
        .ok_or_else(|| PassError::Internal("no kernel covers some output".into()))?;
    let (program, kernels) = build_program(&simplified, eg, &best, &roots, &opts.target)?;
    tcc_ir::verify::verify_program(&program).map_err(|e| PassError::Internal(format!("optimized program: {e}")))?;
    let alternatives = alternatives(&simplified, eg, &best, &roots, &cost, opts, &program);

    let phases = vec![algebra_report, fusion_report, schedule_report];
    let stop_reason = phases
        .iter()
        .map(|p| p.stop_reason.clone())
        .find(|r| *r != StopReason::Saturated)
        .unwrap_or(StopReason::Saturated);
    let mut kernel_reports = kernel_reports(&program, &kernels, eg, opts.target.target);
    let mut proof_steps = 0;
    if opts.explain {
        for (report, k) in kernel_reports.iter_mut().zip(&kernels) {
            if let Some((rules, steps)) = explain_kernel(&mut scheduled.egraph, &built.node_ids, k) {
                report.explanation = Some(rules);
                proof_steps += steps;
            }
        }
    }
    let kernels = kernel_reports;
    let report = Report {
        function: g.name.clone(),
        target: opts.target.name().to_string(),
        stop_reason,
        iterations: phases.iter().map(|p| p.iterations).sum(),
        egraph_nodes: phases.iter().map(|p| p.nodes).max().unwrap_or(0),
        egraph_classes: phases.iter().map(|p| p.classes).max().unwrap_or(0),
        total_us: kernels.iter().map(|k| k.estimate_us).sum(),
        outputs: program.outputs.iter().map(|v| value_name(*v, &program)).collect(),
        kernels,
        phases,
        unfused_kernels: g.nodes.iter().filter(|n| !matches!(n.op, tcc_ir::Op::Input { .. })).count(),
        alternatives: alternatives.len(),
        notes,
        proof_steps,
    };
    free_in_background(scheduled.egraph);
    Ok(Optimized { program, simplified, alternatives, report })
}

/// E-graphs of at least this many nodes are freed on a thread of their own.
const FREE_IN_BACKGROUND: usize = 100_000;

/// Frees `egraph`, on a thread of its own when it is large: a 10,000-op program's e-graph is
/// hundreds of megabytes of small allocations whose freeing took a tenth of its optimization, and
/// nothing needs to wait for it (a process that exits first leaves it to the OS).
fn free_in_background(egraph: EG) {
    if egraph.total_size() < FREE_IN_BACKGROUND {
        return;
    }
    // If no thread can be started, the closure (and the e-graph in it) is dropped right here.
    let _ = std::thread::Builder::new().name("tcc-free-egraph".into()).spawn(move || drop(egraph));
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use egg::{Symbol, TreeTerm};
    use tcc_ir::UnaryOp;

    use super::proof_rules;
    use crate::lang::{TNode, TOp};

    /// A proof whose every step rewrites two children that share one subproof: as a tree it has
    /// 2^depth steps, as a DAG depth + 1.
    fn shared_proof(depth: usize) -> Vec<Rc<TreeTerm<TNode>>> {
        let leaf = TNode::new(TOp::Input(0), Vec::new());
        let mut step = TreeTerm::new(leaf, Vec::new());
        step.forward_rule = Some(Symbol::from("rule-0"));
        let mut proof = vec![Rc::new(step)];
        for level in 1..=depth {
            let node = TNode::new(TOp::Unary(UnaryOp::Neg), vec![0.into(), 0.into()]);
            let mut step = TreeTerm::new(node, vec![proof.clone(), proof.clone()]);
            step.forward_rule = Some(Symbol::from(format!("rule-{}", level % 3)));
            proof = vec![Rc::new(step)];
        }
        proof
    }

    #[test]
    fn a_proof_is_walked_as_a_dag_not_a_tree() {
        // Flattened, this proof would have 2^60 steps; walked as a DAG, 61.
        let (rules, visited) = proof_rules(&shared_proof(60));
        assert_eq!(visited, 61);
        assert_eq!(rules, ["rule-0", "rule-2", "rule-1"]);
    }
}
