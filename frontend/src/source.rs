//! `.tc` files: bytes to text, text to tokens (proc-macro2's lexer), then the shared pipeline.

use proc_macro2::TokenStream;
use tcc_ir::Module;

use crate::diag::Diag;
use crate::diagnostics::Diagnostics;
use crate::line_index::LineIndex;
use crate::pipeline::{Mode, check};
use crate::span::Loc;

/// Files larger than this are refused (16 MiB; a 100k-op program is well under 1 MiB).
pub const MAX_SOURCE_BYTES: usize = 16 << 20;

fn too_large(file_name: &str, len: usize) -> Diagnostics {
    let diag = Diag::at_loc(
        format!("the file is too large: {len} bytes (the limit is {MAX_SOURCE_BYTES} bytes)"),
        Loc::Start,
        "",
    );
    Diagnostics::single(file_name, "", diag)
}

/// Parses, checks and lowers the fns of a `.tc` file given as bytes.
///
/// Bytes that are not UTF-8 are an error pointing at the first bad byte.
pub fn parse_bytes(file_name: &str, bytes: &[u8]) -> Result<Module, Diagnostics> {
    if bytes.len() > MAX_SOURCE_BYTES {
        return Err(too_large(file_name, bytes.len()));
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_source(file_name, text),
        Err(e) => {
            let at = e.valid_up_to();
            let byte = bytes.get(at).copied().unwrap_or(0);
            // The lossy text has U+FFFD (3 bytes) where the first bad sequence was.
            let lossy = String::from_utf8_lossy(bytes);
            let diag = Diag::at_loc(
                format!("the file is not valid UTF-8: byte 0x{byte:02x} at offset {at}"),
                Loc::Bytes(at..at + '\u{fffd}'.len_utf8()),
                "not UTF-8",
            );
            Err(Diagnostics::single(file_name, &lossy, diag))
        }
    }
}

/// Parses, checks and lowers the fns of a `.tc` file: the module, or every error found.
///
/// Uses proc-macro2's own lexer, so call it outside of proc-macros (a proc-macro uses
/// [`crate::parse_tokens`]).
pub fn parse_source(file_name: &str, text: &str) -> Result<Module, Diagnostics> {
    if text.len() > MAX_SOURCE_BYTES {
        return Err(too_large(file_name, text.len()));
    }
    if let Some(at) = text.find('\0') {
        let diag = Diag::at_loc("the file contains a NUL byte", Loc::Bytes(at..at + 1), "NUL byte")
            .with_note("a .tc file is UTF-8 text");
        return Err(Diagnostics::single(file_name, text, diag));
    }
    let tokens = match text.parse::<TokenStream>() {
        Ok(tokens) => tokens,
        Err(e) => return Err(Diagnostics::single(file_name, text, lex_error(text, &e))),
    };
    let checked = check(tokens, Mode::File);
    match checked.module {
        Some(module) => Ok(module),
        None => Err(Diagnostics::from_diags(file_name, text, checked.diags)),
    }
}

/// Explains a tokenizer error from the character it stopped at.
fn lex_error(text: &str, e: &proc_macro2::LexError) -> Diag {
    let at = LineIndex::new(text).offset(e.span().start());
    let rest = text.get(at..).unwrap_or("");
    let Some(c) = rest.chars().next() else {
        return Diag::at_loc("unexpected end of file", Loc::Bytes(text.len()..text.len()), "the file ends here");
    };
    let here = Loc::Bytes(at..at + c.len_utf8());
    match c {
        '(' | '[' | '{' => Diag::at_loc(format!("unclosed delimiter `{c}`"), here, "this delimiter is never closed"),
        ')' | ']' | '}' => match innermost_open(text, at) {
            Some((open, o)) => {
                Diag::at_loc(format!("mismatched closing delimiter `{c}`"), here, "mismatched closing delimiter")
                    .with_loc_label(Loc::Bytes(open..open + 1), format!("unclosed delimiter `{o}`"))
            }
            None => Diag::at_loc(format!("unexpected closing delimiter `{c}`"), here, "no delimiter is open here"),
        },
        '"' => Diag::at_loc("unterminated string literal", here, "this string never ends"),
        '/' if rest.starts_with("/*") => Diag::at_loc("unterminated block comment", here, "this comment never ends"),
        c if !c.is_ascii() || c.is_ascii_control() => Diag::at_loc(
            format!(
                "unexpected character `{}` (U+{:04X})",
                if c.is_control() { c.escape_default().to_string() } else { c.to_string() },
                u32::from(c)
            ),
            here,
            "not allowed here",
        ),
        c => Diag::at_loc(format!("cannot tokenize the input at `{c}`"), here, "invalid token"),
    }
}

/// The innermost delimiter still open at byte `at`, skipping comments and string literals: a hint
/// for the error at a closing delimiter (the tokenizer does not say which one is unclosed).
fn innermost_open(text: &str, at: usize) -> Option<(usize, char)> {
    let bytes = text.as_bytes();
    let at = at.min(bytes.len());
    let mut stack: Vec<(usize, char)> = Vec::new();
    let mut i = 0;
    while i < at {
        let b = bytes.get(i).copied().unwrap_or(b' ');
        let next = bytes.get(i + 1).copied();
        match (b, next) {
            (b'/', Some(b'/')) => {
                while i < at && bytes.get(i) != Some(&b'\n') {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                let mut depth = 0usize;
                while i < at {
                    match (bytes.get(i), bytes.get(i + 1)) {
                        (Some(b'/'), Some(b'*')) => {
                            depth += 1;
                            i += 2;
                        }
                        (Some(b'*'), Some(b'/')) => {
                            depth = depth.saturating_sub(1);
                            i += 2;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => i += 1,
                    }
                }
                continue;
            }
            (b'"', _) => {
                i += 1;
                while i < at && bytes.get(i) != Some(&b'"') {
                    i += if bytes.get(i) == Some(&b'\\') { 2 } else { 1 };
                }
            }
            (b'(' | b'[' | b'{', _) => stack.push((i, char::from(b))),
            (b')' | b']' | b'}', _) => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    stack.last().copied()
}
