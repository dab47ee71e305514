//! `tcc cache export/import`: a sorted, stable JSONL file (one record per line, sorted by key
//! hash) that can live in a repository and be merged; on conflict the faster measurement on the
//! same device key wins. Bad lines are skipped with a warning and counted.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use crate::bounds::MAX_RECORD_BYTES;
use crate::cache::key::KeyHash;
use crate::cache::record::{CacheRecord, RecordState, prefer};
use crate::cache::store::{CacheStore, MergeOutcome, StoreError};

/// A line that was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based line number.
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// The records of a JSONL file and the lines that could not be used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Decoded, bounds-checked records in file order.
    pub records: Vec<CacheRecord>,
    /// Lines skipped (garbled, truncated, out of bounds).
    pub skipped: Vec<Skipped>,
}

/// What an import did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// New keys.
    pub added: usize,
    /// Keys whose record the import replaced (it was faster).
    pub replaced: usize,
    /// Keys whose stored record was kept.
    pub kept: usize,
    /// Lines skipped.
    pub skipped: usize,
}

/// Records sorted by key hash, one JSON line each, quarantined ones left out.
pub fn to_jsonl(records: &[CacheRecord]) -> Result<String, StoreError> {
    let merged = merge(records.iter().filter(|r| r.state != RecordState::Quarantined).cloned());
    let mut out = String::new();
    for r in merged {
        out.push_str(&r.encode()?);
        out.push('\n');
    }
    Ok(out)
}

/// Writes every record of `store` to `out` as [`to_jsonl`] does; returns how many.
pub fn export(store: &dyn CacheStore, mut out: impl Write) -> Result<usize, StoreError> {
    let listing = store.list()?;
    let text = to_jsonl(&listing.records)?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(text.lines().count())
}

/// [`export`] to a file, written to a temporary file and renamed into place.
pub fn export_file(store: &dyn CacheStore, path: &Path) -> Result<usize, StoreError> {
    let text = to_jsonl(&store.list()?.records)?;
    tcc_files::write_atomically(path, text.as_bytes())?;
    Ok(text.lines().count())
}

/// Reads JSONL records. A line that is too long, not UTF-8, not a record or out of bounds (a
/// truncated last line, a merge-conflict marker) is skipped and listed in [`Parsed::skipped`] for
/// the caller to report.
pub fn parse(mut input: impl BufRead) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut line_no = 0;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let (n, too_long) = read_bounded_line(&mut input, &mut buf, MAX_RECORD_BYTES)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let reason = if too_long {
            Some(format!("longer than {MAX_RECORD_BYTES} bytes"))
        } else {
            match std::str::from_utf8(&buf) {
                Err(_) => Some("not UTF-8".to_string()),
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => match CacheRecord::decode(text.trim()) {
                    Ok(r) => {
                        parsed.records.push(r);
                        None
                    }
                    Err(e) => Some(e.to_string()),
                },
            }
        };
        if let Some(reason) = reason {
            // Counted, not logged: the caller says what it skipped, once (`tcc cache import` names
            // the file and the line).
            parsed.skipped.push(Skipped { line: line_no, reason });
        }
    }
    Ok(parsed)
}

/// Reads one line (without its newline) into `buf`, keeping at most `max` bytes. Returns the
/// bytes consumed and whether the line was longer than `max`.
fn read_bounded_line(input: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut too_long = false;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok((consumed, too_long));
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        let room = max.saturating_sub(buf.len());
        if chunk.len() > room {
            too_long = true;
        }
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(available.len());
        input.consume(used);
        consumed += used;
        if done.is_some() {
            return Ok((consumed, too_long));
        }
    }
}

/// Merges records into a store: each is marked unverified (it was measured elsewhere) and
/// merged by [`CacheStore::merge`] (the faster measurement on the same key wins).
pub fn import(store: &dyn CacheStore, parsed: &Parsed) -> Result<ImportReport, StoreError> {
    let mut report = ImportReport { skipped: parsed.skipped.len(), ..ImportReport::default() };
    for r in &parsed.records {
        let mut incoming = r.clone();
        incoming.state = RecordState::Unverified;
        match store.merge(&incoming)? {
            MergeOutcome::Added => report.added += 1,
            MergeOutcome::Replaced => report.replaced += 1,
            MergeOutcome::Kept => report.kept += 1,
        }
    }
    Ok(report)
}

/// Merges record sets (several exports, both sides of a git conflict): one record per key, the
/// faster measurement winning ([`prefer`]), sorted by key hash. The result does not depend on the
/// order of the inputs.
pub fn merge(records: impl IntoIterator<Item = CacheRecord>) -> Vec<CacheRecord> {
    let mut by_key: BTreeMap<KeyHash, CacheRecord> = BTreeMap::new();
    for r in records {
        let hash = r.key.hash();
        let keep_new = by_key.get(&hash).is_none_or(|old| !std::ptr::eq(prefer(old, &r), old));
        if keep_new {
            by_key.insert(hash, r);
        }
    }
    by_key.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::tests::record;

    #[test]
    fn export_is_sorted_and_stable() {
        let a = record(100);
        let mut b = record(200);
        b.key.shapes = "x=[1,2]".into();
        let one = to_jsonl(&[a.clone(), b.clone()]).unwrap();
        let two = to_jsonl(&[b.clone(), a.clone()]).unwrap();
        assert_eq!(one, two);
        let parsed = parse(one.as_bytes()).unwrap();
        assert!(parsed.skipped.is_empty());
        assert_eq!(to_jsonl(&parsed.records).unwrap(), one);
    }

    #[test]
    fn bad_lines_are_counted_not_fatal() {
        let good = record(100).encode().unwrap();
        let mut other = record(5);
        other.key.shapes = "y".into();
        let other = other.encode().unwrap();
        let text =
            format!("{good}\n<<<<<<< HEAD\n\n{}\n{}", "x".repeat(MAX_RECORD_BYTES + 10), &other[..other.len() / 2]);
        let parsed = parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.records.len(), 1);
        let lines: Vec<usize> = parsed.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![2, 4, 5]);
    }

    #[test]
    fn merge_keeps_the_faster_in_any_order() {
        let fast = record(100);
        let slow = record(300);
        let mut other = record(50);
        other.key.shapes = "z".into();
        let m1 = merge([fast.clone(), slow.clone(), other.clone()]);
        let m2 = merge([other.clone(), slow.clone(), fast.clone()]);
        assert_eq!(m1, m2);
        assert_eq!(m1.len(), 2);
        assert!(m1.contains(&fast));
    }
}
