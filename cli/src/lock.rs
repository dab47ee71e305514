//! `tcc lock --plan FILE -o OUT`: the lockfile of a whole tuning plan, from the tuning caches
//! (local and shared) alone, measuring nothing. Each kernel takes the winner measured for its
//! exact key (this machine's kind of device) by this code generator, on any host
//! ([`tcc_autotune::Layered::winner`]). A kernel without one is named and the command exits 2
//! (the caches, not the plan, lack something: contract §4) without writing the lockfile.

use tcc_autotune::tuning::{Layered, LockEntry, Lockfile, Tuning, worker_command};

use super::args::LockPlanArgs;
use super::atomic::write_output;
use super::error::CliError;
use super::plan_file::read_plan;
use super::plan_kernels::list;
use super::tune::tuning_error;

/// Runs `tcc lock`.
pub fn lock(args: &LockPlanArgs) -> Result<(), CliError> {
    let entries = read_plan(&args.plan)?;
    let worker = worker_command().map_err(tuning_error)?;
    let open = |target| -> Result<Tuning, CliError> {
        let cache =
            Layered::open_default().map_err(|e| CliError::Environment(format!("cannot open the tuning cache: {e}")))?;
        Ok(Tuning::for_target(cache, target, worker.clone()).map_err(tuning_error)?.with_space_limit(args.space))
    };
    let listed = list(&entries, args.target, args.top_k, open)?;
    let mut lockfile = Lockfile::new();
    let mut missing = Vec::new();
    for k in &listed.kernels {
        match listed.tuning(k.target)?.cache().winner(&k.key) {
            Some(record) => lockfile.insert(LockEntry {
                key: record.key.clone(),
                variant: record.variant,
                schedule: record.schedule,
                schedule_format: record.schedule_format,
                time_ns: record.time_ns,
            }),
            None => missing.push(format!(
                "`{}` {} on {} ({})",
                k.kernel.name,
                &k.id.as_str()[..12],
                k.target.name(),
                k.entries.join(", ")
            )),
        }
    }
    if !missing.is_empty() {
        return Err(CliError::Environment(format!(
            "{} of the plan's {} kernels have no winner in the tuning caches, so no lockfile was written: {}; tune \
             them with `tcc tune --plan {}`",
            missing.len(),
            listed.kernels.len(),
            missing.join(", "),
            args.plan.display()
        )));
    }
    let text = lockfile.to_text().map_err(|e| CliError::Environment(format!("cannot encode the lockfile: {e}")))?;
    write_output(&args.out, text.as_bytes(), Some(args.plan.as_path()))?;
    eprintln!(
        "lockfile {}: {} entries for the plan's {} kernels (digest {})",
        args.out.display(),
        lockfile.len(),
        listed.kernels.len(),
        listed.digest()
    );
    Ok(())
}
