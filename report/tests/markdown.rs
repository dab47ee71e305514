//! The Markdown table and report page.

use tcc_report::{BenchRow, markdown_report, markdown_table, speedups};

use crate::{fixture, fixture_input};

#[test]
fn table_snapshot() {
    insta::assert_snapshot!(markdown_table(&fixture_input()));
}

/// The data lines of a table, split into trimmed cells.
fn cells(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(2)
        .map(|l| {
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            inner.split(" | ").map(|c| c.trim().to_string()).collect()
        })
        .collect()
}

fn number(cell: &str) -> Option<f64> {
    if cell == "n/a" { None } else { Some(cell.parse::<f64>().unwrap()) }
}

/// Whether `shown` is `exact` rounded to 4 significant digits.
fn rounds_to(shown: &str, exact: f64) -> bool {
    let v: f64 = shown.parse().unwrap();
    (v - exact).abs() <= exact.abs() * 5e-4 + f64::EPSILON
}

#[test]
fn every_number_in_the_table_is_the_rows_number() {
    let input = fixture_input();
    let table = markdown_table(&input);
    let lines = cells(&table);
    assert_eq!(lines.len(), input.rows.len() + input.peers.len());
    for c in &lines {
        assert_eq!(c.len(), 11, "{c:?}");
        let pool: &[BenchRow] = if c[3] == "tcc" { &input.rows } else { &input.peers };
        let row = pool.iter().find(|r| r.workload == c[1] && r.implementation == c[2]).unwrap();
        assert_eq!(c[4].parse::<f64>().unwrap(), row.median_ms, "{c:?}");
        assert_eq!(number(&c[5]), row.gflops, "{c:?}");
        assert_eq!(number(&c[6]), row.gbps, "{c:?}");
        assert_eq!(number(&c[8]), row.max_rel_err, "{c:?}");
        let ai = row.gflops.unwrap() / row.gbps.unwrap();
        assert!(rounds_to(&c[7], ai), "AI {} vs {ai}", c[7]);
        // compare.py's rule: the best peer is the peer row with the smallest median_ms.
        let best = input
            .peers
            .iter()
            .filter(|p| p.workload == row.workload)
            .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms));
        match (c[3].as_str(), best) {
            ("tcc", Some(b)) => {
                assert!(rounds_to(&c[9], b.median_ms / row.median_ms), "{c:?}");
                assert_eq!(c[10], b.implementation);
            }
            ("tcc", None) => assert_eq!((c[9].as_str(), c[10].as_str()), ("n/a", "no peer row")),
            _ => assert_eq!((c[9].as_str(), c[10].as_str()), ("", "")),
        }
    }
}

#[test]
fn speedups_follow_compare_py() {
    let s = speedups(&fixture_input());
    // Five tcc rows have a peer; the fixture's rowsum workload has none.
    assert_eq!(s.len(), 5);
    let llvm = s.iter().find(|s| s.tcc_impl == "tcc:cpu:llvm").unwrap();
    assert_eq!(llvm.best_peer_impl, "numpy");
    assert_eq!(llvm.speedup, 5.6292 / 4.25);
    assert!(s.iter().all(|s| s.speedup == s.best_peer_ms / s.tcc_ms));
}

#[test]
fn the_best_peer_is_the_fastest_one() {
    let mut input = fixture_input();
    let mut fast = input.peers[0].clone();
    fast.implementation = "fast_peer".to_string();
    fast.median_ms = 1.0;
    input.peers.push(fast);
    let s = speedups(&input);
    let gemm: Vec<_> = s.iter().filter(|s| s.workload == "cpu_gemm_f32_1024").collect();
    assert_eq!(gemm.len(), 2);
    assert!(gemm.iter().all(|s| s.best_peer_impl == "fast_peer" && s.best_peer_ms == 1.0));
}

#[test]
fn cells_escape_pipes_and_line_breaks() {
    let mut input = fixture_input();
    input.rows[0].implementation = "tcc:a|b\nc".to_string();
    let table = markdown_table(&input);
    assert!(table.contains("| tcc:a\\|b c |"), "{table}");
    assert!(table.lines().all(|l| l.starts_with('|') && l.ends_with('|')));
}

#[test]
fn report_page_holds_device_date_command_and_ceilings() {
    let mut input = fixture_input();
    input.peers.extend(tcc_report::read_rows_jsonl(&fixture("peers_h100.jsonl")).unwrap());
    let page = markdown_report(&input);
    assert!(page.contains("- Device: fixture device (2-core CPU)\n"));
    assert!(page.contains("- Date: 2026-01-01 (fixture)\n"));
    // The command line holds backticks, so it sits in a plain triple-backtick fence.
    assert!(page.contains(&format!("```\n{}\n```\n", input.command_line)));
    assert!(page.contains("| bandwidth: fixture value, not measured | 20 | GB/s |"));
    assert!(page.contains("| compute: fixture FMA f32 | 600 | GFLOP/s |"));
    assert!(page.contains(&markdown_table(&input)));
    // H100 peer rows have no tcc row in this run: named, not tabled.
    assert!(page.contains("Peer rows left out, tcc did not run their workload: gemm_f16_1024 (torch_eager)"));
    assert!(page.contains("ceiling_copy_1GiB (torch_copy)"));
    assert!(!markdown_table(&input).contains("gemm_f16_1024"));
}

#[test]
fn a_fence_outgrows_the_backticks_inside() {
    let mut input = fixture_input();
    input.command_line = "echo ```x```".to_string();
    let page = markdown_report(&input);
    assert!(page.contains("````\necho ```x```\n````\n"), "{page}");
}
