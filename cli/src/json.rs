//! `--json` output: one JSON object per line. Every kernel's object has `kernel` (its name),
//! `family`, `schedule` (the canonical text of its typed schedule, `tcc_ir::ScheduleKind`) and `source` (`locked`, `cached`, `tuned`, `borrowed` or
//! `default`); commands add their own keys. Objects that describe no single kernel (headers,
//! totals) have no `kernel` key.

use serde_json::{Map, Value, json};

use super::error::CliError;
use tcc::pipeline::KernelPlan;

/// The object of one kernel's plan.
pub fn kernel_object(plan: &KernelPlan) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("kernel".into(), json!(plan.kernel));
    object.insert("family".into(), json!(plan.family));
    object.insert("schedule".into(), json!(plan.kind.to_string()));
    object.insert("source".into(), json!(plan.source.name()));
    object
}

/// Writes `value` as one line on stdout.
pub fn print_line(value: &Value) -> Result<(), CliError> {
    let line =
        serde_json::to_string(value).map_err(|e| CliError::Environment(format!("cannot encode JSON output: {e}")))?;
    println!("{line}");
    Ok(())
}
