//! The parser of the text form: a loop over tokens (never recursive), rebuilding each graph
//! through [`Graph::push_typed`] so that every node's declared type is checked.

use std::str::FromStr;

use super::lex::{Tok, Token, lex};
use super::{TextError, TextErrorKind};
use crate::dtype::DType;
use crate::graph::{Graph, Module, Param};
use crate::infer::check_limits;
use crate::op::{BinaryOp, CompareOp, NodeId, Op, ReduceOp, TensorType, UnaryOp};
use crate::shape::{Dim, Shape};

/// A cursor over the tokens of one input.
pub(super) struct Parser {
    toks: Vec<Token>,
    pos: usize,
    /// Returned by [`Parser::peek`] past the end (the lexer always ends with an `Eof` token, so
    /// this only keeps `peek` total).
    eof: Token,
}

fn err_at(t: &Token, kind: TextErrorKind) -> TextError {
    TextError { line: t.line, col: t.col, kind }
}

impl Parser {
    /// Lexes `src`.
    pub(super) fn new(src: &str) -> Result<Parser, TextError> {
        let toks = lex(src)?;
        let eof = toks.last().cloned().unwrap_or(Token { tok: Tok::Eof, line: 1, col: 1 });
        Ok(Parser { toks, pos: 0, eof })
    }

    fn peek(&self) -> &Token {
        self.toks.get(self.pos).unwrap_or(&self.eof)
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn expected(&self, what: &str) -> TextError {
        let t = self.peek();
        err_at(t, TextErrorKind::Expected { expected: what.to_string(), found: t.tok.describe() })
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.peek().tok == Tok::Punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: char) -> Result<(), TextError> {
        if self.eat_punct(c) { Ok(()) } else { Err(self.expected(&format!("`{c}`"))) }
    }

    fn eat_keyword(&mut self, kw: &str) -> bool {
        if matches!(&self.peek().tok, Tok::Ident(s) if s == kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<(), TextError> {
        if self.eat_keyword(kw) { Ok(()) } else { Err(self.expected(&format!("`{kw}`"))) }
    }

    /// A name: an identifier or a quoted string.
    fn name(&mut self) -> Result<String, TextError> {
        match &self.peek().tok {
            Tok::Ident(s) | Tok::Str(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.expected("a name")),
        }
    }

    /// A non-negative decimal integer that fits `T`.
    fn int<T: FromStr>(&mut self) -> Result<T, TextError> {
        let t = self.peek().clone();
        let Tok::Num(s) = &t.tok else { return Err(self.expected("an integer")) };
        self.pos += 1;
        let parsed = if s.bytes().all(|b| b.is_ascii_digit()) { s.parse::<T>().ok() } else { None };
        parsed.ok_or_else(|| err_at(&t, TextErrorKind::BadInteger(s.clone())))
    }

    /// `key=INTEGER`.
    fn attr<T: FromStr>(&mut self, key: &str) -> Result<T, TextError> {
        self.keyword(key)?;
        self.punct('=')?;
        self.int()
    }

    /// `key=[INTEGER, ...]`.
    fn attr_list(&mut self, key: &str) -> Result<Vec<usize>, TextError> {
        self.keyword(key)?;
        self.punct('=')?;
        self.punct('[')?;
        let mut items = Vec::new();
        if self.eat_punct(']') {
            return Ok(items);
        }
        loop {
            items.push(self.int()?);
            if self.eat_punct(']') {
                return Ok(items);
            }
            self.punct(',')?;
        }
    }

    /// `%N`.
    fn value(&mut self) -> Result<NodeId, TextError> {
        let t = self.peek().clone();
        let Tok::Value(s) = &t.tok else { return Err(self.expected("a value `%N`")) };
        self.pos += 1;
        s.parse::<u32>().map(NodeId).map_err(|_| err_at(&t, TextErrorKind::BadInteger(s.clone())))
    }

    fn comma_value(&mut self) -> Result<NodeId, TextError> {
        self.punct(',')?;
        self.value()
    }

    /// A constant: a number as Rust prints f64, `inf`, `-inf`, `nan` or `nan(0xBITS)`.
    fn float(&mut self) -> Result<f64, TextError> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Ident(s) if s == "inf" => {
                self.pos += 1;
                Ok(f64::INFINITY)
            }
            Tok::Ident(s) if s == "nan" => {
                self.pos += 1;
                if !self.eat_punct('(') {
                    return Ok(f64::NAN);
                }
                let bits_tok = self.peek().clone();
                let Tok::Num(hex) = &bits_tok.tok else { return Err(self.expected("NaN bits `0x...`")) };
                self.pos += 1;
                let bits = hex
                    .strip_prefix("0x")
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .ok_or_else(|| err_at(&bits_tok, TextErrorKind::BadInteger(hex.clone())))?;
                let value = f64::from_bits(bits);
                if !value.is_nan() {
                    return Err(err_at(&bits_tok, TextErrorKind::NotNan(bits)));
                }
                self.punct(')')?;
                Ok(value)
            }
            Tok::Num(s) => {
                self.pos += 1;
                if s == "-inf" {
                    return Ok(f64::NEG_INFINITY);
                }
                s.parse::<f64>().map_err(|_| err_at(&t, TextErrorKind::BadFloat(s.clone())))
            }
            _ => Err(self.expected("a number")),
        }
    }

    /// `DTYPE[DIM, ...]`.
    fn ty(&mut self) -> Result<TensorType, TextError> {
        let t = self.peek().clone();
        let Tok::Ident(name) = &t.tok else { return Err(self.expected("a type such as `f32[M, 4]`")) };
        self.pos += 1;
        let dtype = DType::from_name(name).ok_or_else(|| err_at(&t, TextErrorKind::UnknownDType(name.clone())))?;
        self.punct('[')?;
        let mut dims = Vec::new();
        if !self.eat_punct(']') {
            loop {
                let dim = match &self.peek().tok {
                    Tok::Num(_) => Dim::Const(self.int()?),
                    Tok::Ident(_) | Tok::Str(_) => Dim::Var(self.name()?),
                    _ => return Err(self.expected("a dimension")),
                };
                dims.push(dim);
                if self.eat_punct(']') {
                    break;
                }
                self.punct(',')?;
            }
        }
        Ok(TensorType { dtype, shape: Shape(dims) })
    }

    /// An op with its operands and attributes, up to (not including) ` : TYPE`.
    fn op(&mut self) -> Result<Op, TextError> {
        let t = self.peek().clone();
        let Tok::Ident(name) = &t.tok else { return Err(self.expected("an op name")) };
        self.pos += 1;
        let op = match name.as_str() {
            "input" => Op::Input { index: self.int()? },
            "const" => Op::Constant { value: self.float()? },
            "iota" => Op::Iota,
            "cast" => Op::Cast(self.value()?),
            "broadcast" => Op::Broadcast(self.value()?),
            "reshape" => Op::Reshape(self.value()?),
            "select" => {
                let cond = self.value()?;
                let on_true = self.comma_value()?;
                Op::Select { cond, on_true, on_false: self.comma_value()? }
            }
            "matmul" => {
                let a = self.value()?;
                Op::MatMul(a, self.comma_value()?)
            }
            "permute" => {
                let input = self.value()?;
                Op::Permute { input, perm: self.attr_list("perm")? }
            }
            "slice" => {
                let input = self.value()?;
                let axis = self.attr("axis")?;
                let start = self.attr("start")?;
                Op::Slice { input, axis, start, end: self.attr("end")? }
            }
            "concat" => {
                let mut inputs = vec![self.value()?];
                while self.eat_punct(',') {
                    inputs.push(self.value()?);
                }
                Op::Concat { inputs, axis: self.attr("axis")? }
            }
            other => {
                if let Some(u) = UnaryOp::from_name(other) {
                    Op::Unary(u, self.value()?)
                } else if let Some(b) = BinaryOp::from_name(other) {
                    let x = self.value()?;
                    Op::Binary(b, x, self.comma_value()?)
                } else if let Some(c) = CompareOp::from_name(other) {
                    let x = self.value()?;
                    Op::Compare(c, x, self.comma_value()?)
                } else if let Some(r) = other.strip_prefix("reduce_").and_then(ReduceOp::from_name) {
                    let input = self.value()?;
                    let axes = self.attr_list("axes")?;
                    Op::Reduce { op: r, input, axes, keepdim: self.eat_keyword("keepdim") }
                } else {
                    return Err(err_at(&t, TextErrorKind::UnknownOp(other.to_string())));
                }
            }
        };
        Ok(op)
    }

    /// A comma-separated list of types in parentheses, after the opening `(`.
    fn type_list(&mut self) -> Result<Vec<TensorType>, TextError> {
        let mut types = Vec::new();
        if self.eat_punct(')') {
            return Ok(types);
        }
        loop {
            types.push(self.ty()?);
            if self.eat_punct(')') {
                return Ok(types);
            }
            self.punct(',')?;
        }
    }

    /// `fn NAME(PARAMS) -> (TYPES) {`, adding the parameters to a new graph.
    fn header(&mut self) -> Result<(Graph, Vec<TensorType>), TextError> {
        self.keyword("fn")?;
        let mut g = Graph::new(self.name()?);
        self.punct('(')?;
        if !self.eat_punct(')') {
            loop {
                let at = self.peek().clone();
                let name = self.name()?;
                self.punct(':')?;
                let ty = self.ty()?;
                check_limits(&ty)
                    .map_err(|source| err_at(&at, TextErrorKind::Param { index: g.params.len(), source }))?;
                g.params.push(Param { name, ty });
                if self.eat_punct(')') {
                    break;
                }
                self.punct(',')?;
            }
        }
        if self.peek().tok != Tok::Arrow {
            return Err(self.expected("`->`"));
        }
        self.pos += 1;
        self.punct('(')?;
        let outputs = self.type_list()?;
        self.punct('{')?;
        Ok((g, outputs))
    }

    /// One function.
    fn graph(&mut self) -> Result<Graph, TextError> {
        let (mut g, declared_outputs) = self.header()?;
        loop {
            let t = self.peek().clone();
            let number = match &t.tok {
                Tok::Value(n) => n.clone(),
                Tok::Ident(s) if s == "return" => break,
                _ => return Err(self.expected("a node `%N = ...` or `return`")),
            };
            self.pos += 1;
            let expected = g.nodes.len();
            if number.parse::<usize>().ok() != Some(expected) {
                return Err(err_at(&t, TextErrorKind::NodeOutOfOrder { expected, found: number }));
            }
            self.punct('=')?;
            let op = self.op()?;
            self.punct(':')?;
            let ty = self.ty()?;
            g.push_typed(op, ty).map_err(|source| err_at(&t, TextErrorKind::Node { node: expected, source }))?;
        }
        let ret = self.next();
        let mut outputs = Vec::new();
        if matches!(self.peek().tok, Tok::Value(_)) {
            loop {
                let at = self.peek().clone();
                outputs.push((at, self.value()?));
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.punct('}')?;
        if outputs.len() != declared_outputs.len() {
            return Err(err_at(
                &ret,
                TextErrorKind::OutputCount { declared: declared_outputs.len(), found: outputs.len() },
            ));
        }
        for (index, ((at, id), declared)) in outputs.iter().zip(declared_outputs).enumerate() {
            let actual = g.ty(*id).ok_or_else(|| err_at(at, TextErrorKind::UnknownOutput(id.0)))?;
            if *actual != declared {
                return Err(err_at(at, TextErrorKind::OutputType { index, declared, actual: actual.clone() }));
            }
        }
        g.outputs = outputs.into_iter().map(|(_, id)| id).collect();
        Ok(g)
    }

    fn end(&self) -> Result<(), TextError> {
        if self.peek().tok == Tok::Eof { Ok(()) } else { Err(self.expected("end of input")) }
    }

    /// Exactly one function, then the end of the input.
    pub(super) fn graph_only(mut self) -> Result<Graph, TextError> {
        let g = self.graph()?;
        self.end()?;
        Ok(g)
    }

    /// Functions up to the end of the input.
    pub(super) fn module(mut self) -> Result<Module, TextError> {
        let mut functions = Vec::new();
        while self.peek().tok != Tok::Eof {
            functions.push(self.graph()?);
        }
        Ok(Module { functions })
    }
}
