//! Tests of the text form: round trips of every op, dtype and name form, error positions, and
//! property tests that no input panics the parser.

use proptest::prelude::*;

use super::*;
use crate::dtype::DType;
use crate::op::{BinaryOp, CompareOp, NodeId, Op, ReduceOp, TensorType, UnaryOp};
use crate::shape::{Dim, Shape};

pub(crate) fn tt(dtype: DType, dims: &[&str]) -> TensorType {
    let dims = dims
        .iter()
        .map(|d| match d.parse::<u64>() {
            Ok(n) => Dim::Const(n),
            Err(_) => Dim::Var((*d).to_string()),
        })
        .collect();
    TensorType { dtype, shape: Shape(dims) }
}

/// A valid graph that uses every op variant, every dtype and every attribute form.
pub(crate) fn every_op_graph() -> Graph {
    let mut g = Graph::new("every_op");
    let x = g.add_param("x", tt(DType::F32, &["M", "4"])).unwrap();
    let w = g.add_param("w", tt(DType::F32, &["4", "3"])).unwrap();
    let h = g.add_param("h", tt(DType::F16, &["2", "4"])).unwrap();
    let b = g.add_param("b16", tt(DType::BF16, &["4"])).unwrap();
    let i = g.add_param("i", tt(DType::I32, &["M", "4"])).unwrap();
    let s = g.add_param("s", tt(DType::F32, &[])).unwrap();
    let c = g.add_param("c", tt(DType::Bool, &["M", "1"])).unwrap();
    for u in UnaryOp::ALL {
        g.push(Op::Unary(u, x)).unwrap();
    }
    for u in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu] {
        g.push(Op::Unary(u, i)).unwrap();
    }
    g.push(Op::Unary(UnaryOp::Exp, h)).unwrap();
    g.push(Op::Unary(UnaryOp::Tanh, b)).unwrap();
    for op in BinaryOp::ALL {
        g.push(Op::Binary(op, x, s)).unwrap();
    }
    g.push(Op::Binary(BinaryOp::Div, i, i)).unwrap();
    for op in CompareOp::ALL {
        g.push(Op::Compare(op, x, x)).unwrap();
    }
    let sel = g.push(Op::Select { cond: c, on_true: x, on_false: s }).unwrap();
    g.push_typed(Op::Cast(x), tt(DType::F16, &["M", "4"])).unwrap();
    g.push_typed(Op::Cast(i), tt(DType::Bool, &["M", "4"])).unwrap();
    g.push_typed(Op::Cast(c), tt(DType::I32, &["M", "1"])).unwrap();
    g.push_typed(Op::Cast(h), tt(DType::BF16, &["2", "4"])).unwrap();
    g.push_typed(Op::Broadcast(s), tt(DType::F32, &["M", "4"])).unwrap();
    g.push_typed(Op::Broadcast(c), tt(DType::Bool, &["3", "M", "4"])).unwrap();
    g.push_typed(Op::Reshape(h), tt(DType::F16, &["8"])).unwrap();
    g.push_typed(Op::Reshape(x), tt(DType::F32, &["M", "2", "2"])).unwrap();
    let ht = g.push(Op::Permute { input: h, perm: vec![1, 0] }).unwrap();
    g.push(Op::Slice { input: h, axis: 1, start: 1, end: 3 }).unwrap();
    g.push(Op::Concat { inputs: vec![h, h, h], axis: 0 }).unwrap();
    g.push(Op::Concat { inputs: vec![b], axis: 0 }).unwrap();
    for (k, r) in ReduceOp::ALL.into_iter().enumerate() {
        g.push(Op::Reduce { op: r, input: x, axes: vec![1], keepdim: k % 2 == 0 }).unwrap();
    }
    g.push(Op::Reduce { op: ReduceOp::Sum, input: i, axes: vec![0, 1], keepdim: false }).unwrap();
    let mm = g.push(Op::MatMul(x, w)).unwrap();
    g.push(Op::MatMul(h, ht)).unwrap();
    for (v, d) in [
        (1.5, DType::F32),
        (-0.0, DType::F32),
        (f64::INFINITY, DType::F16),
        (f64::NEG_INFINITY, DType::BF16),
        (f64::NAN, DType::F32),
        (1e-40, DType::F32),
        (-7.0, DType::I32),
        (1.0, DType::Bool),
        (0.1, DType::F16),
    ] {
        g.constant(v, d).unwrap();
    }
    g.outputs = vec![mm, sel, x, mm];
    g
}

/// Graphs with unusual names, no params, no outputs and rank-0 shapes.
pub(crate) fn odd_graphs() -> Vec<Graph> {
    let mut out = Vec::new();
    out.push(Graph::new("empty"));
    let mut g = Graph::new("");
    let names =
        ["", "héllo", "a b", "q\"uote\\slash\nnl\ttab\rcr", "日本語", "_", "1abc", "\u{1}\u{7f}", "\u{2028}", "fn"];
    for (k, n) in names.iter().enumerate() {
        let var = if k % 2 == 0 { "batch size" } else { "Ñ" };
        g.add_param(*n, tt(DType::F32, &[var, "2"])).unwrap();
    }
    g.add_param("scalar", tt(DType::I32, &[])).unwrap();
    let last = g.constant(3.0, DType::I32).unwrap();
    g.outputs = vec![last, NodeId(0)];
    out.push(g);
    let mut g = Graph::new("unused_params");
    g.params.push(crate::Param { name: "p".into(), ty: tt(DType::F16, &["N"]) });
    g.params.push(crate::Param { name: "q".into(), ty: tt(DType::Bool, &[]) });
    let q = g.push(Op::Input { index: 1 }).unwrap();
    g.push(Op::Input { index: 1 }).unwrap();
    g.outputs = vec![q];
    out.push(g);
    out
}

fn assert_round_trip(g: &Graph) {
    let text = print_graph(g);
    let back = parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print_graph(&back), text);
    // `==` on f64 says NaN != NaN, so compare constants by bits and the rest structurally.
    assert_eq!(back.nodes.len(), g.nodes.len());
    for (a, b) in back.nodes.iter().zip(&g.nodes) {
        match (&a.op, &b.op) {
            (Op::Constant { value: x }, Op::Constant { value: y }) => {
                assert_eq!(x.to_bits(), y.to_bits());
                assert_eq!(a.ty, b.ty);
            }
            _ => assert_eq!(a, b),
        }
    }
    assert_eq!((&back.name, &back.params, &back.outputs), (&g.name, &g.params, &g.outputs));
}

#[test]
fn every_op_and_dtype_round_trips() {
    let g = every_op_graph();
    let kinds: std::collections::BTreeSet<String> = g.nodes.iter().map(|n| n.op.kind_name()).collect();
    assert_eq!(kinds.len(), 1 + 1 + 10 + 1 + 7 + 6 + 1 + 1 + 1 + 1 + 1 + 1 + 4 + 1);
    let dtypes: std::collections::BTreeSet<DType> = g.nodes.iter().map(|n| n.ty.dtype).collect();
    assert_eq!(dtypes.len(), DType::ALL.len());
    assert_round_trip(&g);
}

#[test]
fn graphs_without_nan_are_equal_after_round_trip() {
    let mut g = every_op_graph();
    g.nodes.retain(|n| !matches!(n.op, Op::Constant { value } if value.is_nan()));
    assert_eq!(parse_graph(&print_graph(&g)).unwrap(), g);
}

#[test]
fn odd_names_and_shapes_round_trip() {
    for g in odd_graphs() {
        assert_round_trip(&g);
    }
}

#[test]
fn printed_text_is_readable() {
    let mut g = Graph::new("softmax");
    let x = g.add_param("x", tt(DType::F32, &["M", "128"])).unwrap();
    let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
    let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
    g.outputs = vec![d];
    let expected = "fn softmax(x: f32[M, 128]) -> (f32[M, 128]) {
  %0 = input 0 : f32[M, 128]
  %1 = reduce_max %0 axes=[1] keepdim : f32[M, 1]
  %2 = sub %0, %1 : f32[M, 128]
  return %2
}
";
    assert_eq!(print_graph(&g), expected);
    assert_eq!(g.to_string(), expected);
    assert_eq!(print_graph(&Graph::new("e")), "fn e() -> () {\n  return\n}\n");
    assert!(print_graph(&Graph::new("a\u{2028}b\u{1}")).starts_with("fn \"a\\u{2028}b\\u{1}\"()"));
}

#[test]
fn constants_keep_every_bit() {
    let values = [
        0.1,
        -0.0,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        1e16,
        123456789.125,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
    ];
    for v in values {
        let mut g = Graph::new("c");
        g.push_typed(Op::Constant { value: v }, tt(DType::F32, &[])).unwrap();
        assert_round_trip(&g);
    }
}

#[test]
fn modules_round_trip() {
    let mut functions = vec![every_op_graph()];
    functions.extend(odd_graphs());
    functions.iter_mut().for_each(|g| g.nodes.retain(|n| !matches!(n.op, Op::Constant { value } if value.is_nan())));
    let m = Module { functions };
    let text = print_module(&m);
    assert_eq!(parse_module(&text).unwrap(), m);
    assert_eq!(m.to_string(), text);
    assert_eq!(parse_module("").unwrap(), Module::default());
    assert_eq!(parse_module("  // only a comment\n").unwrap(), Module::default());
}

#[test]
fn comments_and_free_spacing_are_accepted() {
    let text = "// header\nfn f ( x : f32 [ 4 ] ) -> ( f32[4] ) { %0 = input 0 : f32[4] // the param\n %1 = exp %0 : f32[4] return %1 }";
    let g = parse_graph(text).unwrap();
    assert_eq!(g.nodes.len(), 2);
    assert_eq!(g.outputs, vec![NodeId(1)]);
}

fn err(text: &str) -> TextError {
    match parse_graph(text) {
        Ok(g) => panic!("parsed {g:?}"),
        Err(e) => e,
    }
}

const OK_HEADER: &str = "fn f(x: f32[4]) -> (f32[4]) {\n  %0 = input 0 : f32[4]\n";

#[test]
fn declared_type_mismatch_names_the_line() {
    let e = err(&format!("{OK_HEADER}  %1 = exp %0 : f16[4]\n  return %1\n}}\n"));
    assert_eq!((e.line, e.col), (3, 3));
    assert!(matches!(
        e.kind,
        TextErrorKind::Node { node: 1, source: crate::BuildError::Type(crate::TypeError::DeclaredMismatch { .. }) }
    ));
    assert!(e.to_string().starts_with("3:3: node %1: declared type f16[4]"), "{e}");
}

#[test]
fn errors_carry_positions() {
    type KindCheck = fn(&TextErrorKind) -> bool;
    let cases: Vec<(String, (usize, usize), KindCheck)> = vec![
        (format!("{OK_HEADER}  return %0\n"), (4, 1), |k| matches!(k, TextErrorKind::Expected { .. })),
        (
            format!("{OK_HEADER}  %1 = frob %0 : f32[4]\n"),
            (3, 8),
            |k| matches!(k, TextErrorKind::UnknownOp(s) if s == "frob"),
        ),
        (format!("{OK_HEADER}  %2 = exp %0 : f32[4]\n"), (3, 3), |k| {
            matches!(k, TextErrorKind::NodeOutOfOrder { expected: 1, .. })
        }),
        (format!("{OK_HEADER}  %1 = exp %0 : f64[4]\n"), (3, 17), |k| matches!(k, TextErrorKind::UnknownDType(_))),
        (format!("{OK_HEADER}  %1 = exp %2 : f32[4]\n"), (3, 3), |k| {
            matches!(
                k,
                TextErrorKind::Node {
                    source: crate::BuildError::Type(crate::TypeError::UnknownOperand(NodeId(2))),
                    ..
                }
            )
        }),
        (format!("{OK_HEADER}  %1 = input 99999999999999999999999 : f32[4]\n"), (3, 14), |k| {
            matches!(k, TextErrorKind::BadInteger(_))
        }),
        (format!("{OK_HEADER}  %1 = input 3 : f32[4]\n"), (3, 3), |k| matches!(k, TextErrorKind::Node { .. })),
        (format!("{OK_HEADER}  %1 = const 1.2.3 : f32[]\n"), (3, 14), |k| matches!(k, TextErrorKind::BadFloat(_))),
        (format!("{OK_HEADER}  %1 = const nan(0x0) : f32[]\n"), (3, 18), |k| matches!(k, TextErrorKind::NotNan(0))),
        (format!("{OK_HEADER}  %1 = slice %0 axis=0 start=1 end=9 : f32[8]\n"), (3, 3), |k| {
            matches!(k, TextErrorKind::Node { .. })
        }),
        (format!("{OK_HEADER}  return %0, %0\n}}"), (3, 3), |k| {
            matches!(k, TextErrorKind::OutputCount { declared: 1, found: 2 })
        }),
        (format!("{OK_HEADER}  return %7\n}}"), (3, 10), |k| matches!(k, TextErrorKind::UnknownOutput(7))),
        ("fn f(x: f32[4]) -> (f32[5]) {\n  %0 = input 0 : f32[4]\n  return %0\n}".into(), (3, 10), |k| {
            matches!(k, TextErrorKind::OutputType { index: 0, .. })
        }),
        (format!("{OK_HEADER}  return %0\n}}\nfn"), (5, 1), |k| matches!(k, TextErrorKind::Expected { .. })),
        ("fn \"abc(".into(), (1, 4), |k| matches!(k, TextErrorKind::UnterminatedString)),
        ("fn \"a\\qb\"(".into(), (1, 6), |k| matches!(k, TextErrorKind::BadEscape(_))),
        ("fn \"\\u{d800}\"(".into(), (1, 5), |k| matches!(k, TextErrorKind::BadEscape(_))),
        ("fn 日本語 $".into(), (1, 8), |k| matches!(k, TextErrorKind::UnexpectedChar('$'))),
        ("fn f(x: f32[1,1,1,1,1,1,1,1,1]) -> () {".into(), (1, 6), |k| {
            matches!(k, TextErrorKind::Param { index: 0, .. })
        }),
        ("fn f() -> () {\n  % = input 0".into(), (2, 3), |k| matches!(k, TextErrorKind::BadValue)),
        ("".into(), (1, 1), |k| matches!(k, TextErrorKind::Expected { .. })),
    ];
    for (text, pos, check) in cases {
        let e = err(&text);
        assert_eq!((e.line, e.col), pos, "{e} for\n{text}");
        assert!(check(&e.kind), "{e} for\n{text}");
    }
}

#[test]
fn huge_and_deep_inputs_are_errors_not_crashes() {
    let brackets = "[".repeat(200_000);
    assert!(parse_graph(&format!("fn f(x: f32{brackets}")).is_err());
    let dims = vec!["1"; 100_000].join(",");
    let e = err(&format!("fn f(x: f32[{dims}]) -> () {{ return }}"));
    assert!(matches!(e.kind, TextErrorKind::Param { .. }));
    assert!(parse_module(&"fn ".repeat(100_000)).is_err());
}

/// Applies random edits to `text`: deleting, duplicating, inserting or replacing characters.
fn mutate(text: &str, edits: &[(u8, usize, usize, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(kind, a, b, c) in edits {
        let n = chars.len().max(1);
        let (a, b) = (a % n, b % 8);
        let end = (a + b).min(chars.len());
        match kind % 4 {
            0 if a < chars.len() => {
                chars.drain(a..end);
            }
            1 if a <= chars.len() => {
                let piece: Vec<char> = chars[a.min(chars.len())..end].to_vec();
                chars.splice(a..a, piece);
            }
            2 if a <= chars.len() => chars.insert(a, c),
            _ => {
                if let Some(slot) = chars.get_mut(a) {
                    *slot = c;
                }
            }
        }
    }
    chars.into_iter().collect()
}

fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            '%', '[', ']', '(', ')', ',', ':', '=', '-', '>', '"', '\\', '\n', ' ', '0', '9', 'e', '.'
        ]),
        any::<char>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_strings_never_panic(s in ".{0,200}") {
        let _ = parse_graph(&s);
        let _ = parse_module(&s);
    }

    #[test]
    fn random_token_soup_never_panics(parts in prop::collection::vec(prop::sample::select(vec![
        "fn", "f", "(", ")", "->", "{", "}", "%0", "%1", "=", ":", ",", "f32", "[", "]", "M", "4",
        "input", "0", "exp", "add", "concat", "axis", "axes", "keepdim", "return", "const", "nan",
        "-inf", "\"x\"", "reduce_sum", "slice", "start", "end", "perm", "permute", "\n",
    ]), 0..80)) {
        let s = parts.join(" ");
        let _ = parse_graph(&s);
        let _ = parse_module(&s);
    }

    #[test]
    fn mutated_graphs_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), interesting_char()), 1..6),
    ) {
        let mut graphs = vec![every_op_graph()];
        graphs.extend(odd_graphs());
        let text = print_graph(&graphs[which % graphs.len()]);
        let mutated = mutate(&text, &edits);
        if let Ok(g) = parse_graph(&mutated) {
            // Whatever parses prints back to text that parses to the same graph.
            let again = parse_graph(&print_graph(&g)).unwrap();
            prop_assert_eq!(print_graph(&again), print_graph(&g));
        }
    }

    #[test]
    fn any_f64_round_trips(bits in any::<u64>()) {
        let mut s = String::new();
        write_f64(&mut s, f64::from_bits(bits));
        let mut g = Graph::new("c");
        g.push_typed(Op::Constant { value: f64::from_bits(bits) }, tt(DType::F32, &[])).unwrap();
        let back = parse_graph(&print_graph(&g)).unwrap();
        prop_assert!(matches!(back.nodes[0].op, Op::Constant { value } if value.to_bits() == bits), "{}", s);
    }

    #[test]
    fn any_name_round_trips(name in ".{0,12}", var in "\\PC{1,6}") {
        let mut g = Graph::new(name.clone());
        g.add_param(name.clone(), tt(DType::F32, &[var.as_str(), "3"])).unwrap();
        g.outputs = vec![NodeId(0)];
        prop_assert_eq!(parse_graph(&print_graph(&g)).unwrap(), g);
    }
}

#[test]
fn a_constant_its_dtype_cannot_hold_parses_and_the_verifier_names_it() {
    // The fuzz target `ir_text` found this (a mutated example; also in
    // fuzz/corpus/ir_text/regression_constant_not_representable.ir). The text form keeps every f64
    // bit of a constant (`constants_keep_every_bit`), so the parser checks types, not whether a
    // constant's dtype holds its value; `verify` does, and names it.
    let text = "fn f(x: f32[4]) -> (f32[4]) {\n  %0 = input 0 : f32[4]\n  %1 = const 4.999999974752427e-7 : f32[]\n  %2 = add %0, %1 : f32[4]\n  return %2\n}\n";
    let g = parse_graph(text).unwrap();
    assert_eq!(print_graph(&g), text);
    let err = crate::verify::verify(&g).unwrap_err();
    assert!(matches!(err, crate::verify::VerifyError::Constant { node: NodeId(1), dtype: DType::F32, .. }), "{err}");
}
