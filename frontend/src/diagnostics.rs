//! The errors of a `.tc` file, located by byte ranges, rendered like rustc through miette.

use std::fmt;
use std::ops::Range;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};

use crate::diag::Diag;
use crate::line_index::LineIndex;
use crate::span::Loc;

/// At most this many errors are kept; a last one says how many more there were.
pub const MAX_SHOWN: usize = 100;

/// Width of rendered diagnostics, so output does not depend on the terminal.
const RENDER_WIDTH: usize = 100;

/// Source lines longer than this (in bytes) are not shown: the diagnostic names line and column
/// instead (miette cannot draw labels past column 65535, and such excerpts help nobody).
const MAX_SHOWN_LINE: usize = 1000;

/// A labeled byte range of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The bytes it points at.
    pub span: Range<usize>,
    /// What it says about them.
    pub text: String,
}

/// One error of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The headline, such as "cannot add f32[4, 5] and f32[3]".
    pub message: String,
    /// The bytes the error is about (empty for errors about the whole file).
    pub span: Range<usize>,
    /// The label under `span` (may be empty).
    pub label: String,
    /// Other places worth showing.
    pub labels: Vec<Label>,
    /// Extra facts.
    pub notes: Vec<String>,
    /// A suggestion.
    pub help: Option<String>,
}

/// Every error found in one file, with the file's name and text for rendering.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.render(false))]
pub struct Diagnostics {
    file_name: String,
    text: String,
    items: Vec<Diagnostic>,
}

fn convert(loc: &Loc, index: &mut LineIndex<'_>) -> Range<usize> {
    match loc {
        Loc::Tokens(sp) => index.range(sp),
        Loc::Bytes(r) => r.clone(),
        Loc::Start => 0..0,
    }
}

/// The source as shown: ASCII control characters other than tab and line breaks become spaces
/// (same length, so byte ranges still match), so rendered output is plain text.
fn displayable(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_control() && !matches!(c, '\n' | '\r' | '\t') { ' ' } else { c }).collect()
}

/// Clamps a range to `text` and to char boundaries (the spans we make already are; this keeps the
/// renderer safe whatever happens).
fn clamp(r: Range<usize>, text: &str) -> Range<usize> {
    let mut start = r.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = r.end.clamp(start, text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

impl Diagnostics {
    /// Builds the diagnostics of `file_name` from located errors; `source` is the text spans refer to.
    pub(crate) fn from_diags(file_name: &str, source: &str, diags: Vec<Diag>) -> Diagnostics {
        let shown = displayable(source);
        let mut index = LineIndex::new(source);
        let total = diags.len();
        let mut items: Vec<Diagnostic> = diags
            .into_iter()
            .map(|d| Diagnostic {
                message: d.message,
                span: clamp(convert(&d.primary, &mut index), &shown),
                label: d.label,
                labels: d
                    .secondary
                    .iter()
                    .map(|(loc, text)| Label { span: clamp(convert(loc, &mut index), &shown), text: text.clone() })
                    .collect(),
                notes: d.notes,
                help: d.help,
            })
            .collect();
        items.sort_by_key(|d| d.span.start);
        if total > MAX_SHOWN {
            items.truncate(MAX_SHOWN);
            items.push(Diagnostic {
                message: format!("too many errors: {} more not shown", total - MAX_SHOWN),
                span: 0..0,
                label: String::new(),
                labels: Vec::new(),
                notes: Vec::new(),
                help: None,
            });
        }
        Diagnostics { file_name: file_name.to_string(), text: shown, items }
    }

    /// A single error about the file as a whole or a byte range of it.
    pub(crate) fn single(file_name: &str, source: &str, diag: Diag) -> Diagnostics {
        Diagnostics::from_diags(file_name, source, vec![diag])
    }

    /// How many errors there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True if there are none (never the case for an `Err` of the parse functions).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The errors, in source order.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.items.iter()
    }

    /// The file's name as given.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The text the byte ranges refer to (non-UTF-8 bytes replaced, control characters as spaces).
    pub fn source(&self) -> &str {
        &self.text
    }

    /// Renders every error like rustc does (source excerpts, labels, help), with ANSI colors or
    /// without; the width is fixed, so the output is deterministic.
    pub fn render(&self, color: bool) -> String {
        let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
        let handler = GraphicalReportHandler::new_themed(theme).with_width(RENDER_WIDTH).with_links(false);
        let src = NamedSource::new(&self.file_name, self.text.clone());
        let mut out = String::new();
        for d in &self.items {
            let on_long_line = std::iter::once(&d.span)
                .chain(d.labels.iter().map(|l| &l.span))
                .any(|r| self.line_len_at(r.start) > MAX_SHOWN_LINE || self.line_len_at(r.end) > MAX_SHOWN_LINE);
            let report = Report { d, src: &src };
            if on_long_line || handler.render_report(&mut out, &report).is_err() {
                self.render_plain(d, &mut out);
            }
            for note in &d.notes {
                out.push_str("  note: ");
                out.push_str(note);
                out.push('\n');
            }
        }
        out
    }
}

impl Diagnostics {
    /// The length in bytes of the line holding byte `at`.
    fn line_len_at(&self, at: usize) -> usize {
        let text = &self.text;
        let at = at.min(text.len());
        let start = text.get(..at).and_then(|s| s.rfind('\n')).map_or(0, |i| i + 1);
        let end = text.get(at..).and_then(|s| s.find('\n')).map_or(text.len(), |i| at + i);
        end.saturating_sub(start)
    }

    /// `line:column` (from 1, column in chars) of byte `at`.
    fn position(&self, at: usize) -> String {
        let before = self.text.get(..at.min(self.text.len())).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("{line}:{column}")
    }

    /// A diagnostic without source excerpt: message, positions and labels as lines.
    fn render_plain(&self, d: &Diagnostic, out: &mut String) {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = writeln!(out, "  × {}", d.message);
        let _ = writeln!(out, "   --> {}:{}", self.file_name, self.position(d.span.start));
        if !d.label.is_empty() {
            let _ = writeln!(out, "  label: {}", d.label);
        }
        for l in &d.labels {
            let _ = writeln!(out, "  label at {}:{}: {}", self.file_name, self.position(l.span.start), l.text);
        }
        if let Some(h) = &d.help {
            let _ = writeln!(out, "  help: {h}");
        }
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// One diagnostic with the source, as miette wants it.
struct Report<'a> {
    d: &'a Diagnostic,
    src: &'a NamedSource<String>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.d.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.d.message)
    }
}

impl std::error::Error for Report<'_> {}

fn nonempty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

impl miette::Diagnostic for Report<'_> {
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let whole_file = self.d.span.is_empty() && self.d.label.is_empty() && self.d.labels.is_empty();
        if whole_file {
            return None;
        }
        let primary = LabeledSpan::new_primary_with_span(nonempty(&self.d.label), self.d.span.clone());
        let rest = self.d.labels.iter().map(|l| LabeledSpan::new_with_span(nonempty(&l.text), l.span.clone()));
        Some(Box::new(std::iter::once(primary).chain(rest)))
    }

    fn help(&self) -> Option<Box<dyn fmt::Display + '_>> {
        // Notes are appended after the report by `Diagnostics::render`.
        self.d.help.as_ref().map(|h| Box::new(h.clone()) as Box<dyn fmt::Display>)
    }
}
