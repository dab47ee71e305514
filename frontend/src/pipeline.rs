//! The front end from tokens to IR: split into items, parse each, lower all, collect every error.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use tcc_ir::Module;

use crate::diag::Diag;
use crate::items::{precheck, split_items};
use crate::lower::lower_module;
use crate::parser::parse_fn_item;
use crate::span::{Loc, Sp};

/// Where the tokens came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// A `.tc` file tokenized by proc-macro2's own lexer: spans have file locations.
    File,
    /// A proc-macro invocation: spans belong to the compiler.
    Tokens,
}

/// The result of checking an input: the module if there were no errors, and the errors in order.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The lowered module, when there are no errors.
    pub module: Option<Module>,
    /// Every error, by item in source order.
    pub diags: Vec<Diag>,
}

/// True for the span syn uses for "end of input" (the call site, which has no file location): the
/// only span of a `.tc` file that covers no bytes.
fn is_call_site(sp: &Sp) -> bool {
    sp.lo.byte_range().is_empty()
}

/// Parses and lowers every `fn` item of `tokens`.
pub(crate) fn check(tokens: TokenStream, mode: Mode) -> Checked {
    let mut keyed: Vec<(usize, Diag)> = Vec::new();
    let mut early = Vec::new();
    let items = split_items(tokens, &mut early);
    keyed.extend(early.into_iter().map(|d| (0, d)));
    if items.is_empty() && keyed.is_empty() {
        let diag = Diag::at_loc("no fn items", Loc::Start, "expected at least one `fn` item")
            .with_help("a program is a list of items such as `fn f(x: f32[N]) -> f32[N] { x * 2.0 }`");
        return Checked { module: None, diags: vec![diag] };
    }
    let mut fns = Vec::new();
    let mut fn_item = Vec::new();
    let mut broken = HashSet::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Err(d) = precheck(&item.tokens) {
            keyed.push((i, *d));
            broken.extend(item.name);
            continue;
        }
        match parse_fn_item(item.tokens) {
            Ok(ast) => {
                fns.push(ast);
                fn_item.push(i);
            }
            Err(e) => {
                for mut d in Diag::from_syn(e) {
                    if let Loc::Tokens(sp) = &d.primary
                        && mode == Mode::File
                        && is_call_site(sp)
                    {
                        d.primary = Loc::Tokens(Sp { lo: item.last, hi: item.last });
                    }
                    keyed.push((i, d));
                }
                broken.extend(item.name);
            }
        }
    }
    let (graphs, diags) = lower_module(&fns, broken);
    keyed.extend(diags.into_iter().map(|(f, d)| (fn_item.get(f).copied().unwrap_or(0), d)));
    keyed.sort_by_key(|(k, _)| *k);
    let diags: Vec<Diag> = keyed.into_iter().map(|(_, d)| d).collect();
    let module = diags.is_empty().then_some(Module { functions: graphs });
    Checked { module, diags }
}
