//! `tcc cache ls|stats|gc|show KEY|export FILE|import FILE`: the local tuning cache (the SQLite
//! database in `$TCC_CACHE_DIR`, else the user's cache directory). `-` is stdout for `export` and
//! stdin for `import`; exports are written to a temporary file and renamed into place.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use tcc_autotune::cache::{GcOptions, Stats, export, import, parse, to_jsonl};
use tcc_autotune::{CacheRecord, CacheStore, SqliteStore, TCC_VERSION};

use super::args::{CacheArgs, CacheCommand, CacheGcArgs};
use super::atomic::write_output;
use super::error::CliError;

/// Shortest key prefix `tcc cache show` accepts.
const MIN_PREFIX: usize = 6;

/// Runs `tcc cache`.
pub fn cache(args: &CacheArgs) -> Result<(), CliError> {
    let store = open()?;
    match &args.command {
        CacheCommand::Ls => ls(&store),
        CacheCommand::Stats => stats(&store),
        CacheCommand::Gc(a) => gc(&store, a),
        CacheCommand::Show { key } => show(&store, key),
        CacheCommand::Export { file } => export_to(&store, file),
        CacheCommand::Import { file } => import_from(&store, file),
    }
}

fn open() -> Result<SqliteStore, CliError> {
    SqliteStore::open_default().map_err(|e| {
        let dir = tcc_autotune::cache::default_cache_dir().map(|d| d.display().to_string()).unwrap_or_default();
        CliError::Environment(format!("cannot open the tuning cache in `{dir}`: {e}"))
    })
}

fn store_error(e: tcc_autotune::cache::StoreError) -> CliError {
    CliError::Environment(e.to_string())
}

fn records(store: &SqliteStore) -> Result<Vec<CacheRecord>, CliError> {
    let listing = store.list().map_err(store_error)?;
    if listing.undecodable > 0 {
        eprintln!(
            "warning: skipped {} undecodable entr{} of {} (`tcc cache gc` removes them)",
            listing.undecodable,
            if listing.undecodable == 1 { "y" } else { "ies" },
            store.describe()
        );
    }
    Ok(listing.records)
}

fn ls(store: &SqliteStore) -> Result<(), CliError> {
    let records = records(store)?;
    if records.is_empty() {
        println!("no records in {}", store.describe());
    }
    for r in &records {
        println!("{r} {}", r.key.device.name);
    }
    Ok(())
}

fn stats(store: &SqliteStore) -> Result<(), CliError> {
    let listing = store.list().map_err(store_error)?;
    let stats = Stats::of(&listing);
    let journal = store.journal_len().map_err(store_error)?;
    println!("cache: {}", store.describe());
    println!("records: {} ({} undecodable)", stats.records, stats.undecodable);
    println!("journal: {journal} trials of unfinished tuning runs");
    let line = |name: &str, counts: &BTreeMap<String, usize>| {
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        println!("by {name}: {}", if parts.is_empty() { "-".to_string() } else { parts.join(", ") });
    };
    line("state", &stats.by_state);
    line("version", &stats.by_version);
    line("target", &stats.by_target);
    line("device", &stats.by_device);
    Ok(())
}

fn gc(store: &SqliteStore, args: &CacheGcArgs) -> Result<(), CliError> {
    let options = GcOptions {
        current_version: TCC_VERSION.to_string(),
        drop_other_versions: args.other_versions,
        drop_quarantined: true,
        journal_older_than: Duration::from_secs(args.journal_days.saturating_mul(86_400)),
    };
    let report = store.gc(&options).map_err(store_error)?;
    println!(
        "removed {} undecodable, {} quarantined and {} other-version records and {} journal entries from {}",
        report.undecodable,
        report.quarantined,
        report.other_versions,
        report.journal,
        store.describe()
    );
    Ok(())
}

fn show(store: &SqliteStore, key: &str) -> Result<(), CliError> {
    let prefix = key.trim().to_ascii_lowercase();
    if prefix.len() < MIN_PREFIX || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CliError::invalid(format!(
            "`{key}` is not a key: give its hash (64 hex digits, as `tcc cache ls` shows) or a prefix of at least {MIN_PREFIX}"
        )));
    }
    let found: Vec<CacheRecord> =
        records(store)?.into_iter().filter(|r| r.key.hash().as_str().starts_with(&prefix)).collect();
    match found.as_slice() {
        [] => Err(CliError::invalid(format!("no record with key `{prefix}` in {}", store.describe()))),
        [r] => {
            let json = serde_json::to_string_pretty(r)
                .map_err(|e| CliError::Environment(format!("internal error encoding a record: {e}")))?;
            println!("key {}\n{}{json}", r.key.hash(), r.key.canonical_text());
            Ok(())
        }
        many => Err(CliError::invalid(format!("`{prefix}` names {} records; give more digits", many.len()))),
    }
}

fn export_to(store: &SqliteStore, file: &Path) -> Result<(), CliError> {
    let text = if file == Path::new("-") {
        let mut out = Vec::new();
        export(store, &mut out).map_err(store_error)?;
        out
    } else {
        to_jsonl(&records(store)?).map_err(store_error)?.into_bytes()
    };
    let count = text.iter().filter(|&&b| b == b'\n').count();
    write_output(file, &text, None)?;
    eprintln!(
        "exported {count} records to {}",
        if file == Path::new("-") { "stdout".into() } else { file.display().to_string() }
    );
    Ok(())
}

fn import_from(store: &SqliteStore, file: &Path) -> Result<(), CliError> {
    let name = if file == Path::new("-") { "stdin".to_string() } else { format!("`{}`", file.display()) };
    let bytes = if file == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(|e| CliError::Environment(format!("cannot read stdin: {e}")))?;
        buf
    } else {
        std::fs::read(file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CliError::invalid(format!("cannot read {name}: no such file")),
            _ => CliError::Environment(format!("cannot read {name}: {e}")),
        })?
    };
    let parsed = parse(bytes.as_slice()).map_err(|e| CliError::Environment(format!("cannot read {name}: {e}")))?;
    for s in &parsed.skipped {
        eprintln!("warning: {name} line {}: skipped: {}", s.line, s.reason);
    }
    if parsed.records.is_empty() && !parsed.skipped.is_empty() {
        return Err(CliError::invalid(format!("{name} holds no tuning-cache record")));
    }
    let report = import(store, &parsed).map_err(store_error)?;
    println!(
        "imported {name} into {}: {} added, {} replaced, {} kept, {} lines skipped (imported records are checked on this machine before first use)",
        store.describe(),
        report.added,
        report.replaced,
        report.kept,
        report.skipped
    );
    Ok(())
}
