//! Reading rows out of a damaged SQLite file without SQLite: every page (of the database file and,
//! newer, of its write-ahead log) that is a table or index leaf is parsed on its own, so rows
//! survive whatever happened to the pages above them (the table's root, its interior pages).
//!
//! Only the parts of the file format (sqlite.org/fileformat2.html) that leaf rows need: the
//! header's page size, b-tree leaf pages, cells with their overflow chains, and the record format.
//! Nothing here trusts the file: every offset is checked, overflow chains are bounded, and a
//! malformed cell is skipped.

use std::collections::BTreeMap;

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// NULL, a float or a blob: nothing a tuning-cache row holds where it matters.
    Other,
    /// An integer.
    Int(i64),
    /// Text (invalid UTF-8 is replaced).
    Text(String),
}

/// A row found in a table leaf, with its rowid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableRow {
    /// The rowid.
    pub(crate) rowid: i64,
    /// The columns.
    pub(crate) values: Vec<Value>,
}

/// What a scan found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Rows of table leaves.
    pub(crate) table_rows: Vec<TableRow>,
    /// Rows (key columns then rowid) of index leaves.
    pub(crate) index_rows: Vec<Vec<Value>>,
}

const LEAF_INDEX: u8 = 0x0a;
const LEAF_TABLE: u8 = 0x0d;
/// Longest overflow chain followed (a record is at most 64 KiB: 17 pages of 4 KiB).
const MAX_OVERFLOW_PAGES: usize = 1024;

/// Scans `db` (the database file's bytes) and `wal` (its write-ahead log's, or empty): the newest
/// copy of each page wins.
pub(crate) fn scan(db: &[u8], wal: &[u8]) -> Scan {
    let page_size = page_size(db).or_else(|| wal_page_size(wal)).unwrap_or(4096);
    let reserved = db.get(20).map_or(0, |&r| usize::from(r));
    let usable = page_size.saturating_sub(reserved).max(480);
    let mut pages: BTreeMap<u32, &[u8]> = BTreeMap::new();
    for (i, page) in db.chunks_exact(page_size).enumerate() {
        if let Ok(number) = u32::try_from(i + 1) {
            pages.insert(number, page);
        }
    }
    for (number, page) in wal_frames(wal, page_size) {
        pages.insert(number, page);
    }
    let file = Pages { pages, usable };
    let mut found = Scan::default();
    for (&number, page) in &file.pages {
        let header = if number == 1 { 100 } else { 0 };
        match page.get(header) {
            Some(&LEAF_TABLE) => found.table_rows.extend(file.leaf_cells(page, header, true).filter_map(|c| {
                let (rowid, payload) = c?;
                Some(TableRow { rowid: rowid?, values: record(&payload)? })
            })),
            Some(&LEAF_INDEX) => {
                found.index_rows.extend(file.leaf_cells(page, header, false).filter_map(|c| record(&c?.1)))
            }
            _ => {}
        }
    }
    found
}

/// The page size the file header gives, if the header is there.
fn page_size(db: &[u8]) -> Option<usize> {
    if !db.starts_with(b"SQLite format 3\0") {
        return None;
    }
    let raw = u16::from_be_bytes([*db.get(16)?, *db.get(17)?]);
    let size = if raw == 1 { 65_536 } else { usize::from(raw) };
    (size.is_power_of_two() && (512..=65_536).contains(&size)).then_some(size)
}

/// The page size a write-ahead log's header gives.
fn wal_page_size(wal: &[u8]) -> Option<usize> {
    let size = usize::try_from(u32::from_be_bytes(wal.get(8..12)?.try_into().ok()?)).ok()?;
    (size.is_power_of_two() && (512..=65_536).contains(&size)).then_some(size)
}

/// The frames of a write-ahead log: (page number, page), oldest first.
fn wal_frames(wal: &[u8], page_size: usize) -> Vec<(u32, &[u8])> {
    const WAL_HEADER: usize = 32;
    const FRAME_HEADER: usize = 24;
    let mut out = Vec::new();
    let mut at = WAL_HEADER;
    while let Some(frame) = wal.get(at..at + FRAME_HEADER + page_size) {
        let number = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        if number > 0 {
            out.push((number, &frame[FRAME_HEADER..]));
        }
        at += FRAME_HEADER + page_size;
    }
    out
}

struct Pages<'a> {
    pages: BTreeMap<u32, &'a [u8]>,
    usable: usize,
}

type Cell = Option<(Option<i64>, Vec<u8>)>;

impl Pages<'_> {
    /// The cells of a leaf page: (rowid for a table leaf, whole payload); `None` for a cell that
    /// does not parse.
    fn leaf_cells<'p>(&'p self, page: &'p [u8], header: usize, table: bool) -> impl Iterator<Item = Cell> + 'p {
        let count = page.get(header + 3..header + 5).map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        let pointers = header + 8;
        (0..count).map(move |i| {
            let at = pointers + 2 * i;
            let offset = usize::from(u16::from_be_bytes([*page.get(at)?, *page.get(at + 1)?]));
            self.cell(page, offset, table)
        })
    }

    fn cell(&self, page: &[u8], offset: usize, table: bool) -> Cell {
        let (size, n) = varint(page.get(offset..)?)?;
        let mut at = offset + n;
        let rowid = if table {
            let (rowid, n) = varint(page.get(at..)?)?;
            at += n;
            Some(rowid as i64)
        } else {
            None
        };
        let size = usize::try_from(size).ok().filter(|&s| s <= 1 << 20)?;
        let local = self.local_size(size, table);
        let mut payload = page.get(at..at + local)?.to_vec();
        if local < size {
            let next = page.get(at + local..at + local + 4)?;
            let mut next = u32::from_be_bytes([next[0], next[1], next[2], next[3]]);
            let mut followed = 0;
            while payload.len() < size {
                followed += 1;
                if next == 0 || followed > MAX_OVERFLOW_PAGES {
                    return None;
                }
                let overflow = self.pages.get(&next)?;
                let content = overflow.get(4..self.usable)?;
                let take = content.len().min(size - payload.len());
                payload.extend_from_slice(&content[..take]);
                next = u32::from_be_bytes([overflow[0], overflow[1], overflow[2], overflow[3]]);
            }
        }
        Some((rowid, payload))
    }

    /// How much of a payload of `size` bytes is stored in the cell itself.
    fn local_size(&self, size: usize, table: bool) -> usize {
        let u = self.usable;
        let max_local = if table { u - 35 } else { (u - 12) * 64 / 255 - 23 };
        if size <= max_local {
            return size;
        }
        let min_local = (u - 12) * 32 / 255 - 23;
        let k = min_local + (size - min_local) % (u - 4);
        if k <= max_local { k } else { min_local }
    }
}

/// SQLite's variable-length integer: (value, bytes read).
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((value << 8) | u64::from(b), 9));
        }
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Decodes a record (header of serial types, then the values).
fn record(payload: &[u8]) -> Option<Vec<Value>> {
    let (header_size, mut at) = varint(payload)?;
    let header_size = usize::try_from(header_size).ok()?;
    let mut types = Vec::new();
    while at < header_size {
        let (t, n) = varint(payload.get(at..header_size)?)?;
        types.push(t);
        at += n;
    }
    let mut body = header_size;
    let mut values = Vec::with_capacity(types.len());
    for t in types {
        let len = match t {
            0 | 8 | 9 => 0,
            1..=4 => t as usize,
            5 => 6,
            6 | 7 => 8,
            10 | 11 => return None,
            n => usize::try_from((n - 12) / 2).ok()?,
        };
        let bytes = payload.get(body..body.checked_add(len)?)?;
        body += len;
        values.push(match t {
            8 => Value::Int(0),
            9 => Value::Int(1),
            1..=6 => {
                let mut v: i64 = if bytes.first().is_some_and(|&b| b & 0x80 != 0) { -1 } else { 0 };
                for &b in bytes {
                    v = (v << 8) | i64::from(b);
                }
                Value::Int(v)
            }
            n if n >= 13 && n % 2 == 1 => Value::Text(String::from_utf8_lossy(bytes).into_owned()),
            _ => Value::Other,
        });
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_records() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x81]), None);
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        // header size 4; a 2-byte text, a one-byte int (-2), the constant 1; then the values.
        let rec = [4, 17, 1, 9, b'h', b'i', 0xfe];
        assert_eq!(record(&rec), Some(vec![Value::Text("hi".into()), Value::Int(-2), Value::Int(1)]));
        assert_eq!(record(&rec[..5]), None, "a truncated value");
        assert_eq!(record(&[]), None);
    }

    #[test]
    fn a_real_database_scans_to_its_rows_even_without_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite3");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT, b INTEGER); CREATE INDEX t_a ON t(a);").unwrap();
        let long = "x".repeat(10_000); // overflows onto other pages
        for i in 0..200 {
            let text = if i == 7 { long.clone() } else { format!("row {i}") };
            conn.execute("INSERT INTO t VALUES (?1, ?2)", rusqlite::params![text, i]).unwrap();
        }
        drop(conn);
        let mut bytes = std::fs::read(&path).unwrap();
        let found = scan(&bytes, &[]);
        let rows: Vec<&TableRow> = found.table_rows.iter().filter(|r| r.values.len() == 2).collect();
        assert_eq!(rows.len(), 200);
        assert!(rows.iter().any(|r| r.values[0] == Value::Text(long.clone()) && r.values[1] == Value::Int(7)));
        assert_eq!(found.index_rows.len(), 200);
        // The header and the first pages gone: the other leaves still read.
        bytes[..8192].fill(0);
        let found = scan(&bytes, &[]);
        assert!(found.table_rows.len() > 150, "{}", found.table_rows.len());
        // Garbage is no crash.
        let garbage: Vec<u8> = (0..50_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let _ = scan(&garbage, &garbage);
    }

    /// A small real database (two tables with an index, a long row on overflow pages).
    fn small_database() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite3");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA page_size = 512; CREATE TABLE t (a TEXT, b INTEGER); CREATE INDEX t_a ON t(a);")
            .unwrap();
        for i in 0..60 {
            let text = if i == 3 { "y".repeat(3000) } else { format!("row {i}") };
            conn.execute("INSERT INTO t VALUES (?1, ?2)", rusqlite::params![text, i]).unwrap();
        }
        drop(conn);
        std::fs::read(&path).unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever the bytes (with or without a valid header and page size), a scan returns.
        #[test]
        fn any_bytes_scan_without_a_panic(
            mut db in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6000),
            wal in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            header in proptest::prelude::any::<bool>(),
            page in 9u32..17,
        ) {
            if header && db.len() >= 100 {
                db[..16].copy_from_slice(b"SQLite format 3\0");
                let size = if page == 16 { 1u16 } else { 1u16 << page };
                db[16..18].copy_from_slice(&size.to_be_bytes());
            }
            let _ = scan(&db, &wal);
        }

        /// A real database with bytes overwritten anywhere (headers, pointers, varints, overflow
        /// links) scans without a panic. (It may find more rows than the table holds: stale
        /// copies of split pages stay in the file, and `repair` keeps one record per key.)
        #[test]
        fn a_corrupted_database_scans_without_a_panic(
            hits in proptest::collection::vec((0usize..1 << 16, proptest::prelude::any::<u8>()), 1..64),
        ) {
            let mut db = small_database();
            let len = db.len();
            for (at, value) in hits {
                db[at % len] = value;
            }
            let _ = scan(&db, &[]);
        }
    }
}
