//! `tcc explain FILE`: plan a fn for a target through the pipeline and print what was chosen and
//! why: each kernel, the ops it fuses, the schedule it runs with and where that came from.

use serde_json::json;
use tcc_ir::Bindings;

use super::args::ExplainArgs;
use super::atomic::write_output;
use super::error::CliError;
use super::json;
use super::load::{load, select_fn};
use tcc::pipeline::{Pipeline, PlanOptions};

/// Runs `tcc explain`.
pub fn explain(args: &ExplainArgs) -> Result<(), CliError> {
    let target = tcc::target::resolve(args.target)?;
    let pipeline = Pipeline::new(target, &args.lock.setting())?;
    let loaded = load(&args.program.file)?;
    let graph = select_fn(&loaded, &args.program)?;
    // Unbound variables are allowed here: the cost model assumes a default size for them (and no
    // tuning record applies).
    let bindings = graph
        .shape_vars()
        .into_iter()
        .filter_map(|v| args.dims.iter().rev().find(|(n, _)| *n == v).map(|(_, value)| (v, *value)))
        .collect::<Bindings>();
    let plan = pipeline.plan(graph, &bindings, PlanOptions { explain: true, top_k: 0 })?;
    let report = &plan.report;
    if args.json {
        json::print_line(&json!({
            "function": report.function,
            "target": report.target,
            "kernels": report.kernels.len(),
            "unfused_kernels": report.unfused_kernels,
            "estimate_us": report.total_us,
            "returns": report.outputs,
        }))?;
        for (k, plan) in report.kernels.iter().zip(&plan.kernels) {
            let mut object = json::kernel_object(plan);
            object.insert("fuses".into(), json!(k.ops));
            object.insert("reads".into(), json!(k.inputs));
            object.insert("estimate_us".into(), json!(k.estimate_us));
            object.insert("bound".into(), json!(if k.memory_bound { "memory" } else { "compute" }));
            object.insert("formed_by".into(), json!(k.rules));
            if let Some(proof) = &k.explanation {
                object.insert("egg_explanation".into(), json!(proof));
            }
            json::print_line(&serde_json::Value::Object(object))?;
        }
    } else {
        print!("{report}");
    }
    if let Some(dot) = &args.dot {
        write_output(dot, report.to_dot().as_bytes(), Some(&args.program.file))?;
    }
    Ok(())
}
