//! Byte offsets of a `.tc` file from the line/column positions of proc-macro2 spans.
//!
//! proc-macro2 reports a line (from 1) and a column counted in chars; this converts them with an index
//! of the file's own lines, independent of proc-macro2's thread-wide source map.

use std::collections::HashMap;
use std::ops::Range;

use proc_macro2::LineColumn;

use crate::span::Sp;

/// Line starts of one text, with a per-line char table built on demand for non-ASCII lines.
#[derive(Debug)]
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
    ascii: Vec<bool>,
    chars: HashMap<usize, Vec<usize>>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text`.
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let ascii = (0..starts.len())
            .map(|l| {
                let start = starts[l];
                let end = starts.get(l + 1).copied().unwrap_or(text.len());
                text.get(start..end).is_none_or(str::is_ascii)
            })
            .collect();
        LineIndex { text, starts, ascii, chars: HashMap::new() }
    }

    /// The byte offset of a position (clamped to the text).
    pub fn offset(&mut self, pos: LineColumn) -> usize {
        let Some(line) = pos.line.checked_sub(1) else { return 0 };
        let Some(&start) = self.starts.get(line) else { return self.text.len() };
        let end = self.starts.get(line + 1).copied().unwrap_or(self.text.len());
        if self.ascii.get(line).copied().unwrap_or(false) {
            return start.saturating_add(pos.column).min(end);
        }
        let text = self.text;
        let offsets = self.chars.entry(line).or_insert_with(|| {
            text.get(start..end).map_or_else(Vec::new, |s| s.char_indices().map(|(i, _)| start + i).collect())
        });
        offsets.get(pos.column).copied().unwrap_or(end)
    }

    /// The byte range of a token range.
    pub fn range(&mut self, sp: &Sp) -> Range<usize> {
        let start = self.offset(sp.lo.start());
        let end = self.offset(sp.hi.end()).max(start);
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_chars_within_lines() {
        let text = "ab\nxé z\n";
        let mut index = LineIndex::new(text);
        assert_eq!(index.offset(LineColumn { line: 1, column: 1 }), 1);
        assert_eq!(index.offset(LineColumn { line: 2, column: 0 }), 3);
        // `é` is two bytes: the char after it starts at byte 3 + 1 + 2.
        assert_eq!(index.offset(LineColumn { line: 2, column: 2 }), 6);
        assert_eq!(index.offset(LineColumn { line: 2, column: 4 }), 8);
        assert_eq!(index.offset(LineColumn { line: 2, column: 99 }), 9);
        assert_eq!(index.offset(LineColumn { line: 9, column: 0 }), text.len());
        assert_eq!(index.offset(LineColumn { line: 0, column: 0 }), 0);
    }
}
