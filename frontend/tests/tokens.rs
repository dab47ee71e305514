//! The proc-macro entry point: the same front end over a token stream, errors as `syn::Error`s with
//! the spans of the offending tokens.

use proc_macro2::TokenStream;
use tcc_frontend::{parse_source, parse_tokens};

fn tokens(src: &str) -> TokenStream {
    src.parse().unwrap()
}

const SOFTMAX: &str = "fn softmax(x: f32[N, D]) -> f32[N, D] {
    let m = x.max(-1, keepdim);
    let e = exp(x - m);
    e / e.sum(-1, keepdim)
}";

#[test]
fn tokens_and_files_lower_to_the_same_module() {
    let from_tokens = parse_tokens(tokens(SOFTMAX)).unwrap();
    let from_file = parse_source("softmax.tc", SOFTMAX).unwrap();
    assert_eq!(from_tokens, from_file);
}

#[test]
fn errors_carry_the_spans_of_the_offending_tokens() {
    let src = "fn f(x: f32[4, 5], y: f32[3]) -> f32[4, 5] {\n    x + yy\n}\nfn g(x: f32[N]) -> f32[N] { x + }";
    let errors = parse_tokens(tokens(src)).unwrap_err();
    let found: Vec<(String, usize, usize)> = errors
        .iter()
        .map(|e| {
            let start = e.span().start();
            (e.to_string(), start.line, start.column)
        })
        .collect();
    assert_eq!(
        found,
        [
            ("cannot find value `yy` in this scope\nhelp: did you mean `y`?".to_string(), 2, 8),
            ("unexpected end of input, expected an expression".to_string(), 4, 32),
        ]
    );
}

#[test]
fn an_empty_invocation_is_an_error() {
    let errors = parse_tokens(TokenStream::new()).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].to_string().starts_with("no fn items"));
}

#[test]
fn notes_and_help_become_lines_of_the_message() {
    let errors = parse_tokens(tokens("fn f(x: f64[N]) -> f32[N] { x }")).unwrap_err();
    assert_eq!(errors[0].to_string(), "unknown dtype `f64`\nnote: the dtypes are f32, f16, bf16, i32, bool");
    let compile_error = errors[0].to_compile_error().to_string();
    assert!(compile_error.contains("compile_error"), "{compile_error}");
}
