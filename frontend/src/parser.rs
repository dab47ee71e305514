//! The parser of one `fn` item: syn's `ParseStream` for tokens, precedence by hand.
//!
//! Binary operators are parsed with an explicit operator stack (shunting-yard), so a long chain such
//! as `x + x + ... + x` uses no recursion. Recursion happens only at parentheses, brackets and call
//! arguments, and [`ItemParser::depth`] stops it (together with unary-minus chains) at the nesting
//! limit. Expressions go into the arena of [`FnAst`], children before parents.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Lit, Token, braced, bracketed, parenthesized, token};
use tcc_ir::CompareOp;
use tcc_ir::limits::MAX_NESTING;

use crate::ast::{
    BinOp, DimAst, DimSpec, Expr, ExprId, ExprKind, FnAst, Name, ParamAst, Pattern, RetAst, Stmt, TypeAst,
};
use crate::span::Sp;

/// Words that cannot be used as names.
const RESERVED: &[&str] = &[
    "fn", "let", "true", "false", "return", "if", "else", "for", "while", "loop", "match", "mut", "pub", "struct",
    "impl", "use", "mod", "const", "static", "type", "as", "in", "self", "Self", "super", "crate",
];

/// Parses the tokens of one item (from `fn` to its end) into its syntax tree.
pub(crate) fn parse_fn_item(tokens: TokenStream) -> syn::Result<FnAst> {
    let mut parser = ItemParser { nodes: Vec::new(), depth: 0 };
    let parse = |input: ParseStream<'_>| parser.item(input);
    parse.parse2(tokens)
}

struct ItemParser {
    nodes: Vec<Expr>,
    /// Current nesting of groups and unary minus inside expressions.
    depth: usize,
}

fn too_deep(span: Span) -> syn::Error {
    syn::Error::new(span, format!("expression nesting is deeper than the limit of {MAX_NESTING}"))
}

/// A name: an identifier that is not reserved.
fn name(input: ParseStream<'_>) -> syn::Result<Name> {
    if !input.peek(Ident::peek_any) {
        return Err(input.error("expected a name"));
    }
    let ident = input.call(Ident::parse_any)?;
    let text = ident.unraw().to_string();
    if RESERVED.contains(&text.as_str()) {
        return Err(syn::Error::new(ident.span(), format!("expected a name, found keyword `{text}`")));
    }
    Ok(Name { text, sp: Sp::one(ident.span()) })
}

fn no_suffix(suffix: &str, span: Span) -> syn::Result<()> {
    if suffix.is_empty() {
        Ok(())
    } else {
        Err(syn::Error::new(span, format!("literal suffixes such as `{suffix}` are not supported")))
    }
}

/// A tensor type: `dtype[dims]`.
fn parse_type(input: ParseStream<'_>) -> syn::Result<TypeAst> {
    if !input.peek(Ident::peek_any) {
        return Err(input.error("expected a type such as `f32[N, 4]`"));
    }
    let dtype = name(input)?;
    if !input.peek(token::Bracket) {
        return Err(input.error(format!(
            "expected `[` and the dimensions after `{}` (a scalar is `{}[]`)",
            dtype.text, dtype.text
        )));
    }
    let content;
    let bracket = bracketed!(content in input);
    let mut dims = Vec::new();
    while !content.is_empty() {
        if content.peek(syn::LitInt) {
            let lit: syn::LitInt = content.parse()?;
            no_suffix(lit.suffix(), lit.span())?;
            let value = lit.base10_parse::<u64>().map_err(|_| {
                syn::Error::new(lit.span(), "dimension is too large (every dimension must be below 2^40)")
            })?;
            dims.push(DimSpec { dim: DimAst::Const(value), sp: Sp::one(lit.span()) });
        } else if content.peek(Ident::peek_any) {
            let var = name(&content)?;
            dims.push(DimSpec { dim: DimAst::Var(var.text), sp: var.sp });
        } else {
            return Err(content.error("expected a dimension: an integer or a shape variable"));
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(TypeAst { sp: dtype.sp.to(Sp::one(bracket.span.close())), dtype, dims })
}

/// The declared result: one type or a parenthesized tuple of types.
fn parse_ret(input: ParseStream<'_>) -> syn::Result<RetAst> {
    if !input.peek(token::Paren) {
        return Ok(RetAst::One(parse_type(input)?));
    }
    let content;
    let paren = parenthesized!(content in input);
    let mut types = Vec::new();
    while !content.is_empty() {
        types.push(parse_type(&content)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    match types.len() {
        0 => Err(syn::Error::new(paren.span.join(), "a fn returns at least one tensor")),
        1 => Ok(RetAst::One(types.remove(0))),
        _ => Ok(RetAst::Tuple(types)),
    }
}

/// Consumes a binary operator if one comes next.
fn binary_op(input: ParseStream<'_>) -> syn::Result<Option<(BinOp, Sp)>> {
    macro_rules! two {
        ($tok:tt, $op:expr) => {
            if input.peek(Token![$tok]) {
                let t: Token![$tok] = input.parse()?;
                return Ok(Some(($op, Sp { lo: t.spans[0], hi: t.spans[1] })));
            }
        };
    }
    macro_rules! one {
        ($tok:tt, $op:expr) => {
            if input.peek(Token![$tok]) {
                let t: Token![$tok] = input.parse()?;
                return Ok(Some(($op, Sp::one(t.span))));
            }
        };
    }
    two!(==, BinOp::Cmp(CompareOp::Eq));
    two!(!=, BinOp::Cmp(CompareOp::Ne));
    two!(<=, BinOp::Cmp(CompareOp::Le));
    two!(>=, BinOp::Cmp(CompareOp::Ge));
    // Compound and arrow tokens are not operators of the language; leave them for the caller's error.
    if input.peek(Token![->])
        || input.peek(Token![-=])
        || input.peek(Token![+=])
        || input.peek(Token![*=])
        || input.peek(Token![/=])
    {
        return Ok(None);
    }
    if input.peek(Token![<<]) || input.peek(Token![>>]) {
        return Ok(None);
    }
    one!(<, BinOp::Cmp(CompareOp::Lt));
    one!(>, BinOp::Cmp(CompareOp::Gt));
    one!(+, BinOp::Add);
    one!(-, BinOp::Sub);
    one!(*, BinOp::Mul);
    one!(/, BinOp::Div);
    one!(@, BinOp::MatMul);
    Ok(None)
}

impl ItemParser {
    fn push(&mut self, kind: ExprKind, sp: Sp) -> ExprId {
        self.nodes.push(Expr { kind, sp });
        self.nodes.len() - 1
    }

    fn sp(&self, id: ExprId) -> Sp {
        match self.nodes.get(id) {
            Some(e) => e.sp,
            None => Sp::one(Span::call_site()),
        }
    }

    fn enter(&mut self, span: Span) -> syn::Result<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING { Err(too_deep(span)) } else { Ok(()) }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn item(&mut self, input: ParseStream<'_>) -> syn::Result<FnAst> {
        input.parse::<Token![fn]>()?;
        let fn_name = name(input)?;
        if !input.peek(token::Paren) {
            return Err(input.error(format!("expected `(` and the parameters of `{}`", fn_name.text)));
        }
        let content;
        parenthesized!(content in input);
        let mut params = Vec::new();
        while !content.is_empty() {
            let pname = name(&content)?;
            content.parse::<Token![:]>()?;
            let ty = parse_type(&content)?;
            params.push(ParamAst { name: pname, ty });
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        let ret = if input.peek(Token![->]) {
            input.parse::<Token![->]>()?;
            Some(parse_ret(input)?)
        } else {
            None
        };
        if !input.peek(token::Brace) {
            return Err(input.error(format!("expected `{{` and the body of `{}`", fn_name.text)));
        }
        let body;
        let brace = braced!(body in input);
        let stmts = self.body(&body, brace.span.close())?;
        if !input.is_empty() {
            return Err(input.error(format!("unexpected tokens after the body of `{}`", fn_name.text)));
        }
        Ok(FnAst { name: fn_name, params, ret, nodes: std::mem::take(&mut self.nodes), stmts })
    }

    /// `let` statements, then the final expression.
    fn body(&mut self, input: ParseStream<'_>, close: Span) -> syn::Result<Vec<Stmt>> {
        let mut stmts = Vec::new();
        loop {
            if input.is_empty() {
                return Err(syn::Error::new(close, "expected an expression: a fn body ends with the value it returns"));
            }
            if input.peek(Token![let]) {
                input.parse::<Token![let]>()?;
                let pat = if input.peek(token::Paren) {
                    let content;
                    let paren = parenthesized!(content in input);
                    let mut names = Vec::new();
                    while !content.is_empty() {
                        names.push(name(&content)?);
                        if content.is_empty() {
                            break;
                        }
                        content.parse::<Token![,]>()?;
                    }
                    Pattern::Tuple(names, Sp { lo: paren.span.open(), hi: paren.span.close() })
                } else {
                    Pattern::Name(name(input)?)
                };
                let ty = if input.peek(Token![:]) {
                    input.parse::<Token![:]>()?;
                    Some(parse_type(input)?)
                } else {
                    None
                };
                input.parse::<Token![=]>()?;
                let root = self.expr(input)?;
                input.parse::<Token![;]>()?;
                stmts.push(Stmt { pat: Some(pat), ty, root, end: self.nodes.len() });
            } else {
                let root = self.expr(input)?;
                if input.peek(Token![;]) {
                    return Err(input.error(
                        "unexpected `;`: bind values with `let`, and end the body with the returned expression (no `;`)",
                    ));
                }
                if !input.is_empty() {
                    return Err(input.error("expected an operator or the end of the body"));
                }
                stmts.push(Stmt { pat: None, ty: None, root, end: self.nodes.len() });
                return Ok(stmts);
            }
        }
    }

    /// A full expression: operands joined by binary operators, by precedence, left to right.
    fn expr(&mut self, input: ParseStream<'_>) -> syn::Result<ExprId> {
        let mut operands = vec![self.operand(input)?];
        let mut ops: Vec<(BinOp, Sp)> = Vec::new();
        let mut compared = false;
        while let Some((op, op_sp)) = binary_op(input)? {
            if matches!(op, BinOp::Cmp(_)) {
                if compared {
                    return Err(syn::Error::new(op_sp.lo, "comparison operators cannot be chained; use parentheses"));
                }
                compared = true;
            }
            while ops.last().is_some_and(|(top, _)| top.precedence() >= op.precedence()) {
                self.reduce(&mut operands, &mut ops);
            }
            ops.push((op, op_sp));
            operands.push(self.operand(input)?);
        }
        while !ops.is_empty() {
            self.reduce(&mut operands, &mut ops);
        }
        operands.pop().ok_or_else(|| input.error("expected an expression"))
    }

    /// Pops one operator and its two operands and pushes the binary node.
    fn reduce(&mut self, operands: &mut Vec<ExprId>, ops: &mut Vec<(BinOp, Sp)>) {
        // The loop in `expr` keeps one more operand than operators, so both pops succeed.
        if let (Some((op, op_sp)), Some(rhs), Some(lhs)) = (ops.pop(), operands.pop(), operands.pop()) {
            let sp = self.sp(lhs).to(self.sp(rhs));
            let id = self.push(ExprKind::Binary { op, op_sp, lhs, rhs }, sp);
            operands.push(id);
        }
    }

    /// Unary minus, an atom, then method calls.
    fn operand(&mut self, input: ParseStream<'_>) -> syn::Result<ExprId> {
        let mut negs: Vec<Span> = Vec::new();
        while input.peek(Token![-]) && !input.peek(Token![->]) && !input.peek(Token![-=]) {
            let t: Token![-] = input.parse()?;
            negs.push(t.span);
            if self.depth + negs.len() > MAX_NESTING {
                return Err(too_deep(t.span));
            }
        }
        self.depth += negs.len();
        let mut id = self.atom(input)?;
        while input.peek(Token![.]) && !input.peek(Token![..]) {
            input.parse::<Token![.]>()?;
            if input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
                return Err(input.error("field access is not supported; bind tuple results with `let (a, b) = ...`"));
            }
            if !input.peek(Ident::peek_any) {
                return Err(input.error("expected a method name after `.`"));
            }
            let method = name(input)?;
            let dtype_arg = self.turbofish(input)?;
            if !input.peek(token::Paren) {
                return Err(input.error(format!("expected `(` and the arguments of method `{}`", method.text)));
            }
            let (args, close) = self.args(input)?;
            let sp = self.sp(id).to(Sp::one(close));
            id = self.push(ExprKind::Method { recv: id, method, dtype_arg, args }, sp);
        }
        self.depth -= negs.len();
        for span in negs.into_iter().rev() {
            let sp = Sp::one(span).to(self.sp(id));
            id = self.push(ExprKind::Neg(id), sp);
        }
        Ok(id)
    }

    /// `::<dtype>` if present.
    fn turbofish(&mut self, input: ParseStream<'_>) -> syn::Result<Option<Name>> {
        if !input.peek(Token![::]) {
            return Ok(None);
        }
        input.parse::<Token![::]>()?;
        input.parse::<Token![<]>()?;
        let dtype = name(input)?;
        input.parse::<Token![>]>()?;
        Ok(Some(dtype))
    }

    /// A parenthesized, comma-separated argument list; returns the arguments and the `)` span.
    fn args(&mut self, input: ParseStream<'_>) -> syn::Result<(Vec<ExprId>, Span)> {
        let content;
        let paren = parenthesized!(content in input);
        self.enter(paren.span.open())?;
        let mut args = Vec::new();
        while !content.is_empty() {
            args.push(self.expr(&content)?);
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        self.leave();
        Ok((args, paren.span.close()))
    }

    fn atom(&mut self, input: ParseStream<'_>) -> syn::Result<ExprId> {
        if input.peek(Lit) {
            return self.literal(input);
        }
        if input.peek(token::Paren) {
            let content;
            let paren = parenthesized!(content in input);
            let sp = Sp { lo: paren.span.open(), hi: paren.span.close() };
            self.enter(paren.span.open())?;
            if content.is_empty() {
                return Err(syn::Error::new(paren.span.join(), "`()` is not a value"));
            }
            let first = self.expr(&content)?;
            if content.is_empty() {
                self.leave();
                return Ok(first);
            }
            let mut items = vec![first];
            while !content.is_empty() {
                content.parse::<Token![,]>()?;
                if content.is_empty() {
                    break;
                }
                items.push(self.expr(&content)?);
            }
            self.leave();
            if items.len() == 1 {
                return Err(syn::Error::new(paren.span.join(), "one-element tuples are not supported"));
            }
            return Ok(self.push(ExprKind::Tuple(items), sp));
        }
        if input.peek(token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            self.enter(bracket.span.open())?;
            let mut items = Vec::new();
            while !content.is_empty() {
                items.push(self.expr(&content)?);
                if content.is_empty() {
                    break;
                }
                content.parse::<Token![,]>()?;
            }
            self.leave();
            let sp = Sp { lo: bracket.span.open(), hi: bracket.span.close() };
            return Ok(self.push(ExprKind::List(items), sp));
        }
        if input.peek(Ident::peek_any) {
            let ident = name(input)?;
            let dtype_arg = self.turbofish(input)?;
            if input.peek(token::Paren) {
                let (args, close) = self.args(input)?;
                let sp = ident.sp.to(Sp::one(close));
                return Ok(self.push(ExprKind::Call { callee: ident, dtype_arg, args }, sp));
            }
            if dtype_arg.is_some() {
                return Err(input.error(format!("expected `(` and the arguments of `{}`", ident.text)));
            }
            let sp = ident.sp;
            return Ok(self.push(ExprKind::Name(ident.text), sp));
        }
        Err(input.error("expected an expression"))
    }

    fn literal(&mut self, input: ParseStream<'_>) -> syn::Result<ExprId> {
        let lit: Lit = input.parse()?;
        let sp = Sp::one(lit.span());
        let kind = match lit {
            Lit::Int(i) => {
                no_suffix(i.suffix(), i.span())?;
                let value =
                    i.base10_parse::<u64>().map_err(|_| syn::Error::new(i.span(), "integer literal is too large"))?;
                ExprKind::Int(value)
            }
            Lit::Float(f) => {
                no_suffix(f.suffix(), f.span())?;
                let value = f.base10_parse::<f64>()?;
                if !value.is_finite() {
                    return Err(syn::Error::new(f.span(), "float literal is out of range"));
                }
                ExprKind::Float(value)
            }
            Lit::Bool(b) => ExprKind::Bool(b.value),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "unexpected literal: only numbers, `true` and `false` are allowed",
                ));
            }
        };
        Ok(self.push(kind, sp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> FnAst {
        parse_fn_item(src.parse().unwrap()).unwrap()
    }

    fn children(kind: &ExprKind) -> Vec<ExprId> {
        match kind {
            ExprKind::Name(_) | ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => Vec::new(),
            ExprKind::Neg(a) => vec![*a],
            ExprKind::Binary { lhs, rhs, .. } => vec![*lhs, *rhs],
            ExprKind::Call { args, .. } => args.clone(),
            ExprKind::Method { recv, args, .. } => std::iter::once(*recv).chain(args.iter().copied()).collect(),
            ExprKind::Tuple(items) | ExprKind::List(items) => items.clone(),
        }
    }

    /// The expression as fully parenthesized text.
    fn show(f: &FnAst, id: ExprId) -> String {
        let e = &f.nodes[id];
        match &e.kind {
            ExprKind::Name(n) => n.clone(),
            ExprKind::Int(v) => v.to_string(),
            ExprKind::Float(v) => format!("{v:?}"),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Neg(a) => format!("(-{})", show(f, *a)),
            ExprKind::Binary { op, lhs, rhs, .. } => format!("({} {} {})", show(f, *lhs), op.symbol(), show(f, *rhs)),
            ExprKind::Call { callee, args, .. } => {
                format!("{}({})", callee.text, args.iter().map(|&a| show(f, a)).collect::<Vec<_>>().join(", "))
            }
            ExprKind::Method { recv, method, args, .. } => format!(
                "{}.{}({})",
                show(f, *recv),
                method.text,
                args.iter().map(|&a| show(f, a)).collect::<Vec<_>>().join(", ")
            ),
            ExprKind::Tuple(items) => format!("({})", items.iter().map(|&a| show(f, a)).collect::<Vec<_>>().join(", ")),
            ExprKind::List(items) => format!("[{}]", items.iter().map(|&a| show(f, a)).collect::<Vec<_>>().join(", ")),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        let f = parse("fn f() { a + b * c @ d - -e.exp() / 2.0 < f - g - h }");
        let root = f.stmts.last().unwrap().root;
        assert_eq!(show(&f, root), "(((a + ((b * c) @ d)) - ((-e.exp()) / 2.0)) < ((f - g) - h))");
    }

    #[test]
    fn children_come_before_parents_and_statements_are_consecutive() {
        let f = parse("fn f(x: f32[N]) { let a = (x + 1, [x, -x]); let (b, c) = g(a, x.sum([0], keepdim)); b * c }");
        for (id, e) in f.nodes.iter().enumerate() {
            assert!(children(&e.kind).iter().all(|&c| c < id), "node {id}");
        }
        let mut start = 0;
        for s in &f.stmts {
            assert!(start <= s.root && s.root + 1 == s.end, "{start} {} {}", s.root, s.end);
            start = s.end;
        }
        assert_eq!(start, f.nodes.len());
    }

    #[test]
    fn types_and_signatures() {
        let f = parse("fn f(x: f16[M, 4096], s: f32[]) -> (f16[M, 4096], f32[]) { (x, s) }");
        assert_eq!(f.name.text, "f");
        assert_eq!(f.params.len(), 2);
        assert!(matches!(&f.params[0].ty.dims[0].dim, DimAst::Var(v) if v == "M"));
        assert!(matches!(f.params[0].ty.dims[1].dim, DimAst::Const(4096)));
        assert!(f.params[1].ty.dims.is_empty());
        assert!(matches!(&f.ret, Some(RetAst::Tuple(ts)) if ts.len() == 2));
    }

    #[test]
    fn syntax_errors() {
        let err = |src: &str| parse_fn_item(src.parse().unwrap()).unwrap_err().to_string();
        assert_eq!(err("fn f() { a < b < c }"), "comparison operators cannot be chained; use parentheses");
        assert_eq!(
            err("fn f() { x; }"),
            "unexpected `;`: bind values with `let`, and end the body with the returned expression (no `;`)"
        );
        assert_eq!(err("fn f() { let a = x; }"), "expected an expression: a fn body ends with the value it returns");
        assert_eq!(err("fn f() { x.0 }"), "field access is not supported; bind tuple results with `let (a, b) = ...`");
        assert_eq!(err("fn f() { 2u8 }"), "literal suffixes such as `u8` are not supported");
        assert_eq!(err("fn f(let: f32[N]) { x }"), "expected a name, found keyword `let`");
        assert_eq!(err("fn f() { (x,) }"), "one-element tuples are not supported");
    }
}
