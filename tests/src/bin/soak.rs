//! The differential soak: random programs against the reference interpreter on every backend built
//! in, for a time or a number of programs; prints failing seeds, a per-backend summary and the
//! coverage report.
//!
//! ```text
//! cargo run --release -p tcc-tests --bin soak -- --seconds 600 [--programs N] [--start-seed S]
//!     [--backends interp-opt,cpu:cranelift,cpu:llvm,cuda] [--best-only] [--preset NAME] [--report FILE.md]
//! ```
//! Each compiled backend runs the optimizer's best program, its first alternative and the whole
//! graph as one generic kernel; `--best-only` runs only the best program (a third of the compiling).
//! Seeds rotate through the generator presets; `--preset NAME` (e.g. `high_rank`) uses one for all.
//! `--paths` runs the `paths` family instead (one value compared with itself through several index
//! paths, checked bit for bit; see `tcc_tests::differential::paths`).
//! ```text
//! cargo run --release -p tcc-tests --bin soak -- --seed S     # replay one seed, print its program
//! ```
//! Exit status: 0 no failure, 1 failing seeds, 2 bad arguments or a device that cannot be opened.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use tcc_tests::differential::{Backend, Driver, SeedReport, Totals, Variants, paths};

struct Args {
    seconds: Option<u64>,
    programs: Option<u64>,
    start_seed: u64,
    one_seed: Option<u64>,
    backends: Vec<Backend>,
    report: Option<std::path::PathBuf>,
    variants: Variants,
    preset: Option<tcc_tests::differential::presets::Preset>,
    paths: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: None,
        programs: None,
        start_seed: 0,
        one_seed: None,
        backends: Backend::cpu_defaults(),
        report: None,
        variants: Variants::All,
        preset: None,
        paths: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--seconds" | "--soak" => a.seconds = Some(number(value()?)?),
            "--programs" => a.programs = Some(number(value()?)?),
            "--start-seed" => a.start_seed = number(value()?)?,
            "--seed" => a.one_seed = Some(number(value()?)?),
            "--report" => a.report = Some(value()?.into()),
            "--backends" => {
                a.backends = value()?
                    .split(',')
                    .map(|n| Backend::from_name(n.trim()).ok_or_else(|| format!("unknown backend `{n}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--best-only" => a.variants = Variants::Best,
            "--paths" => a.paths = true,
            "--preset" => {
                let name = value()?;
                a.preset = Some(
                    tcc_tests::differential::presets::by_name(&name)
                        .ok_or_else(|| format!("unknown preset `{name}`"))?,
                );
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.seconds.is_none() && a.programs.is_none() && a.one_seed.is_none() {
        a.programs = Some(200);
    }
    Ok(a)
}

const USAGE: &str = "usage: soak [--seconds N] [--programs N] [--start-seed S] [--seed S] \
[--backends interp-opt,cpu:cranelift,cpu:llvm,cuda] [--best-only] [--preset NAME] [--paths] [--report FILE.md]";

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("soak: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut driver = match Driver::new(&args.backends) {
        Ok(d) => match args.preset.clone() {
            Some(p) => d.with_variants(args.variants).with_preset(p),
            None => d.with_variants(args.variants),
        },
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let names: Vec<&str> = driver.backends().iter().map(|b| b.name()).collect();
    let run_seed = |driver: &mut Driver, seed: u64| {
        if !args.paths {
            return driver.run_seed(seed);
        }
        match paths::program(seed) {
            Ok(p) => paths::run(driver, seed, "paths", &p),
            Err(e) => SeedReport::unrun(seed, "paths", e),
        }
    };
    if let Some(seed) = args.one_seed {
        let r = run_seed(&mut driver, seed);
        if let Some(p) = &r.program {
            println!(
                "seed {seed} (preset {}), bindings {:?}:\n{}",
                r.preset,
                p.bindings,
                tcc_ir::text::print_graph(&p.graph)
            );
        }
        if r.failures.is_empty() {
            println!("seed {seed}: every backend ({}) agrees with the interpreter", names.join(", "));
            return ExitCode::SUCCESS;
        }
        println!("{}", r.describe());
        return ExitCode::from(1);
    }
    eprintln!(
        "soak: backends {}; {}",
        names.join(", "),
        match (args.seconds, args.programs) {
            (Some(s), Some(n)) => format!("{s} s or {n} programs"),
            (Some(s), None) => format!("{s} s"),
            (None, Some(n)) => format!("{n} programs"),
            (None, None) => String::new(),
        }
    );
    let start = Instant::now();
    let deadline = args.seconds.map(|s| start + Duration::from_secs(s));
    let mut totals = Totals::default();
    let mut seed = args.start_seed;
    loop {
        if args.programs.is_some_and(|n| totals.programs >= n) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let r = run_seed(&mut driver, seed);
        if !r.failures.is_empty() {
            println!("FAIL {}", r.describe());
        }
        totals.add(&r);
        if totals.programs % 500 == 0 {
            eprintln!(
                "soak: {} programs ({} failing) in {:.0} s; next seed {}",
                totals.programs,
                totals.failing.len(),
                start.elapsed().as_secs_f64(),
                seed + 1
            );
        }
        seed = seed.wrapping_add(1);
    }
    let report = format!(
        "Seeds {}..{} ({} s wall; {}; presets: {}).\n\n{}\n## Coverage\n\n{}",
        args.start_seed,
        seed,
        start.elapsed().as_secs(),
        if args.variants == Variants::Best { "best program only" } else { "best, alternative, whole graph" },
        if args.paths { "paths (bit for bit)" } else { args.preset.as_ref().map_or("rotation", |p| p.name) },
        totals.summary(),
        totals.coverage.to_markdown()
    );
    println!("{report}");
    if let Some(path) = &args.report
        && let Err(e) = std::fs::write(path, &report)
    {
        eprintln!("soak: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if totals.failing.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
