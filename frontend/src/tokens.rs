//! Token streams of a proc-macro invocation (`tcc::kernel! { ... }`): the shared pipeline, with
//! errors as `syn::Error`s carrying the spans of the user's tokens.

use proc_macro2::{Span, TokenStream};
use tcc_ir::Module;

use crate::diag::Diag;
use crate::diagnostics::MAX_SHOWN;
use crate::pipeline::{Mode, check};
use crate::span::Loc;

/// Parses, checks and lowers the fns of a token stream; errors point at the tokens they are about
/// (turn them into `compile_error!`s with `syn::Error::to_compile_error`).
pub fn parse_tokens(tokens: TokenStream) -> Result<Module, Vec<syn::Error>> {
    let checked = check(tokens, Mode::Tokens);
    match checked.module {
        Some(module) => Ok(module),
        None => Err(checked.diags.into_iter().take(MAX_SHOWN).map(to_syn).collect()),
    }
}

/// One error at its main span; the label, notes and help become extra lines of the message.
fn to_syn(d: Diag) -> syn::Error {
    let span = match &d.primary {
        Loc::Tokens(sp) => sp.joined(),
        Loc::Bytes(_) | Loc::Start => Span::call_site(),
    };
    let mut message = d.message;
    for note in &d.notes {
        message.push_str("\nnote: ");
        message.push_str(note);
    }
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    syn::Error::new(span, message)
}
