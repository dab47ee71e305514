//! Source locations as the parser sees them: pairs of token spans.
//!
//! A [`Sp`] runs from the start of its first token to the end of its last. `.tc` files turn them into
//! byte ranges through [`crate::line_index::LineIndex`]; the proc-macro path hands the token spans
//! to the compiler as they are.

use proc_macro2::Span;

/// A range of tokens: from the start of `lo` to the end of `hi`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sp {
    /// The first token.
    pub lo: Span,
    /// The last token.
    pub hi: Span,
}

impl Sp {
    /// The range of one token.
    pub fn one(span: Span) -> Sp {
        Sp { lo: span, hi: span }
    }

    /// From the start of `self` to the end of `end`.
    pub fn to(self, end: Sp) -> Sp {
        Sp { lo: self.lo, hi: end.hi }
    }

    /// One span covering the range where the compiler can join spans, else the first token.
    pub fn joined(self) -> Span {
        self.lo.join(self.hi).unwrap_or(self.lo)
    }
}

/// Where a diagnostic points.
#[derive(Debug, Clone)]
pub(crate) enum Loc {
    /// Tokens of the input.
    Tokens(Sp),
    /// Bytes of a `.tc` file (errors found before tokenizing: encoding, NUL bytes, lexing).
    Bytes(std::ops::Range<usize>),
    /// The start of the input (a file with no items) or the macro invocation.
    Start,
}
