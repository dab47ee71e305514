//! Where the names of fns and parameters are in the macro input, so the generated items carry
//! the user's spans (go-to-definition, and warnings about unused kernels, point at the DSL).

use std::collections::HashMap;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

/// The span of a fn's name and of each of its parameters' names and dtypes.
#[derive(Debug, Clone)]
pub struct FnNames {
    /// The fn's name token.
    pub name: Span,
    /// Each parameter's tokens, by name.
    pub params: HashMap<String, ParamSpans>,
}

/// Where one parameter is written.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpans {
    /// Its name.
    pub name: Span,
    /// Its dtype (the token after `:`), or its name if there is none.
    pub dtype: Span,
}

/// Every `fn NAME (PARAMS)` at the top level of `tokens`, by name (the first one for a name
/// given twice: the front end rejects duplicates anyway).
pub fn scan(tokens: &TokenStream) -> HashMap<String, FnNames> {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let mut found = HashMap::new();
    for w in trees.windows(3) {
        let [TokenTree::Ident(kw), TokenTree::Ident(name), TokenTree::Group(params)] = w else { continue };
        if kw != "fn" || params.delimiter() != Delimiter::Parenthesis {
            continue;
        }
        found
            .entry(name.to_string())
            .or_insert_with(|| FnNames { name: name.span(), params: param_names(params.stream()) });
    }
    found
}

/// Each comma-separated parameter `NAME : DTYPE ...`: the spans of NAME and DTYPE.
fn param_names(tokens: TokenStream) -> HashMap<String, ParamSpans> {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut names = HashMap::new();
    for segment in trees.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        let Some(TokenTree::Ident(name)) = segment.first() else { continue };
        let dtype = match segment.get(2) {
            Some(t @ TokenTree::Ident(_)) => t.span(),
            _ => name.span(),
        };
        names.entry(name.to_string()).or_insert(ParamSpans { name: name.span(), dtype });
    }
    names
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::scan;

    #[test]
    fn finds_fns_and_their_parameters() {
        let tokens = quote! {
            fn a(x: f32[N, 4], y: f16[N]) -> f32[N] { x }
            fn b(z: f32[M]) -> f32[M] { z }
        };
        let found = scan(&tokens);
        let mut fns: Vec<_> = found.keys().cloned().collect();
        fns.sort();
        assert_eq!(fns, ["a", "b"]);
        let mut params: Vec<_> = found["a"].params.keys().cloned().collect();
        params.sort();
        assert_eq!(params, ["x", "y"]);
        assert_eq!(found["b"].params.len(), 1);
    }

    #[test]
    fn ignores_dims_and_types_inside_parameters() {
        // Parsed from text, the tokens carry their byte positions.
        let tokens: proc_macro2::TokenStream = "fn a(x: f32[N, M]) -> f32[N, M] { x }".parse().unwrap();
        let found = scan(&tokens);
        assert_eq!(found["a"].params.keys().collect::<Vec<_>>(), ["x"]);
        let x = found["a"].params["x"];
        assert_eq!((x.name.byte_range(), x.dtype.byte_range()), (5..6, 8..11));
        assert_eq!(found["a"].name.byte_range(), 3..4);
    }
}
