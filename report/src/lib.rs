//! tcc's benchmark report (`tcc bench --report DIR`): a roofline chart, a chart of the speedup
//! over the best peer per workload (both SVG, drawn with plotters) and a Markdown table holding
//! every number, the device, the date and the command line.
//!
//! Conventions:
//! - Arithmetic intensity (AI) is `gflops / gbps` of a row, in FLOP per byte: both rates divide
//!   the workload's fixed flop and byte counts (peers.py's `flops_bytes`) by the same median
//!   time, so their ratio is flops / bytes.
//! - Speedup over the best peer is the best (smallest) peer `median_ms` on the workload divided
//!   by tcc's `median_ms`; with several tcc implementations, each gets its own bar.
//! - The ceilings are measured by the caller in the same run ([`Ceilings`]), never datasheet
//!   numbers; this crate only draws them.

mod analysis;
mod error;
mod input;
mod markdown;
mod num;
mod roofline;
mod row;
mod speedup;
mod style;
mod write;

pub use analysis::{Speedup, speedups};
pub use error::ReportError;
pub use input::{Ceilings, ComputeCeiling, ReportInput};
pub use markdown::{markdown_report, markdown_table};
pub use row::{BenchRow, RowError, read_rows_from, read_rows_jsonl};
pub use write::{ReportFiles, write_report};
