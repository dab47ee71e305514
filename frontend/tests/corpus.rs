//! The bad-program corpus (`tests/bad/*.tc` of the workspace): every file is an error, never a
//! panic, and its rendered diagnostics are snapshots.

use crate::common::{on_test_stack, workspace};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = workspace().join("tests").join("bad");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tc"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_has_at_least_thirty_files() {
    assert!(corpus().len() >= 30, "only {} files in tests/bad", corpus().len());
}

#[test]
fn every_bad_file_is_an_error_with_a_snapshot() {
    for (name, bytes) in corpus() {
        let file = format!("{name}.tc");
        let rendered = on_test_stack(move || match tcc_frontend::parse_bytes(&file, &bytes) {
            Ok(m) => panic!("{file} lowered to a module of {} fns", m.functions.len()),
            Err(d) => {
                assert!(!d.is_empty(), "{file}: an error without diagnostics");
                d.render(false)
            }
        });
        insta::assert_snapshot!(name, rendered);
    }
}
