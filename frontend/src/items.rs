//! Splitting a token stream into `fn` items, and the checks that must run before syn sees an item.
//!
//! Each item is parsed on its own, so a syntax error in one does not hide errors in the others. syn
//! builds its token buffer recursively and converts every number literal with big-integer arithmetic,
//! so an item is checked first, without recursion, for nesting deeper than the limit and for overlong
//! number literals.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use tcc_ir::limits::MAX_NESTING;

use crate::diag::Diag;
use crate::span::Sp;

/// Number literals longer than this (in characters) are refused before syn converts them.
pub(crate) const MAX_LITERAL_LEN: usize = 128;

/// The tokens of one `fn` item.
#[derive(Debug)]
pub(crate) struct Item {
    /// From the `fn` keyword to the last token before the next item.
    pub tokens: TokenStream,
    /// The fn's name, when the token after `fn` is an identifier.
    pub name: Option<String>,
    /// The last token (where "unexpected end of input" points).
    pub last: Span,
}

/// Splits `tokens` at every top-level `fn` keyword. Doc comments between items are skipped; any
/// other token before the first item is reported.
pub(crate) fn split_items(tokens: TokenStream, diags: &mut Vec<Diag>) -> Vec<Item> {
    let mut items = Vec::new();
    let mut current: Option<(Vec<TokenTree>, Span)> = None;
    let mut reported_stray = false;
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        let is_fn = matches!(&tt, TokenTree::Ident(i) if i == "fn");
        if is_fn {
            if let Some((toks, last)) = current.take() {
                items.push(finish(toks, last));
            }
            let span = tt.span();
            current = Some((vec![tt], span));
            continue;
        }
        let is_doc = matches!(&tt, TokenTree::Punct(p) if p.as_char() == '#')
            && matches!(iter.peek(), Some(TokenTree::Group(g))
                if g.delimiter() == Delimiter::Bracket && is_doc_attribute(&g.stream()));
        if is_doc {
            iter.next();
            continue;
        }
        match current.as_mut() {
            Some((toks, last)) => {
                *last = tt.span();
                toks.push(tt);
            }
            None => {
                if !reported_stray {
                    reported_stray = true;
                    diags.push(Diag::new(
                        format!("expected `fn`, found `{}`", short(&tt)),
                        Sp::one(tt.span()),
                        "a file holds `fn` items only",
                    ));
                }
            }
        }
    }
    if let Some((toks, last)) = current.take() {
        items.push(finish(toks, last));
    }
    items
}

fn finish(tokens: Vec<TokenTree>, last: Span) -> Item {
    let name = match tokens.get(1) {
        Some(TokenTree::Ident(i)) => Some(i.to_string()),
        _ => None,
    };
    Item { tokens: tokens.into_iter().collect(), name, last }
}

fn is_doc_attribute(stream: &TokenStream) -> bool {
    matches!(stream.clone().into_iter().next(), Some(TokenTree::Ident(i)) if i == "doc")
}

/// A short rendering of a token for messages (groups by their delimiters only).
fn short(tt: &TokenTree) -> String {
    match tt {
        TokenTree::Group(g) => match g.delimiter() {
            Delimiter::Parenthesis => "(".into(),
            Delimiter::Bracket => "[".into(),
            Delimiter::Brace => "{".into(),
            Delimiter::None => "group".into(),
        },
        TokenTree::Literal(l) => {
            let text = l.to_string();
            let mut s: String = text.chars().take(20).collect();
            if s.len() < text.len() {
                s.push('…');
            }
            s
        }
        other => other.to_string(),
    }
}

/// Checks an item before parsing: group nesting within [`MAX_NESTING`] and number literals within
/// [`MAX_LITERAL_LEN`]. Iterative, so any depth is safe.
pub(crate) fn precheck(tokens: &TokenStream) -> Result<(), Box<Diag>> {
    let mut stack = vec![tokens.clone().into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(TokenTree::Group(g)) => {
                if stack.len() > MAX_NESTING {
                    return Err(Box::new(Diag::new(
                        format!("nesting is deeper than the limit of {MAX_NESTING}"),
                        Sp::one(g.span_open()),
                        "this group is too deeply nested",
                    )));
                }
                stack.push(g.stream().into_iter());
            }
            Some(TokenTree::Literal(lit)) => {
                let text = lit.to_string();
                let numeric = text.as_bytes().first().is_some_and(u8::is_ascii_digit);
                if numeric && text.len() > MAX_LITERAL_LEN {
                    return Err(Box::new(Diag::new(
                        format!(
                            "number literal is too long ({} characters; the limit is {MAX_LITERAL_LEN})",
                            text.len()
                        ),
                        Sp::one(lit.span()),
                        "this literal",
                    )));
                }
            }
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
    Ok(())
}
