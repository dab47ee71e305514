//! `tcc bench FILE [--fn F] [--target T] [--dim N=V]... [--json]`: time one program, per kernel.
//! `tcc bench --workloads FILE --suite cpu --out FILE [--report DIR] [--peers FILE]...`: the suite.

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use tcc_report::{BenchRow, Ceilings, ComputeCeiling, ReportInput};

use super::args::{BenchArgs, ProgramArgs};
use super::atomic::write_output;
use super::error::CliError;
use super::inputs::random_inputs;
use super::json;
use super::load::{bind, load, select_fn};
use crate::suite::{Timing, bench_with_baseline, count, load_suite};
use tcc::engine::Engine;

/// Runs `tcc bench`: `FILE` times one program, `--workloads` the public suite.
pub fn bench(args: &BenchArgs) -> Result<(), CliError> {
    match (&args.file, &args.workloads) {
        (Some(file), None) => bench_file(args, file),
        (None, Some(workloads)) => bench_workloads(args, workloads),
        _ => Err(CliError::invalid("`tcc bench` takes a FILE or --workloads FILE, not both")),
    }
}

/// `tcc bench FILE`: the program's fn on random normal inputs made once, timed as the suite is
/// (warm-up; on a GPU CUDA events with the L2 flushed before each of at least 20 repetitions; on
/// the CPU wall time), median per kernel and in total, with bytes/s and (for products) FLOP/s.
fn bench_file(args: &BenchArgs, file: &Path) -> Result<(), CliError> {
    let engine = Engine::for_spec(args.target)?;
    if matches!(engine, Engine::Interp) {
        return Err(CliError::invalid("the interpreter is the reference, not a benchmark target"));
    }
    let pipeline = engine.pipeline(&args.lock.setting())?;
    let program_args = ProgramArgs { file: file.to_path_buf(), function: args.function.clone() };
    let loaded = load(file)?;
    let graph = select_fn(&loaded, &program_args)?;
    let bindings = bind(graph, &args.dims)?;
    let inputs = random_inputs(graph, &bindings, args.seed, u64::MAX)?;
    let host: Vec<tcc_runtime::HostTensor> = inputs
        .iter()
        .map(tcc_runtime::HostTensor::from_interp)
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Environment(format!("cannot convert the inputs: {e}")))?;
    let prepared = engine.prepare(&pipeline, graph, &bindings)?;
    let timing = Timing::default();
    let measured = prepared.time(&host, timing.min_reps.max(20), timing.max_reps, timing.max_seconds)?;
    let program = prepared.program().ok_or_else(|| CliError::Environment("nothing was compiled".into()))?;
    let mut total_bytes = 0.0;
    let mut total_flops: Option<f64> = None;
    let rate = |amount: f64, ms: f64| if ms > 0.0 { amount / (ms * 1e-3) } else { f64::NAN };
    if !args.json {
        println!(
            "fn {} on {}: {} kernel{}, median of {} runs",
            graph.name,
            engine.name(),
            prepared.kernels().len(),
            if prepared.kernels().len() == 1 { "" } else { "s" },
            measured.repetitions
        );
    }
    for ((plan, launch), ms) in prepared.kernels().iter().zip(&program.launches).zip(&measured.kernel_median_ms) {
        let work = count::kernel_work(&launch.kernel, &bindings);
        if let Some(w) = work {
            total_bytes += w.bytes;
            if let Some(f) = w.flops {
                total_flops = Some(total_flops.unwrap_or(0.0) + f);
            }
        }
        if args.json {
            let mut object = json::kernel_object(plan);
            object.insert("median_ms".into(), serde_json::json!(ms));
            if let Some(w) = work {
                object.insert("bytes_per_s".into(), serde_json::json!(rate(w.bytes, *ms)));
                if let Some(f) = w.flops {
                    object.insert("flop_per_s".into(), serde_json::json!(rate(f, *ms)));
                }
            }
            json::print_line(&serde_json::Value::Object(object))?;
        } else {
            let flops = work.and_then(|w| w.flops).map(|f| format!(" {:9.1} GFLOP/s", rate(f, *ms) / 1e9));
            let bytes = work.map(|w| format!(" {:8.1} GB/s", rate(w.bytes, *ms) / 1e9));
            println!(
                "  {:24} {:14} {:10.4} ms{}{}  {} ({})",
                plan.kernel,
                plan.family,
                ms,
                bytes.unwrap_or_default(),
                flops.unwrap_or_default(),
                plan.kind,
                plan.source
            );
        }
    }
    if args.json {
        let mut total = serde_json::json!({
            "function": graph.name,
            "target": engine.name(),
            "kernels": prepared.kernels().len(),
            "median_ms": measured.median_ms,
            "repetitions": measured.repetitions,
            "bytes_per_s": rate(total_bytes, measured.median_ms),
        });
        if let (Some(f), Some(object)) = (total_flops, total.as_object_mut()) {
            object.insert("flop_per_s".into(), serde_json::json!(rate(f, measured.median_ms)));
        }
        json::print_line(&total)?;
    } else {
        let flops =
            total_flops.map(|f| format!(", {:.1} GFLOP/s", rate(f, measured.median_ms) / 1e9)).unwrap_or_default();
        println!(
            "total {:.4} ms ({:.1} GB/s of compulsory traffic{flops})",
            measured.median_ms,
            rate(total_bytes, measured.median_ms) / 1e9
        );
    }
    Ok(())
}

/// `tcc bench --workloads FILE --suite S --out FILE`: the public suite.
fn bench_workloads(args: &BenchArgs, workloads_file: &Path) -> Result<(), CliError> {
    let suite = args.suite.as_deref().ok_or_else(|| CliError::invalid("--workloads needs --suite"))?;
    let out = args.out.as_ref().ok_or_else(|| CliError::invalid("--workloads needs --out"))?;
    let engine = Engine::for_spec(args.target)?;
    match (suite, engine.target().is_gpu()) {
        ("cpu", false) | ("gpu", true) => {}
        ("cpu", true) => return Err(CliError::invalid("the cpu suite runs on a CPU target (--target cpu)")),
        ("gpu", false) => return Err(CliError::invalid("the gpu suite runs on a GPU target (--target cuda)")),
        (other, _) => return Err(CliError::invalid(format!("unknown suite `{other}`; suites are cpu and gpu"))),
    }
    if matches!(engine, Engine::Interp) {
        return Err(CliError::invalid("the interpreter is the reference, not a benchmark target"));
    }
    let pipeline = engine.pipeline(&args.lock.setting())?;
    let mut workloads = load_suite(workloads_file, suite).map_err(|e| CliError::invalid(e.to_string()))?;
    if let Some(only) = &args.only {
        let keep: Vec<&str> = only.split(',').map(str::trim).collect();
        let unknown: Vec<&&str> = keep.iter().filter(|k| !workloads.iter().any(|w| w.name == **k)).collect();
        if !unknown.is_empty() {
            return Err(CliError::invalid(format!("no workloads named {unknown:?} in the {suite} suite")));
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
        let result = bench_with_baseline(&engine, &pipeline, w, Timing::default(), args.seed)
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
    write_output(out, jsonl.as_bytes(), Some(workloads_file))?;

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
        compute: std::iter::once(ComputeCeiling { label: format!("FMA f32 ({})", c.fma_isa), gflops: c.fma_gflops })
            .chain(
                c.fma256_gflops
                    .filter(|_| c.fma_isa != "avx2")
                    .map(|gflops| ComputeCeiling { label: "FMA f32 (256-bit)".to_string(), gflops }),
            )
            .chain(c.fma128_gflops.map(|gflops| ComputeCeiling { label: "FMA f32 (128-bit)".to_string(), gflops }))
            .collect(),
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
