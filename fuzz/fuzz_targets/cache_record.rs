//! The tuning cache's decoders on arbitrary bytes: one record (`CacheRecord::decode`, what the
//! SQLite and Redis stores read), a JSONL export (`cache::parse`, what `tcc cache import` reads)
//! and a lockfile (`Lockfile::parse`). Never a panic; what decodes is in bounds and re-encodes to
//! the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcc_autotune::cache::{CacheRecord, Lockfile, parse};

fuzz_target!(|data: &[u8]| {
    let parsed = parse(data).unwrap_or_default();
    for r in &parsed.records {
        assert!(r.validate().is_ok(), "an imported record is out of bounds: {r:?}");
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(record) = CacheRecord::decode(text) {
        let encoded = record.encode().expect("a decoded record encodes");
        let again = CacheRecord::decode(&encoded).expect("an encoded record decodes");
        assert_eq!(again, record, "a record does not round-trip");
        let _ = CacheRecord::decode_stored(record.key.hash().as_str(), text).expect("stored under its own hash");
    }
    if let Ok(lock) = Lockfile::parse(text) {
        let again = Lockfile::parse(&lock.to_text().expect("a lockfile encodes")).expect("an encoded lockfile parses");
        assert_eq!(again, lock, "a lockfile does not round-trip");
    }
});
