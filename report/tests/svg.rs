//! The charts and the files on disk.

use tcc_report::{ReportError, speedups, write_report};

use crate::{fixture, fixture_input};

fn parse(text: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(text).unwrap()
}

fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants().filter(|n| n.has_tag_name("text")).map(|n| n.text().unwrap_or("").trim().to_string()).collect()
}

#[test]
fn writes_the_three_files_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let files = write_report(&fixture_input(), &out).unwrap();
    assert_eq!(files.roofline, out.join("roofline.svg"));
    assert_eq!(files.speedup, out.join("speedup.svg"));
    assert_eq!(files.markdown, out.join("report.md"));
    // Writing again replaces the files in place and leaves no temporary file behind.
    write_report(&fixture_input(), &out).unwrap();
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["report.md", "roofline.svg", "speedup.svg"]);
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    assert_eq!(md, tcc_report::markdown_report(&fixture_input()));
}

#[test]
fn roofline_has_one_point_per_row_and_labelled_ceilings() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = fixture_input();
    // A row with no flops is listed in report.md but cannot be a point.
    let mut no_flops = input.peers[0].clone();
    no_flops.implementation = "no_flops_peer".to_string();
    no_flops.gflops = None;
    input.peers.push(no_flops);
    // Peer rows of workloads tcc did not run are not drawn either.
    input.peers.extend(tcc_report::read_rows_jsonl(&fixture("peers_h100.jsonl")).unwrap());
    let files = write_report(&input, dir.path()).unwrap();
    let svg = std::fs::read_to_string(&files.roofline).unwrap();
    let doc = parse(&svg);
    let circles = doc.descendants().filter(|n| n.has_tag_name("circle")).count();
    let fixture = fixture_input();
    assert_eq!(circles, fixture.rows.len() + fixture.peers.len());
    let t = texts(&doc);
    assert!(t.iter().any(|s| s == "bandwidth 20 GB/s"), "{t:?}");
    assert!(t.iter().any(|s| s == "(fixture value, not measured)"), "{t:?}");
    assert!(t.iter().any(|s| s == "fixture FMA f32 600 GFLOP/s"), "{t:?}");
    for name in
        ["tcc:cpu:cranelift", "tcc:cpu:llvm", "numpy", "1  cpu_gemm_f32_1024", "5  fixture_rowsum_f32_4096x1024"]
    {
        assert!(t.iter().any(|s| s == name), "{name} missing from {t:?}");
    }
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    assert!(md.contains("Not on the roofline (no positive GFLOP/s and GB/s): cpu_gemm_f32_1024 (no_flops_peer)."));
}

#[test]
fn speedup_chart_has_one_bar_per_tcc_row_with_a_peer() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture_input();
    let files = write_report(&input, dir.path()).unwrap();
    let svg = std::fs::read_to_string(&files.speedup).unwrap();
    let doc = parse(&svg);
    let values: Vec<String> = texts(&doc).into_iter().filter(|s| s.contains("x  vs ")).collect();
    let expected = speedups(&input);
    assert_eq!(values.len(), expected.len());
    for (shown, s) in values.iter().zip(&expected) {
        let (number, peer) = shown.split_once("x  vs ").unwrap();
        assert_eq!(peer, s.best_peer_impl);
        // Three significant digits.
        let v: f64 = number.parse().unwrap();
        assert!((v - s.speedup).abs() <= s.speedup * 5e-3, "{shown} vs {}", s.speedup);
    }
}

#[test]
fn charts_render_with_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = fixture_input();
    input.rows.clear();
    let files = write_report(&input, dir.path()).unwrap();
    let roof = std::fs::read_to_string(&files.roofline).unwrap();
    assert_eq!(parse(&roof).descendants().filter(|n| n.has_tag_name("circle")).count(), 0);
    let speed = std::fs::read_to_string(&files.speedup).unwrap();
    assert!(texts(&parse(&speed)).iter().any(|s| s.starts_with("No workload has both")));
}

#[test]
fn bad_ceilings_and_rows_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let mut input = fixture_input();
    input.ceilings.bandwidth_gbps = 0.0;
    assert!(matches!(write_report(&input, &out), Err(ReportError::BadCeiling(_))));
    let mut input = fixture_input();
    input.ceilings.compute.clear();
    assert!(matches!(write_report(&input, &out), Err(ReportError::BadCeiling(_))));
    let mut input = fixture_input();
    input.ceilings.compute[0].gflops = f64::NAN;
    assert!(matches!(write_report(&input, &out), Err(ReportError::BadCeiling(_))));
    let mut input = fixture_input();
    input.rows[1].median_ms = 0.0;
    match write_report(&input, &out) {
        Err(ReportError::BadRow { implementation, .. }) => {
            assert_eq!(implementation, "tcc:cpu:llvm")
        }
        other => panic!("expected a bad row, got {other:?}"),
    }
    assert!(!out.exists());
}

#[test]
fn an_unwritable_folder_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a_file");
    std::fs::write(&file, "x").unwrap();
    let err = write_report(&fixture_input(), &file.join("sub")).unwrap_err();
    assert!(matches!(err, ReportError::Io { .. }), "{err:?}");
}

#[test]
fn a_single_bar_renders() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = fixture_input();
    input.rows.truncate(1);
    let files = write_report(&input, dir.path()).unwrap();
    let svg = std::fs::read_to_string(&files.speedup).unwrap();
    let values: Vec<String> = texts(&parse(&svg)).into_iter().filter(|s| s.contains("x  vs ")).collect();
    assert_eq!(values, ["0.751x  vs numpy"]);
    let roof = std::fs::read_to_string(&files.roofline).unwrap();
    // One tcc row and the one peer row of its workload.
    assert_eq!(parse(&roof).descendants().filter(|n| n.has_tag_name("circle")).count(), 2);
}
