//! `tcc bench --workloads FILE --suite cpu --out FILE [--report DIR] [--peers FILE]...`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use tcc_report::{BenchRow, Ceilings, ComputeCeiling, ReportInput};

use super::args::BenchArgs;
use super::atomic::write_output;
use super::error::CliError;
use crate::bench::{Timing, bench_with_baseline, load_suite};
use crate::engine::Engine;

/// Runs `tcc bench`.
pub fn bench(args: &BenchArgs) -> Result<(), CliError> {
    let gpu_target = args.target == "cuda";
    match (args.suite.as_str(), gpu_target) {
        ("cpu", false) | ("gpu", true) => {}
        ("cpu", true) => return Err(CliError::invalid("the cpu suite runs on a CPU target (--target cpu)")),
        ("gpu", false) => return Err(CliError::invalid("the gpu suite runs on a GPU target (--target cuda)")),
        (other, _) => return Err(CliError::invalid(format!("unknown suite `{other}`; suites are cpu and gpu"))),
    }
    let engine = Engine::for_target(&args.target).map_err(|e| match e {
        crate::engine::EngineError::UnknownTarget(_) => CliError::invalid(e.to_string()),
        other => CliError::Environment(other.to_string()),
    })?;
    if matches!(engine, Engine::Interp) {
        return Err(CliError::invalid("the interpreter is the reference, not a benchmark target"));
    }
    let mut workloads = load_suite(&args.workloads, &args.suite).map_err(|e| CliError::invalid(e.to_string()))?;
    if let Some(only) = &args.only {
        let keep: Vec<&str> = only.split(',').map(str::trim).collect();
        let unknown: Vec<&&str> = keep.iter().filter(|k| !workloads.iter().any(|w| w.name == **k)).collect();
        if !unknown.is_empty() {
            return Err(CliError::invalid(format!("no workloads named {unknown:?} in the {} suite", args.suite)));
        }
        workloads.retain(|w| keep.contains(&w.name.as_str()));
    }
    let peers = read_peers(args)?;

    let progress = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(workloads.len() as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed} < {eta}]") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut rows = Vec::new();
    for w in &workloads {
        progress.set_message(w.name.clone());
        let result = bench_with_baseline(&engine, w, Timing::default(), args.seed)
            .map_err(|e| CliError::Environment(format!("workload `{}`: {e}", w.name)))?;
        for row in result.rows {
            // `suspend` prints above a visible bar and plainly when stderr is not a terminal.
            let line = format!(
                "{:28} {:22} {:10.4} ms {:9.1} GFLOP/s {:8.1} GB/s err {}",
                row.workload,
                row.implementation,
                row.median_ms,
                row.gflops.unwrap_or(0.0),
                row.gbps.unwrap_or(0.0),
                row.max_rel_err.map_or_else(|| "-".to_string(), |e| format!("{e:.1e}"))
            );
            progress.suspend(|| eprintln!("{line}"));
            rows.push(row);
        }
        for note in result.notes {
            progress.suspend(|| eprintln!("  {note}"));
        }
        progress.inc(1);
    }
    progress.finish_and_clear();

    let mut jsonl = String::new();
    for row in &rows {
        let line =
            serde_json::to_string(row).map_err(|e| CliError::Environment(format!("cannot encode a row: {e}")))?;
        jsonl.push_str(&line);
        jsonl.push('\n');
    }
    write_output(&args.out, jsonl.as_bytes(), Some(&args.workloads))?;

    if let Some(dir) = &args.report {
        let (ceilings, device) = measure_ceilings(&engine)?;
        let date = ceilings.measured_at.clone();
        // Baselines measured in this process (cuBLAS) are peers in the report, not tcc's rows.
        let (rows, baselines): (Vec<BenchRow>, Vec<BenchRow>) =
            rows.into_iter().partition(|r| r.implementation.starts_with("tcc"));
        let peers = baselines.into_iter().chain(peers).collect();
        let input = ReportInput {
            rows,
            peers,
            ceilings,
            device,
            date,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        };
        let files = tcc_report::write_report(&input, dir)
            .map_err(|e| CliError::Environment(format!("cannot write the report: {e}")))?;
        eprintln!("report: {}, {}, {}", files.markdown.display(), files.roofline.display(), files.speedup.display());
    }
    Ok(())
}

/// The ceilings of the device `engine` runs on, measured now, and the device's name.
fn measure_ceilings(engine: &Engine) -> Result<(Ceilings, String), CliError> {
    let date = tcc_autotune::provenance::format_utc(tcc_autotune::provenance::unix_now());
    #[cfg(feature = "llvm")]
    if let Engine::Cuda { device, .. } = engine {
        eprintln!("measuring the GPU's ceilings (device copy bandwidth, mma.sync and FMA issue rates)...");
        let c = device
            .measure_ceilings(GPU_COPY_BYTES)
            .map_err(|e| CliError::Environment(format!("measuring the GPU's ceilings: {e}")))?;
        let info = device.info();
        let name = format!(
            "{} ({} SMs, sm_{}{})",
            info.name, info.sm_count, info.compute_capability.0, info.compute_capability.1
        );
        let ceilings = Ceilings {
            bandwidth_gbps: c.copy_gbps,
            bandwidth_method: format!("device-to-device copy of {} MiB", c.copy_bytes >> 20),
            compute: vec![
                ComputeCeiling { label: "mma.sync m16n8k16 f16→f32".to_string(), gflops: c.mma_f16_gflops },
                ComputeCeiling { label: "FMA f32".to_string(), gflops: c.fma_f32_gflops },
            ],
            device: name.clone(),
            measured_at: date,
        };
        return Ok((ceilings, name));
    }
    let _ = engine; // only a GPU engine is looked at, and only with feature `llvm`
    eprintln!("measuring the CPU's ceilings (copy bandwidth, FMA issue rate)...");
    let c = tcc_runtime::ceilings::measure_cpu_ceilings();
    let device = cpu_name(c.threads);
    let ceilings = Ceilings {
        bandwidth_gbps: c.copy_gbps,
        bandwidth_method: format!("memory copy of {} MiB on {} threads", c.copy_bytes >> 20, c.threads),
        compute: vec![ComputeCeiling { label: format!("FMA f32 ({})", c.fma_isa), gflops: c.fma_gflops }],
        device: device.clone(),
        measured_at: date,
    };
    Ok((ceilings, device))
}

/// Bytes of the GPU's copy-bandwidth measurement: far beyond any L2.
#[cfg(feature = "llvm")]
const GPU_COPY_BYTES: u64 = 1 << 30;

fn read_peers(args: &BenchArgs) -> Result<Vec<BenchRow>, CliError> {
    let mut peers = Vec::new();
    for path in &args.peers {
        peers.extend(tcc_report::read_rows_jsonl(path).map_err(|e| CliError::invalid(e.to_string()))?);
    }
    Ok(peers)
}

/// The CPU's model name from /proc/cpuinfo, with the thread count.
fn cpu_name(threads: usize) -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{model}, {threads} threads")
}
