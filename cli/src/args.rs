//! The argument grammar of contract §3, as clap types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tcc_ir::target::TargetSpec;

/// tcc, a tensor compiler: check, inspect and run tensor programs written in the tcc DSL.
#[derive(Debug, Parser)]
#[command(name = "tcc", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse and type-check every fn of a file; print diagnostics.
    Check(CheckArgs),
    /// Print the tensor IR of a file's fns (all of them, or the one named by --fn).
    Ir(IrArgs),
    /// Run a fn on random normal inputs and print each output's shape, dtype and statistics.
    Run(RunArgs),
    /// Optimize a fn and explain the result: each kernel, the ops it fuses, its schedule, the
    /// model's estimate and the rules that formed it.
    Explain(ExplainArgs),
    /// Time the public suite's workloads on a target; write JSONL rows (and a report with charts).
    Bench(BenchArgs),
    /// Optimize and compile a fn for a target and write one stage's output: ir (the optimized
    /// program), llvm (LLVM IR, GPU targets), ptx (GPU targets, needs the `llvm` feature), clif or
    /// asm (the CPU tier's cranelift IR or machine code).
    Compile(CompileArgs),
    /// Measure candidate schedules of each kernel of a fn on a CPU tier or the local GPU (each in a
    /// worker process, validated against the interpreter or a known-good kernel) and record the
    /// winners in the tuning cache; --study compares the guided search with the exhaustive sweep.
    Tune(TuneArgs),
    /// Inspect and manage the tuning cache: ls, stats, gc, show KEY, export FILE, import FILE.
    Cache(CacheArgs),
    /// Write the lockfile of a whole tuning plan from the tuning caches (local and shared) alone,
    /// measuring nothing; exit 2 naming every kernel without a winner (nothing is written then).
    Lock(LockPlanArgs),
    /// Measure one autotuning candidate read from stdin (started by `tcc tune`; not for users).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// Arguments of `tcc explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The program.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// The target: cpu, cpu:cranelift, cpu:llvm, cuda, sm_80, sm_90a or interp.
    #[arg(long, default_value = "cpu", value_name = "T")]
    pub target: TargetSpec,
    /// Binds a shape variable for the cost model (unbound ones count as 1024; tuning records
    /// apply only when every variable is bound).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// Also write the kernel graph in Graphviz dot format to this file (`-` for stdout).
    #[arg(long, value_name = "OUT")]
    pub dot: Option<PathBuf>,
    /// Which lockfile to obey.
    #[command(flatten)]
    pub lock: LockArgs,
    /// Print one JSON object per line (a header, then one per kernel) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The lockfile a command obeys: `--lock FILE`, else `$TCC_LOCKFILE`, else `./tcc.lock` if present.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// Obey this lockfile (default: $TCC_LOCKFILE, else ./tcc.lock when it exists).
    #[arg(long = "lock", value_name = "FILE")]
    pub lockfile: Option<PathBuf>,
}

impl LockArgs {
    /// The pipeline's setting.
    pub fn setting(&self) -> tcc::pipeline::LockSetting {
        match &self.lockfile {
            Some(path) => tcc::pipeline::LockSetting::File(path.clone()),
            None => tcc::pipeline::LockSetting::FromEnvironment,
        }
    }
}

/// The program a command works on.
#[derive(Debug, Args)]
pub struct ProgramArgs {
    /// The `.tc` file.
    pub file: PathBuf,
    /// The fn to use (optional when the file has one fn).
    #[arg(long = "fn", value_name = "NAME")]
    pub function: Option<String>,
}

/// Arguments of `tcc check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The program.
    #[command(flatten)]
    pub program: ProgramArgs,
}

/// Arguments of `tcc ir`.
#[derive(Debug, Args)]
pub struct IrArgs {
    /// The program.
    #[command(flatten)]
    pub program: ProgramArgs,
}

/// Arguments of `tcc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The program.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Where to run: cpu (the best CPU tier built in), cpu:cranelift, cpu:llvm, cuda (the local
    /// GPU), sm_80 or sm_90a (the local GPU, if it is one), or interp (the f64 reference interpreter).
    #[arg(long, default_value = "cpu", value_name = "T")]
    pub target: TargetSpec,
    /// Also run the reference interpreter on the same inputs and report the largest error.
    #[arg(long)]
    pub check: bool,
    /// Which lockfile to obey.
    #[command(flatten)]
    pub lock: LockArgs,
    /// Print one JSON object per line (one per kernel, then the run with its outputs) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Binds a shape variable, e.g. --dim M=128 (repeatable; names the fn does not use are ignored).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// Seed of the random normal inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Refuse to allocate more than this many bytes for any tensor (suffixes K, M, G, KiB, MiB, GiB).
    #[arg(long, default_value = "4GiB", value_parser = parse_bytes)]
    pub max_memory: u64,
}

/// Parses `NAME=VALUE` of `--dim`.
pub fn parse_dim(text: &str) -> Result<(String, u64), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, found `{text}`"))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(format!("`{name}` is not a shape variable name"));
    }
    let value: u64 = value.trim().parse().map_err(|_| format!("`{value}` is not a non-negative integer"))?;
    if value >= tcc_ir::limits::MAX_ELEMENTS {
        return Err(format!("{value} is not below the dimension limit of 2^40"));
    }
    Ok((name.to_string(), value))
}

/// Parses a byte count with an optional suffix (`512M`, `4GiB`, `1000`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a byte count"))?;
    let scale: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("unknown size suffix `{other}`")),
    };
    number.checked_mul(scale).ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn dims_parse_and_reject() {
        assert_eq!(parse_dim("M=128"), Ok(("M".to_string(), 128)));
        assert!(parse_dim("M").is_err());
        assert!(parse_dim("M=-1").is_err());
        assert!(parse_dim("=3").is_err());
        assert!(parse_dim("M=1099511627776").is_err());
    }

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert_eq!(parse_bytes("512M"), Ok(512_000_000));
        assert_eq!(parse_bytes("10"), Ok(10));
        assert!(parse_bytes("ten").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
    }
}

/// Arguments of `tcc bench`: a program (`tcc bench FILE`) or the public suite (`--workloads`).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The `.tc` file to time (or use --workloads).
    #[arg(required_unless_present = "workloads", conflicts_with = "workloads")]
    pub file: Option<PathBuf>,
    /// The fn of FILE to time (optional when the file has one fn).
    #[arg(long = "fn", value_name = "NAME")]
    pub function: Option<String>,
    /// Binds a shape variable of FILE's fn (every variable must be bound).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// The workloads file (the schema of bench/workloads.json).
    #[arg(long, value_name = "FILE", requires_all = ["suite", "out"])]
    pub workloads: Option<PathBuf>,
    /// Which suite of the workloads file: cpu or gpu.
    #[arg(long, value_name = "SUITE")]
    pub suite: Option<String>,
    /// Where to run: cpu, cpu:cranelift, cpu:llvm, cuda, sm_80 or sm_90a.
    #[arg(long, default_value = "cpu", value_name = "T")]
    pub target: TargetSpec,
    /// Where to write the JSONL rows of --workloads (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Which lockfile to obey.
    #[command(flatten)]
    pub lock: LockArgs,
    /// With FILE: print one JSON object per line (one per kernel, then the total) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write a report (roofline and speedup SVGs, a Markdown table) into this folder; the
    /// device's ceilings are measured in the same run.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Peer rows to compare with in the report (output of peers.py); repeatable.
    #[arg(long = "peers", value_name = "FILE")]
    pub peers: Vec<PathBuf>,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_name = "NAMES")]
    pub only: Option<String>,
    /// Seed of the random normal inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Arguments of `tcc tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The `.tc` file (with --study or --plan: not used; the workloads come from --workloads, the
    /// programs from the plan).
    #[arg(required_unless_present_any = ["study", "plan"], conflicts_with = "plan")]
    pub file: Option<PathBuf>,
    /// The fn to use (optional when the file has one fn).
    #[arg(long = "fn", value_name = "NAME")]
    pub function: Option<String>,
    /// The target to tune for: cpu (the best CPU tier built in), cpu:cranelift, cpu:llvm, cuda (the
    /// local GPU), sm_80 or sm_90a (the local GPU compiled for that target).
    #[arg(long, default_value = "cpu", value_name = "T")]
    pub target: TargetSpec,
    /// Print one JSON object per line (one per kernel's decision) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Binds a shape variable, e.g. --dim M=128 (repeatable; every variable of the fn must be bound).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// Limit of the whole run, shared by its kernels: a time (60s, 5m), a trial count (200trials)
    /// or both (5m,200trials). Not used by --study.
    #[arg(long, default_value = "60s", value_name = "BUDGET", value_parser = tcc_autotune::Budget::parse)]
    pub budget: tcc_autotune::Budget,
    /// Also write the chosen schedules to this lockfile (entries for other kernels are kept).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Tune again even when the cache has a fresh winner.
    #[arg(long)]
    pub retune: bool,
    /// Tune every kernel of a plan (JSON lines, one program instance per line: {"file": "x.tc",
    /// "fn": "f", "dims": {"M": 64}, "target": "cpu"}), each kernel once; with --shard, or in a
    /// Slurm array task or a Kubernetes Indexed Job, only this shard's part of them. --budget is
    /// then this shard's, shared by its kernels.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["study", "lock", "function", "dims"])]
    pub plan: Option<PathBuf>,
    /// Tune the I-th of N parts of the plan's kernels (0 <= I < N), balanced by an estimate of
    /// each kernel's tuning time. Default: from SLURM_ARRAY_TASK_ID, _MIN, _STEP and _COUNT, else
    /// from JOB_COMPLETION_INDEX and TCC_SHARDS, else the whole plan.
    #[arg(long, value_name = "I/N", requires = "plan", value_parser = parse_shard)]
    pub shard: Option<tcc_autotune::shard::Shard>,
    /// Tune on several GPUs of this host at once: `all`, or ordinals (`0,1`). One tuning per
    /// GPU takes the next kernel from a shared queue; its workers see only their GPU
    /// (CUDA_VISIBLE_DEVICES). GPU targets only.
    #[arg(long, value_name = "all|0,1,..", value_parser = crate::devices::DevicesArg::parse, conflicts_with = "study")]
    pub devices: Option<crate::devices::DevicesArg>,
    /// Seed of the random inputs each candidate is validated on.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Candidates compiled at once (0 = one per core).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub jobs: usize,
    /// Alternatives of the optimizer whose schedules join each kernel's candidates.
    #[arg(long, default_value_t = 4, value_name = "K")]
    pub top_k: usize,
    /// Thin each GPU kernel's space evenly along the cost model's order to at most N candidates
    /// (default: the whole space; with --study: 256).
    #[arg(long, value_name = "N")]
    pub space: Option<usize>,
    /// Study the tuner instead of tuning: for each kernel of the chosen workloads run the guided
    /// search (at most --guided-share of the space) and the exhaustive sweep in this process,
    /// re-measure both winners, and write study.jsonl, trials.jsonl and study.md into --out.
    /// The cache is neither read nor written.
    #[arg(long)]
    pub study: bool,
    /// The workloads file of --study.
    #[arg(long, default_value = "bench/workloads.json", value_name = "FILE", requires = "study")]
    pub workloads: PathBuf,
    /// The suite of --study: gpu or cpu (default: gpu for GPU targets, else cpu).
    #[arg(long, value_name = "SUITE", requires = "study")]
    pub suite: Option<String>,
    /// Only these workloads of the suite (comma-separated; default: its gemm workloads).
    #[arg(long = "workload", value_name = "NAMES", requires = "study")]
    pub workload: Option<String>,
    /// The folder --study writes its results to.
    #[arg(long, value_name = "DIR", requires = "study")]
    pub out: Option<PathBuf>,
    /// The guided search's trial budget in --study, as a share of the space.
    #[arg(long, default_value_t = 0.25, value_name = "SHARE", requires = "study")]
    pub guided_share: f64,
}

/// Arguments of `tcc lock`.
#[derive(Debug, Args)]
pub struct LockPlanArgs {
    /// The tuning plan (as `tcc tune --plan`).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// The lockfile to write (replaced as a whole).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: PathBuf,
    /// The target of plan entries that name none (as `tcc tune --target`).
    #[arg(long, default_value = "cpu", value_name = "T")]
    pub target: TargetSpec,
    /// As `tcc tune --top-k` (the plan's kernels are listed as `tcc tune --plan` lists them).
    #[arg(long, default_value_t = 4, value_name = "K")]
    pub top_k: usize,
    /// As `tcc tune --space`.
    #[arg(long, value_name = "N")]
    pub space: Option<usize>,
}

/// Arguments of `tcc cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// What to do with the cache: the local one ($TCC_CACHE_DIR, else the user's cache directory)
    /// and, with TCC_CACHE_URL=redis://[:password@]host[:port][/db], the shared one
    /// (TCC_CACHE_READONLY=1: never written; TCC_CACHE_PREFIX: its key prefix; rediss:// for TLS,
    /// with TCC_CACHE_CA naming a CA file to trust instead of the system's).
    #[command(subcommand)]
    pub command: CacheCommand,
}

/// The `tcc cache` subcommands.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List every record: key, target, schedule, time, how it stands here (fresh, unverified,
    /// borrowed or quarantined), tcc version, date, device.
    Ls {
        /// Print one JSON object per record instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Count records by state, version, target and device.
    Stats,
    /// Remove undecodable and quarantined records and old journal entries.
    Gc(CacheGcArgs),
    /// Print one record (KEY: its hash, or a unique prefix of at least 6 digits).
    Show {
        /// The key hash or a prefix of it.
        key: String,
    },
    /// Write every record as sorted JSONL (`-` for stdout).
    Export {
        /// The output file.
        file: PathBuf,
    },
    /// Merge records from a JSONL export (`-` for stdin); the faster measurement of a key wins and
    /// imported records are checked on this machine before first use.
    Import {
        /// The input file.
        file: PathBuf,
    },
    /// Salvage every readable record of a damaged local database into a fresh one; the damaged
    /// file is kept beside it (`tuning.sqlite3.damaged-<time>`).
    Repair,
}

/// Arguments of `tcc cache gc`.
#[derive(Debug, Args)]
pub struct CacheGcArgs {
    /// Also remove records measured by another code-generator version or schedule format.
    #[arg(long)]
    pub other_versions: bool,
    /// Remove journal entries of unfinished tuning runs older than this many days.
    #[arg(long, default_value_t = 7, value_name = "DAYS")]
    pub journal_days: u64,
}

/// Arguments of the hidden `tcc worker` (none: the request comes on stdin).
#[derive(Debug, Args)]
pub struct WorkerArgs {}

/// Arguments of `tcc compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The program.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// The target: cpu, cpu:cranelift, cpu:llvm, cuda, sm_80 or sm_90a.
    #[arg(long, value_name = "T")]
    pub target: TargetSpec,
    /// Which lockfile to obey.
    #[command(flatten)]
    pub lock: LockArgs,
    /// Binds a shape variable (every variable of the fn must be bound).
    #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// The stage to write: ir, llvm, ptx, clif or asm.
    #[arg(long, value_name = "STAGE")]
    pub emit: String,
    /// Where to write it (`-` for stdout).
    #[arg(short = 'o', value_name = "OUT")]
    pub out: PathBuf,
}

/// Parses `--shard I/N`.
fn parse_shard(text: &str) -> Result<tcc_autotune::shard::Shard, String> {
    tcc_autotune::shard::Shard::parse(text).map_err(|e| e.to_string())
}
