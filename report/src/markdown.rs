//! The Markdown part of the report: the results table and the report page around it.

use std::fmt::Write as _;

use crate::analysis::{Analysis, analyse};
use crate::input::ReportInput;
use crate::num::{exact, exact_or_na, sig};

/// Significant digits of the derived columns (arithmetic intensity, speedup).
const DERIVED_DIGITS: i32 = 4;

/// The results table: one line per row of every workload tcc ran, tcc's rows first.
///
/// `median_ms`, `GFLOP/s`, `GB/s` and `max_rel_err` are the rows' numbers exactly as read (the
/// shortest text that parses back to the same `f64`); `n/a` where the row has none. `AI` is
/// `gflops / gbps` in FLOP per byte and `speedup` is best peer `median_ms` / tcc `median_ms`,
/// both rounded to 4 significant digits. `#` numbers the workloads as the roofline labels them.
pub fn markdown_table(input: &ReportInput) -> String {
    table(&analyse(input))
}

fn table(analysis: &Analysis<'_>) -> String {
    let mut out = String::new();
    out.push_str(
        "| # | workload | impl | side | median_ms | GFLOP/s | GB/s | AI (FLOP/B) | max_rel_err | speedup | best peer |\n",
    );
    out.push_str("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for g in &analysis.workloads {
        for r in &g.tcc {
            let (speedup, best) = match g.best_peer {
                Some(b) => (sig(b.median_ms / r.median_ms, DERIVED_DIGITS), cell(&b.implementation)),
                None => ("n/a".to_string(), "no peer row".to_string()),
            };
            line(&mut out, g.number, r, "tcc", &speedup, &best);
        }
        for r in &g.peers {
            line(&mut out, g.number, r, "peer", "", "");
        }
    }
    out
}

fn line(out: &mut String, number: usize, r: &crate::row::BenchRow, side: &str, speedup: &str, best: &str) {
    let ai = r.arithmetic_intensity().map_or_else(|| "n/a".to_string(), |v| sig(v, DERIVED_DIGITS));
    // Writing into a String cannot fail.
    let _ = writeln!(
        out,
        "| {number} | {} | {} | {side} | {} | {} | {} | {ai} | {} | {speedup} | {best} |",
        cell(&r.workload),
        cell(&r.implementation),
        exact(r.median_ms),
        exact_or_na(r.gflops),
        exact_or_na(r.gbps),
        exact_or_na(r.max_rel_err),
    );
}

/// Text made safe for a table cell: `|` escaped, line breaks turned into spaces.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Text made safe for one line of a list item.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The whole `report.md`: device, date, command line, ceilings, the results table, notes.
pub fn markdown_report(input: &ReportInput) -> String {
    let analysis = analyse(input);
    let c = &input.ceilings;
    let mut out = String::new();
    out.push_str("# tcc benchmark report\n\n");
    let _ = writeln!(out, "- Device: {}", one_line(&input.device));
    let _ = writeln!(out, "- Date: {}", one_line(&input.date));
    out.push_str("- Command line:\n\n");
    out.push_str(&fenced(&input.command_line));
    out.push_str("\n## Ceilings\n\n");
    let _ = writeln!(
        out,
        "Measured by tcc in this run on {} at {}, independently of the kernels judged below.\n",
        one_line(&c.device),
        one_line(&c.measured_at)
    );
    out.push_str("| ceiling | value | unit |\n|---|---:|---|\n");
    let _ = writeln!(out, "| bandwidth: {} | {} | GB/s |", cell(&c.bandwidth_method), exact(c.bandwidth_gbps));
    for cc in &c.compute {
        let _ = writeln!(out, "| compute: {} | {} | GFLOP/s |", cell(&cc.label), exact(cc.gflops));
    }
    out.push_str("\n## Results\n\n");
    out.push_str(&table(&analysis));
    out.push_str(
        "\nAI is the arithmetic intensity, `gflops / gbps`: both rates divide the workload's fixed \
         flop and byte counts (peers.py's `flops_bytes`) by the same median time, so their ratio is \
         FLOP per byte. speedup is the best peer's `median_ms` divided by tcc's: above 1, tcc is \
         faster. Derived columns are rounded to 4 significant digits; every other number is the \
         row's own.\n",
    );
    let unplotted: Vec<String> = analysis
        .workloads
        .iter()
        .flat_map(|g| g.all_rows())
        .filter(|r| !r.is_plottable())
        .map(|r| format!("{} ({})", r.workload, r.implementation))
        .collect();
    if !unplotted.is_empty() {
        let _ = writeln!(out, "\nNot on the roofline (no positive GFLOP/s and GB/s): {}.", unplotted.join(", "));
    }
    if !analysis.unmatched_peers.is_empty() {
        let names: Vec<String> =
            analysis.unmatched_peers.iter().map(|r| format!("{} ({})", r.workload, r.implementation)).collect();
        let _ = writeln!(out, "\nPeer rows left out, tcc did not run their workload: {}.", names.join(", "));
    }
    out.push_str("\n## Charts\n\n![roofline](roofline.svg)\n\n![speedup over the best peer](speedup.svg)\n");
    out
}

/// A fenced code block whose fence is longer than any run of backticks in the text.
fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        run = if ch == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}\n{text}\n{fence}\n")
}
