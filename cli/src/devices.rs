//! `tcc tune --devices all|0,1,...`: several GPUs of one host tune at once, one tuning per GPU
//! taking the next kernel from a shared queue. Each GPU's tuning starts its worker processes with
//! `CUDA_VISIBLE_DEVICES` set to its ordinal, so a worker's device 0 is that GPU and its
//! measurements never share a GPU with another worker's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tcc_autotune::tuning::WorkerCommand;
use tcc_ir::target::Target;

use super::error::CliError;

/// The GPUs `--devices` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicesArg {
    /// Every GPU the driver reports.
    All,
    /// These ordinals, in this order.
    List(Vec<usize>),
}

impl DevicesArg {
    /// Parses `all` or a comma-separated list of distinct ordinals (`0,1`).
    pub fn parse(text: &str) -> Result<DevicesArg, String> {
        if text.trim() == "all" {
            return Ok(DevicesArg::All);
        }
        let mut list = Vec::new();
        for part in text.split(',') {
            let ordinal: usize =
                part.trim().parse().map_err(|_| format!("`{part}` is not a GPU ordinal (use `all` or a list: 0,1)"))?;
            if list.contains(&ordinal) {
                return Err(format!("GPU {ordinal} is named twice"));
            }
            list.push(ordinal);
        }
        Ok(DevicesArg::List(list))
    }
}

/// Where each tuning of a run measures: `None` is this process's default device (no
/// `--devices`), `Some(i)` GPU `i` of the host.
pub type Device = Option<usize>;

/// The devices of a run on `target`: one default device without `--devices`; the GPUs it names
/// otherwise, checked against the driver's count. `--devices` names GPUs, so a CPU target refuses
/// it.
pub fn resolve(arg: Option<&DevicesArg>, target: Target) -> Result<Vec<Device>, CliError> {
    let Some(arg) = arg else { return Ok(vec![None]) };
    if !target.is_gpu() {
        return Err(CliError::invalid(format!(
            "--devices names GPUs; the target `{}` runs on this host's CPU (tune CPU kernels one host at a time, \
             or split a plan with --shard)",
            target.name()
        )));
    }
    let count = tcc_runtime::cuda::CudaDevice::count().map_err(|e| CliError::Environment(e.to_string()))?;
    let ordinals = match arg {
        DevicesArg::All => (0..count).collect(),
        DevicesArg::List(list) => list.clone(),
    };
    if let Some(missing) = ordinals.iter().find(|&&i| i >= count) {
        return Err(CliError::invalid(format!("--devices names GPU {missing}, but the driver reports {count}")));
    }
    if ordinals.is_empty() {
        return Err(CliError::Environment("--devices all: the driver reports no GPU".into()));
    }
    Ok(ordinals.into_iter().map(Some).collect())
}

/// The worker command of a tuning on `device`: `command` with `CUDA_VISIBLE_DEVICES` set to the
/// GPU's ordinal (unchanged for the default device).
pub fn worker_on(command: &WorkerCommand, device: Device) -> WorkerCommand {
    let mut command = command.clone();
    if let Some(ordinal) = device {
        command.env.retain(|(name, _)| name != "CUDA_VISIBLE_DEVICES");
        command.env.push(("CUDA_VISIBLE_DEVICES".into(), ordinal.to_string()));
    }
    command
}

/// Runs `work(state, index, item)` for every item, on one thread per device: each thread makes
/// its state once with `open(device)` and takes the next item from a queue shared by all, so a
/// long item on one device never holds up the others. Returns the results in item order; the
/// first error stops every thread from taking further items and is returned.
pub fn on_devices<S, T: Sync, R: Send>(
    devices: &[Device],
    items: &[T],
    open: impl Fn(Device) -> Result<S, CliError> + Sync,
    work: impl Fn(&S, usize, &T) -> Result<R, CliError> + Sync,
) -> Result<Vec<R>, CliError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let first_error: Mutex<Option<CliError>> = Mutex::new(None);
    let fail = |e: CliError| {
        failed.store(true, Ordering::SeqCst);
        let mut slot = first_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert(e);
    };
    let run = |device: Device| {
        let state = match open(device) {
            Ok(state) => state,
            Err(e) => return fail(e),
        };
        while !failed.load(Ordering::SeqCst) {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(item) = items.get(i) else { break };
            match work(&state, i, item) {
                Ok(r) => {
                    let mut all = results.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(slot) = all.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                Err(e) => fail(e),
            }
        }
    };
    match devices {
        // One device: this thread, as a run without --devices always did.
        [device] => run(*device),
        _ => std::thread::scope(|s| {
            for &device in devices {
                s.spawn(move || run(device));
            }
        }),
    }
    if let Some(e) = first_error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e);
    }
    let results = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    results
        .into_iter()
        .collect::<Option<Vec<R>>>()
        .ok_or_else(|| CliError::Environment("internal error: a kernel was never tuned".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_all_or_distinct_ordinals() {
        assert_eq!(DevicesArg::parse("all"), Ok(DevicesArg::All));
        assert_eq!(DevicesArg::parse("1, 0"), Ok(DevicesArg::List(vec![1, 0])));
        assert!(DevicesArg::parse("0,0").unwrap_err().contains("twice"));
        assert!(DevicesArg::parse("gpu0").unwrap_err().contains("not a GPU ordinal"));
    }

    #[test]
    fn a_cpu_target_refuses_devices() {
        let err = resolve(Some(&DevicesArg::All), Target::Cpu(tcc_ir::target::CpuTier::Cranelift)).unwrap_err();
        assert!(err.to_string().contains("--devices names GPUs"), "{err}");
        assert_eq!(resolve(None, Target::Cpu(tcc_ir::target::CpuTier::Cranelift)).unwrap(), vec![None]);
    }

    #[test]
    fn workers_see_only_their_gpu() {
        let command = WorkerCommand { program: "tcc".into(), args: vec!["worker".into()], env: Vec::new() };
        assert!(worker_on(&command, None).env.is_empty());
        let on_1 = worker_on(&worker_on(&command, Some(0)), Some(1));
        assert_eq!(on_1.env, vec![("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())]);
    }

    #[test]
    fn every_item_runs_once_on_some_device_and_results_keep_their_order() {
        let items: Vec<u64> = (0..40).collect();
        let devices = [Some(0), Some(1), Some(2)];
        let seen = Mutex::new(Vec::new());
        let out = on_devices(
            &devices,
            &items,
            |d| Ok(d.unwrap_or(9)),
            |device, i, item| {
                // Uneven work, so the queue hands items to whichever device is free.
                std::thread::sleep(std::time::Duration::from_millis(item % 5));
                seen.lock().unwrap().push((i, *device));
                Ok(item * 10)
            },
        )
        .unwrap();
        assert_eq!(out, items.iter().map(|x| x * 10).collect::<Vec<_>>());
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
        let used: std::collections::BTreeSet<usize> = seen.iter().map(|s| s.1).collect();
        assert_eq!(used.len(), 3, "every device took items");
    }

    #[test]
    fn the_first_error_stops_the_queue() {
        let items: Vec<u64> = (0..100).collect();
        let done = AtomicUsize::new(0);
        let item_3_failed = AtomicBool::new(false);
        let err = on_devices(
            &[Some(0), Some(1)],
            &items,
            |_| Ok(()),
            |_, i, _| {
                done.fetch_add(1, Ordering::SeqCst);
                if i == 3 {
                    item_3_failed.store(true, Ordering::SeqCst);
                    return Err(CliError::Environment("kernel 3 failed".into()));
                }
                // Later items wait for item 3's failure and then take a while, so the other
                // device cannot finish the whole queue before the failure is seen (it could on
                // a loaded machine when items took no time).
                if i > 3 {
                    while !item_3_failed.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Ok(())
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("kernel 3 failed"));
        assert!(item_3_failed.load(Ordering::SeqCst));
        let taken = done.load(Ordering::SeqCst);
        assert!(taken < 50, "{taken} items ran although item 3 failed");
        let open_fails =
            on_devices(&[Some(0)], &items, |_| Err::<(), _>(CliError::invalid("no GPU 0")), |_, _, _| Ok(()));
        assert!(open_fails.unwrap_err().to_string().contains("no GPU 0"));
    }
}
