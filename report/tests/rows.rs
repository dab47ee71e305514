//! Reading rows from JSONL.

use std::io::Cursor;

use tcc_report::{RowError, read_rows_from};

use crate::{fixture, peer_rows, tcc_rows};

#[test]
fn reads_the_fixtures() {
    let peers = peer_rows();
    assert_eq!(peers.len(), 4);
    assert_eq!(peers[0].workload, "cpu_gemm_f32_1024");
    assert_eq!(peers[0].implementation, "numpy");
    assert_eq!(peers[0].median_ms, 5.6292);
    assert_eq!(peers[0].gflops, Some(381.5));
    assert_eq!(peers[0].gbps, Some(2.2));
    assert_eq!(peers[0].max_rel_err, Some(0.0));
    let tcc = tcc_rows();
    assert_eq!(tcc.len(), 6);
    assert!(tcc.iter().all(|r| r.implementation.starts_with("tcc:")));
}

#[test]
fn reads_the_h100_peer_file_with_its_ceiling_row() {
    // The H100 file has a copy-ceiling row with no gflops and no max_rel_err.
    let rows = tcc_report::read_rows_jsonl(&fixture("peers_h100.jsonl")).unwrap();
    assert_eq!(rows.len(), 32);
    let copy = rows.iter().find(|r| r.implementation == "torch_copy").unwrap();
    assert_eq!(copy.median_ms, 0.7155519723892212);
    assert_eq!(copy.gflops, None);
    assert_eq!(copy.max_rel_err, None);
    assert_eq!(copy.gbps, Some(3001.2));
    assert!(rows.iter().any(|r| r.first_call_s.is_some()));
}

#[test]
fn blank_lines_are_skipped() {
    let text = "\n{\"workload\":\"w\",\"impl\":\"numpy\",\"median_ms\":1.5}\n   \n";
    let rows = read_rows_from(Cursor::new(text), "inline").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].arithmetic_intensity(), None);
}

fn bad_line(text: &str) -> (usize, String) {
    match read_rows_from(Cursor::new(text), "input.jsonl") {
        Err(RowError::BadLine { line, message, what }) => {
            assert_eq!(what, "input.jsonl");
            (line, message)
        }
        other => panic!("expected a bad line, got {other:?}"),
    }
}

#[test]
fn a_bad_line_is_an_error_naming_its_line_number() {
    let good = "{\"workload\":\"w\",\"impl\":\"numpy\",\"median_ms\":1.5}";
    let (line, _) = bad_line(&format!("{good}\n\n{good}\nnot json\n"));
    assert_eq!(line, 4);
    let (line, message) = bad_line(&format!("{good}\n{{\"workload\":\"w\",\"impl\":\"x\"}}\n"));
    assert_eq!(line, 2);
    assert!(message.contains("median_ms"), "{message}");
    let (line, message) = bad_line("{\"workload\":\"w\",\"impl\":\"x\",\"median_ms\":0}");
    assert_eq!(line, 1);
    assert!(message.contains("positive"), "{message}");
    let (_, message) = bad_line("{\"workload\":\"w\",\"impl\":\"x\",\"median_ms\":1,\"gbps\":-2}");
    assert!(message.contains("gbps"), "{message}");
    let err = read_rows_from(Cursor::new("x\n"), "input.jsonl").unwrap_err();
    assert!(err.to_string().starts_with("input.jsonl:1: "), "{err}");
}

#[test]
fn a_missing_file_is_an_io_error() {
    let err = tcc_report::read_rows_jsonl(&fixture("no_such_file.jsonl")).unwrap_err();
    assert!(matches!(err, RowError::Io { .. }), "{err:?}");
}
