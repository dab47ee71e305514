//! `tcc cache ls|stats|gc|show KEY|export FILE|import FILE|repair`: the tuning cache as tcc uses
//! it, the local SQLite database (`$TCC_CACHE_DIR`, else the user's cache directory) plus, when
//! `TCC_CACHE_URL=redis://...` or `rediss://...` (TLS) is set, the shared Redis cache
//! (`TCC_CACHE_READONLY=1`: never written; `TCC_CACHE_PREFIX`: its key prefix; `TCC_CACHE_CA`: a
//! CA file to trust). Credentials are never printed (URLs are shown redacted).
//!
//! A damaged local database stops every command but `repair` (exit 2, naming it); `repair`
//! salvages its readable records into a fresh database and keeps the damaged file beside it.
//!
//! - `ls`, `show`, `stats`, `export` read both caches: a key present in both shows the local record
//!   (the one this machine uses; `export` keeps the faster measurement of the two);
//! - `import` merges into the local cache and, unless it is read-only, the shared one;
//! - `gc` cleans the local cache and, unless it is read-only, removes quarantined (and with
//!   `--other-versions` other versions') records from the shared one.
//!
//! A shared cache that cannot be reached is a warning; the local cache is used alone. `-` is
//! stdout for `export` and stdin for `import`; exports are written to a temporary file and renamed
//! into place.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tcc_autotune::cache::{
    DB_FILE_NAME, GcOptions, KeyHash, Listing, RecordState, RedisStore, Stats, StoreError, import, merge, parse,
    repair, to_jsonl,
};
use tcc_autotune::{CacheRecord, CacheStore, Here, SqliteStore};

use super::args::{CacheArgs, CacheCommand, CacheGcArgs};
use super::atomic::write_output;
use super::error::CliError;

/// Shortest key prefix `tcc cache show` accepts.
const MIN_PREFIX: usize = 6;

/// The caches a command works on.
struct Caches {
    local: SqliteStore,
    shared: Option<RedisStore>,
}

/// Where a listed record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Local,
    Shared,
    Both,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Local => "local",
            Origin::Shared => "shared",
            Origin::Both => "local+shared",
        }
    }
}

/// Runs `tcc cache`.
pub fn cache(args: &CacheArgs) -> Result<(), CliError> {
    if let CacheCommand::Repair = args.command {
        return repair_local();
    }
    let caches = open()?;
    match &args.command {
        CacheCommand::Ls { json } => ls(&caches, *json),
        CacheCommand::Stats => stats(&caches),
        CacheCommand::Gc(a) => gc(&caches, a),
        CacheCommand::Show { key } => show(&caches, key),
        CacheCommand::Export { file } => export_to(&caches, file),
        CacheCommand::Import { file } => import_from(&caches, file),
        CacheCommand::Repair => repair_local(),
    }
}

/// The local database's path.
fn local_path() -> Result<PathBuf, CliError> {
    tcc_autotune::cache::default_cache_dir()
        .map(|d| d.join(DB_FILE_NAME))
        .map_err(|e| CliError::Environment(e.to_string()))
}

/// `tcc cache repair`: salvages a damaged local database (a healthy one is left alone).
fn repair_local() -> Result<(), CliError> {
    let path = local_path()?;
    if !path.exists() {
        println!("no tuning cache at `{}`: nothing to repair", path.display());
        return Ok(());
    }
    match SqliteStore::check_file(&path) {
        Ok(()) => {
            println!("the tuning cache `{}` is not damaged: nothing to repair", path.display());
            return Ok(());
        }
        Err(StoreError::Damaged { detail, .. }) => eprintln!("`{}` is damaged ({detail}); salvaging", path.display()),
        Err(e) => return Err(CliError::Environment(format!("cannot check `{}`: {e}", path.display()))),
    }
    let report = repair(&path).map_err(|e| {
        CliError::Environment(format!("cannot repair `{}` (it is left as it was): {e}", path.display()))
    })?;
    println!(
        "repaired `{}`: {} record{} saved, {} lost; {} journal entr{} of unfinished tuning runs saved; the damaged \
         file is kept as `{}`",
        path.display(),
        report.saved,
        if report.saved == 1 { "" } else { "s" },
        report.lost,
        report.journal,
        if report.journal == 1 { "y" } else { "ies" },
        report.damaged_copy.display()
    );
    Ok(())
}

fn open() -> Result<Caches, CliError> {
    // The shared cache's configuration is checked first: a refused URL (a typo, a CA file that
    // cannot be read) is an error of its own, whatever the local cache's state.
    let shared = tcc_autotune::Layered::remote_from_env().map_err(|e| CliError::Environment(e.to_string()))?;
    // A damaged database is never written to, nor read as if whole: every command but `repair`
    // stops, naming it.
    let path = local_path()?;
    let cannot_open = |e: StoreError| {
        let dir = path.parent().map(|d| d.display().to_string()).unwrap_or_default();
        CliError::Environment(format!("cannot open the tuning cache in `{dir}`: {e}"))
    };
    SqliteStore::check_file(&path).map_err(cannot_open)?;
    let local = SqliteStore::open(&path).map_err(cannot_open)?;
    Ok(Caches { local, shared })
}

fn store_error(e: StoreError) -> CliError {
    CliError::Environment(e.to_string())
}

fn warn_undecodable(listing: &Listing, store: &dyn CacheStore) {
    if listing.undecodable > 0 {
        eprintln!(
            "warning: skipped {} undecodable entr{} of {} (`tcc cache gc` removes them)",
            listing.undecodable,
            if listing.undecodable == 1 { "y" } else { "ies" },
            store.describe()
        );
    }
}

impl Caches {
    /// The shared cache's listing, or `None` (with a warning) when it cannot be read.
    fn shared_listing(&self) -> Option<(&RedisStore, Listing)> {
        let shared = self.shared.as_ref()?;
        match shared.list() {
            Ok(listing) => {
                warn_undecodable(&listing, shared);
                Some((shared, listing))
            }
            Err(e) => {
                eprintln!("warning: {e}; showing the local cache only");
                None
            }
        }
    }

    fn local_listing(&self) -> Result<Listing, CliError> {
        let listing = self.local.list().map_err(store_error)?;
        warn_undecodable(&listing, &self.local);
        Ok(listing)
    }

    /// Every record by key hash with where it is: the local record wins a key present in both.
    fn records(&self) -> Result<BTreeMap<KeyHash, (CacheRecord, Origin)>, CliError> {
        let mut all: BTreeMap<KeyHash, (CacheRecord, Origin)> = BTreeMap::new();
        for r in self.local_listing()?.records {
            all.insert(r.key.hash(), (r, Origin::Local));
        }
        if let Some((_, listing)) = self.shared_listing() {
            for r in listing.records {
                match all.get_mut(&r.key.hash()) {
                    Some((_, origin)) => *origin = Origin::Both,
                    None => {
                        all.insert(r.key.hash(), (r, Origin::Shared));
                    }
                }
            }
        }
        Ok(all)
    }

    fn describe(&self) -> String {
        match &self.shared {
            Some(s) => format!(
                "{} and {}{}",
                self.local.describe(),
                s.describe(),
                if s.is_read_only() { " (read-only)" } else { "" }
            ),
            None => self.local.describe(),
        }
    }
}

/// One line of `tcc cache ls`: key prefix, target, variant, schedule, time, how the record stands
/// here, the tcc version and date of the measurement, the device.
fn ls_line(r: &CacheRecord, here: &Here) -> String {
    format!(
        "{} {} v{} {} {:.3} us [{} {} {}] {}",
        &r.key.hash().as_str()[..12],
        r.key.target,
        r.variant,
        r.schedule,
        r.time_ns as f64 / 1e3,
        r.standing(here).name(),
        r.provenance.tcc_version,
        r.provenance.date,
        r.key.device.name
    )
}

fn ls(caches: &Caches, json: bool) -> Result<(), CliError> {
    let records = caches.records()?;
    let here = Here::this_machine();
    if json {
        // One object per record: its key hash, where it was found, and the record as stored (with
        // the schedule also as canonical text).
        for (r, origin) in records.values() {
            let mut object = match serde_json::to_value(r) {
                Ok(serde_json::Value::Object(o)) => o,
                Ok(_) | Err(_) => return Err(CliError::Environment("internal error: a record does not encode".into())),
            };
            object.insert("hash".into(), serde_json::json!(r.key.hash().as_str()));
            object.insert("schedule_text".into(), serde_json::json!(r.schedule.to_string()));
            object.insert("origin".into(), serde_json::json!(origin.name()));
            // How it stands on this machine: fresh, unverified, borrowed or quarantined (the
            // stored `state` alone cannot say borrowed: that depends on who asks).
            object.insert("state".into(), serde_json::json!(r.standing(&here).name()));
            object.insert("stored_state".into(), serde_json::json!(r.state.name()));
            super::json::print_line(&serde_json::Value::Object(object))?;
        }
        return Ok(());
    }
    if records.is_empty() {
        println!("no records in {}", caches.describe());
    }
    let tagged = caches.shared.is_some();
    for (r, origin) in records.values() {
        if tagged {
            println!("{} [{}]", ls_line(r, &here), origin.name());
        } else {
            println!("{}", ls_line(r, &here));
        }
    }
    Ok(())
}

fn stats(caches: &Caches) -> Result<(), CliError> {
    let line = |name: &str, counts: &BTreeMap<String, usize>| {
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        println!("  by {name}: {}", if parts.is_empty() { "-".to_string() } else { parts.join(", ") });
    };
    let here = Here::this_machine();
    let print = |what: &str, listing: &Listing| {
        let stats = Stats::of(listing);
        let mut standing: BTreeMap<String, usize> = BTreeMap::new();
        for r in &listing.records {
            *standing.entry(r.standing(&here).name().to_string()).or_default() += 1;
        }
        println!("{what}");
        println!("  records: {} ({} undecodable)", stats.records, stats.undecodable);
        line("standing here", &standing);
        line("stored state", &stats.by_state);
        line("version", &stats.by_version);
        line("target", &stats.by_target);
        line("device", &stats.by_device);
    };
    let local = caches.local.list().map_err(store_error)?;
    println!("cache: {}", caches.local.describe());
    println!("records: {} ({} undecodable)", local.records.len(), local.undecodable);
    let journal = caches.local.journal_len().map_err(store_error)?;
    println!("journal: {journal} trials of unfinished tuning runs");
    print("local:", &local);
    if let Some(shared) = &caches.shared {
        match shared.list() {
            Ok(listing) => print(
                &format!("shared: {}{}", shared.describe(), if shared.is_read_only() { " (read-only)" } else { "" }),
                &listing,
            ),
            Err(e) => eprintln!("warning: {e}; no shared statistics"),
        }
    }
    Ok(())
}

fn gc(caches: &Caches, args: &CacheGcArgs) -> Result<(), CliError> {
    let options = GcOptions {
        codegen_version: tcc_ir::CODEGEN_VERSION,
        drop_other_versions: args.other_versions,
        drop_quarantined: true,
        journal_older_than: Duration::from_secs(args.journal_days.saturating_mul(86_400)),
    };
    let report = caches.local.gc(&options).map_err(store_error)?;
    println!(
        "removed {} undecodable, {} quarantined and {} other-version records and {} journal entries from {}",
        report.undecodable,
        report.quarantined,
        report.other_versions,
        report.journal,
        caches.local.describe()
    );
    let Some(shared) = &caches.shared else {
        return Ok(());
    };
    if shared.is_read_only() {
        println!("the shared cache {} is read-only: left as it is", shared.describe());
        return Ok(());
    }
    let listing = match shared.list() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: {e}; the shared cache was not cleaned");
            return Ok(());
        }
    };
    let (mut quarantined, mut other_versions) = (0usize, 0usize);
    for r in &listing.records {
        let drop_quarantined = r.state == RecordState::Quarantined;
        let drop_version = args.other_versions && !r.by_codegen(tcc_ir::CODEGEN_VERSION);
        if (drop_quarantined || drop_version) && shared.remove(&r.key.hash()).map_err(store_error)? {
            if drop_quarantined {
                quarantined += 1;
            } else {
                other_versions += 1;
            }
        }
    }
    println!(
        "removed {quarantined} quarantined and {other_versions} other-version records from {} ({} undecodable entries left)",
        shared.describe(),
        listing.undecodable
    );
    Ok(())
}

fn show(caches: &Caches, key: &str) -> Result<(), CliError> {
    let prefix = key.trim().to_ascii_lowercase();
    if prefix.len() < MIN_PREFIX || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CliError::invalid(format!(
            "`{key}` is not a key: give its hash or any unique prefix of at least {MIN_PREFIX} hex digits (`tcc cache ls` shows 12; `--json` the whole hash)"
        )));
    }
    let found: Vec<(CacheRecord, Origin)> =
        caches.records()?.into_values().filter(|(r, _)| r.key.hash().as_str().starts_with(&prefix)).collect();
    match found.as_slice() {
        [] => Err(CliError::invalid(format!("no record with key `{prefix}` in {}", caches.describe()))),
        [(r, origin)] => {
            let json = serde_json::to_string_pretty(r)
                .map_err(|e| CliError::Environment(format!("internal error encoding a record: {e}")))?;
            println!("key {} ({})\n{}{json}", r.key.hash(), origin.name(), r.key.canonical_text());
            Ok(())
        }
        many => Err(CliError::invalid(format!("`{prefix}` names {} records; give more digits", many.len()))),
    }
}

fn export_to(caches: &Caches, file: &Path) -> Result<(), CliError> {
    let mut all = caches.local_listing()?.records;
    if let Some((_, listing)) = caches.shared_listing() {
        all.extend(listing.records);
    }
    let text = to_jsonl(&merge(all)).map_err(store_error)?.into_bytes();
    let count = text.iter().filter(|&&b| b == b'\n').count();
    write_output(file, &text, None)?;
    eprintln!(
        "exported {count} records to {}",
        if file == Path::new("-") { "stdout".into() } else { file.display().to_string() }
    );
    Ok(())
}

fn import_from(caches: &Caches, file: &Path) -> Result<(), CliError> {
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
    let report = import(&caches.local, &parsed).map_err(store_error)?;
    println!(
        "imported {name} into {}: {} added, {} replaced, {} kept, {} lines skipped (imported records are checked on this machine before first use)",
        caches.local.describe(),
        report.added,
        report.replaced,
        report.kept,
        report.skipped
    );
    if let Some(shared) = &caches.shared {
        if shared.is_read_only() {
            println!("the shared cache {} is read-only: not written", shared.describe());
        } else {
            match import(shared, &parsed) {
                Ok(r) => println!(
                    "imported {name} into {}: {} added, {} replaced, {} kept",
                    shared.describe(),
                    r.added,
                    r.replaced,
                    r.kept
                ),
                Err(e) => eprintln!("warning: {e}; imported into the local cache only"),
            }
        }
    }
    Ok(())
}
