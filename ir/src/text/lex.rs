//! The lexer of the text form: turns the input into tokens with their positions, in one pass.

use super::{TextError, TextErrorKind};

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// An identifier: a letter or `_`, then letters, digits or `_`.
    Ident(String),
    /// A quoted string, unescaped.
    Str(String),
    /// A number as written: an ASCII digit or `-`, then letters, digits, `.`, `_`, or a sign after
    /// an exponent letter (`1.5e-7`, `-inf`, `0x7ff8000000000000`).
    Num(String),
    /// `%` and the digits after it.
    Value(String),
    /// One of `( ) [ ] { } , : =`.
    Punct(char),
    /// `->`.
    Arrow,
    /// The end of the input.
    Eof,
}

impl Tok {
    /// A short description for error messages.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Num(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Value(s) => format!("`%{s}`"),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Arrow => "`->`".to_string(),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    /// The token.
    pub tok: Tok,
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub col: usize,
}

/// True if `c` may start an identifier.
pub(super) fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

/// True if `c` may continue an identifier.
pub(super) fn is_ident_continue(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    col: usize,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn take_while(&mut self, out: &mut String, mut keep: impl FnMut(&str, char) -> bool) {
        while let Some(c) = self.peek() {
            if !keep(out, c) {
                break;
            }
            out.push(c);
            self.bump();
        }
    }
}

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub(super) fn lex(src: &str) -> Result<Vec<Token>, TextError> {
    let mut cur = Cursor { chars: src.chars().peekable(), line: 1, col: 1 };
    let mut toks = Vec::new();
    loop {
        let (line, col) = (cur.line, cur.col);
        let err = |kind| TextError { line, col, kind };
        let Some(c) = cur.peek() else {
            toks.push(Token { tok: Tok::Eof, line, col });
            return Ok(toks);
        };
        let tok = if c.is_whitespace() {
            cur.bump();
            continue;
        } else if c == '/' {
            cur.bump();
            if cur.peek() != Some('/') {
                return Err(err(TextErrorKind::UnexpectedChar('/')));
            }
            while cur.peek().is_some_and(|c| c != '\n') {
                cur.bump();
            }
            continue;
        } else if is_ident_start(c) {
            let mut s = String::new();
            cur.take_while(&mut s, |_, c| is_ident_continue(c));
            Tok::Ident(s)
        } else if c.is_ascii_digit() || c == '-' {
            cur.bump();
            if c == '-' && cur.peek() == Some('>') {
                cur.bump();
                Tok::Arrow
            } else {
                let mut s = c.to_string();
                cur.take_while(&mut s, |s, c| {
                    c.is_alphanumeric()
                        || c == '.'
                        || c == '_'
                        || ((c == '+' || c == '-') && (s.ends_with('e') || s.ends_with('E')))
                });
                Tok::Num(s)
            }
        } else if c == '%' {
            cur.bump();
            let mut s = String::new();
            cur.take_while(&mut s, |_, c| c.is_ascii_digit());
            if s.is_empty() {
                return Err(err(TextErrorKind::BadValue));
            }
            Tok::Value(s)
        } else if c == '"' {
            cur.bump();
            Tok::Str(string(&mut cur, line, col)?)
        } else if "()[]{},:=".contains(c) {
            cur.bump();
            Tok::Punct(c)
        } else {
            return Err(err(TextErrorKind::UnexpectedChar(c)));
        };
        toks.push(Token { tok, line, col });
    }
}

/// Reads the rest of a string literal after its opening quote.
fn string(cur: &mut Cursor<'_>, line: usize, col: usize) -> Result<String, TextError> {
    let mut s = String::new();
    loop {
        let (eline, ecol) = (cur.line, cur.col);
        let bad = |esc: &str| TextError { line: eline, col: ecol, kind: TextErrorKind::BadEscape(esc.to_string()) };
        match cur.bump() {
            None | Some('\n') => return Err(TextError { line, col, kind: TextErrorKind::UnterminatedString }),
            Some('"') => return Ok(s),
            Some('\\') => match cur.bump() {
                Some('\\') => s.push('\\'),
                Some('"') => s.push('"'),
                Some('n') => s.push('\n'),
                Some('t') => s.push('\t'),
                Some('r') => s.push('\r'),
                Some('u') => {
                    if cur.bump() != Some('{') {
                        return Err(bad("\\u"));
                    }
                    let mut hex = String::new();
                    cur.take_while(&mut hex, |h, c| c.is_ascii_hexdigit() && h.len() < 6);
                    let closed = cur.bump() == Some('}');
                    let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                    match (closed, ch) {
                        (true, Some(ch)) => s.push(ch),
                        _ => return Err(bad(&format!("\\u{{{hex}"))),
                    }
                }
                Some(other) => return Err(bad(&format!("\\{other}"))),
                None => return Err(bad("\\")),
            },
            Some(c) => s.push(c),
        }
    }
}
