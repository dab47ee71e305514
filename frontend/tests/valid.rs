//! Valid programs lower to the expected IR: ops, operands, shapes and dtypes.

use tcc_ir::{BinaryOp, CompareOp, DType, Dim, NodeId, Op, ReduceOp, Shape, TensorType, UnaryOp};

use crate::common::{graph, module, ops, workspace};

fn ty(dtype: DType, dims: &[&str]) -> TensorType {
    let dims = dims
        .iter()
        .map(|d| match d.parse::<u64>() {
            Ok(n) => Dim::Const(n),
            Err(_) => Dim::Var((*d).to_string()),
        })
        .collect();
    TensorType { dtype, shape: Shape(dims) }
}

#[test]
fn softmax_lowers_to_reductions_and_elementwise_ops() {
    let g = graph(
        "fn softmax(x: f32[N, D]) -> f32[N, D] {
            let m = x.max(-1, keepdim);
            let e = exp(x - m);
            e / e.sum(-1, keepdim)
        }",
    );
    assert_eq!(g.name, "softmax");
    assert_eq!(g.params.len(), 1);
    assert_eq!(g.params[0].name, "x");
    assert_eq!(g.params[0].ty, ty(DType::F32, &["N", "D"]));
    assert_eq!(
        ops(&g),
        [
            "input: f32[N, D]",
            "reduce_max: f32[N, 1]",
            "sub: f32[N, D]",
            "exp: f32[N, D]",
            "reduce_sum: f32[N, 1]",
            "div: f32[N, D]",
        ]
    );
    assert_eq!(g.nodes[1].op, Op::Reduce { op: ReduceOp::Max, input: NodeId(0), axes: vec![1], keepdim: true });
    assert_eq!(g.nodes[2].op, Op::Binary(BinaryOp::Sub, NodeId(0), NodeId(1)));
    assert_eq!(g.nodes[5].op, Op::Binary(BinaryOp::Div, NodeId(3), NodeId(4)));
    assert_eq!(g.outputs, [NodeId(5)]);
}

#[test]
fn mlp_in_f16_keeps_the_dtype_and_broadcasts_the_bias() {
    let g = graph("fn mlp(x: f16[M, 4096], w: f16[4096, 11008], b: f16[11008]) -> f16[M, 11008] { gelu(x @ w + b) }");
    assert_eq!(
        ops(&g),
        [
            "input: f16[M, 4096]",
            "input: f16[4096, 11008]",
            "input: f16[11008]",
            "matmul: f16[M, 11008]",
            "add: f16[M, 11008]",
            "gelu: f16[M, 11008]",
        ]
    );
    assert_eq!(g.nodes[3].op, Op::MatMul(NodeId(0), NodeId(1)));
    assert_eq!(g.nodes[5].op, Op::Unary(UnaryOp::Gelu, NodeId(4)));
}

#[test]
fn tuple_results_become_several_outputs() {
    let g = graph("fn two(x: f32[N]) -> (f32[N], f32[N]) { (x * 2.0, -x) }");
    assert_eq!(ops(&g), ["input: f32[N]", "const: f32[]", "mul: f32[N]", "neg: f32[N]"]);
    assert_eq!(g.nodes[1].op, Op::Constant { value: 2.0 });
    assert_eq!(g.outputs, [NodeId(2), NodeId(3)]);
}

#[test]
fn literals_adopt_the_dtype_of_the_other_operand() {
    let g = graph("fn f(x: f16[N], i: i32[N]) -> (f16[N], i32[N], bool[N]) { (2 * x, i + 1, x > 0) }");
    assert_eq!(
        ops(&g),
        [
            "input: f16[N]",
            "input: i32[N]",
            "const: f16[]",
            "mul: f16[N]",
            "const: i32[]",
            "add: i32[N]",
            "const: f16[]",
            "gt: bool[N]",
        ]
    );
    assert_eq!(g.nodes[4].op, Op::Constant { value: 1.0 });
}

#[test]
fn literals_are_rounded_to_their_dtype() {
    let g = graph("fn f(x: f16[N]) -> f16[N] { x + 0.1 }");
    let Op::Constant { value } = g.nodes[1].op else { panic!("expected a constant") };
    assert_eq!(value, f64::from(half::f16::from_f64(0.1)));
}

#[test]
fn precedence_and_associativity() {
    // `*` binds tighter than `+`; `-` is left associative; `@` binds like `*`; unary minus applies
    // to the method call's result.
    let g = graph("fn f(a: f32[4, 4], b: f32[4, 4], c: f32[4, 4]) -> f32[4, 4] { a + b * c - a - -b.exp() }");
    assert_eq!(
        ops(&g).iter().skip(3).map(String::as_str).collect::<Vec<_>>(),
        ["mul: f32[4, 4]", "add: f32[4, 4]", "sub: f32[4, 4]", "exp: f32[4, 4]", "neg: f32[4, 4]", "sub: f32[4, 4]"]
    );
    assert_eq!(g.nodes[3].op, Op::Binary(BinaryOp::Mul, NodeId(1), NodeId(2)));
    assert_eq!(g.nodes[4].op, Op::Binary(BinaryOp::Add, NodeId(0), NodeId(3)));
    assert_eq!(g.nodes[5].op, Op::Binary(BinaryOp::Sub, NodeId(4), NodeId(0)));
    assert_eq!(g.nodes[8].op, Op::Binary(BinaryOp::Sub, NodeId(5), NodeId(7)));

    let g = graph("fn f(a: f32[4, 4], b: f32[4, 4]) -> f32[4, 4] { a @ b * a / b }");
    assert_eq!(
        ops(&g).iter().skip(2).map(String::as_str).collect::<Vec<_>>(),
        ["matmul: f32[4, 4]", "mul: f32[4, 4]", "div: f32[4, 4]"]
    );
    let g = graph("fn f(a: f32[4], b: f32[4]) -> bool[4] { a + b <= b * a }");
    assert_eq!(g.nodes.last().unwrap().op, Op::Compare(CompareOp::Le, NodeId(2), NodeId(3)));
}

#[test]
fn every_comparison_gives_bool() {
    for (sym, op) in [
        ("==", CompareOp::Eq),
        ("!=", CompareOp::Ne),
        ("<", CompareOp::Lt),
        ("<=", CompareOp::Le),
        (">", CompareOp::Gt),
        (">=", CompareOp::Ge),
    ] {
        let g = graph(&format!("fn f(a: i32[3], b: i32[3]) -> bool[3] {{ a {sym} b }}"));
        assert_eq!(g.nodes[2].op, Op::Compare(op, NodeId(0), NodeId(1)), "{sym}");
        assert_eq!(g.nodes[2].ty, ty(DType::Bool, &["3"]));
    }
}

#[test]
fn let_bindings_shadow() {
    let g = graph("fn f(x: f32[N]) -> f32[N] { let y = x + 1; let y = y * y; let x = y; x }");
    assert_eq!(ops(&g), ["input: f32[N]", "const: f32[]", "add: f32[N]", "mul: f32[N]"]);
    assert_eq!(g.outputs, [NodeId(3)]);
}

#[test]
fn let_type_annotations_are_checked() {
    let g = graph("fn f(x: f32[N, 4]) -> f32[N] { let s: f32[N] = x.sum(1); s }");
    assert_eq!(g.outputs, [NodeId(1)]);
}

#[test]
fn builtin_functions() {
    let g = graph(
        "fn f(a: f32[N], b: f32[N], c: bool[N]) -> f32[N] {
            let u = exp(a) + log(a) + sqrt(a) + rsqrt(a) + tanh(a) + sigmoid(a) + relu(a) + gelu(a) + abs(a) + neg(a);
            let v = max(a, b) + min(a, 0) + pow(a, 2.0);
            select(c, u, v) + where(c, 1.0, a) + matmul(a.reshape([N, 1]), b.reshape([1, N])).sum(0)
        }",
    );
    let kinds: Vec<String> = g.nodes.iter().map(|n| n.op.kind_name()).collect();
    for k in ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "neg", "max", "min", "pow"] {
        assert!(kinds.iter().any(|x| x == k), "missing {k} in {kinds:?}");
    }
    assert_eq!(kinds.iter().filter(|k| *k == "select").count(), 2);
    assert!(kinds.iter().any(|k| k == "matmul"));
    assert_eq!(g.nodes.last().unwrap().ty, ty(DType::F32, &["N"]));
}

#[test]
fn methods_forms_of_unary_and_binary_ops() {
    let g = graph("fn f(a: f32[N], b: f32[N]) -> f32[N] { a.exp().abs().max(b).min(b).pow(b) }");
    assert_eq!(
        ops(&g).iter().skip(2).map(String::as_str).collect::<Vec<_>>(),
        ["exp: f32[N]", "abs: f32[N]", "max: f32[N]", "min: f32[N]", "pow: f32[N]"]
    );
}

#[test]
fn reductions_take_axes_lists_negative_axes_and_keepdim() {
    let g = graph(
        "fn f(x: f32[A, B, C]) -> (f32[B], f32[A, 1, C], f32[A, B], f32[], f32[1, B, 1]) {
            (x.sum([0, 2]), x.mean(-2, true), x.min(2, false), x.max(), x.sum(0, -1, keepdim))
        }",
    );
    let reduce = |i: usize| match &g.nodes[g.outputs[i].index()].op {
        Op::Reduce { op, axes, keepdim, .. } => (*op, axes.clone(), *keepdim),
        other => panic!("expected a reduction, got {other:?}"),
    };
    assert_eq!(reduce(0), (ReduceOp::Sum, vec![0, 2], false));
    assert_eq!(reduce(1), (ReduceOp::Mean, vec![1], true));
    assert_eq!(reduce(2), (ReduceOp::Min, vec![2], false));
    assert_eq!(reduce(3), (ReduceOp::Max, vec![0, 1, 2], false));
    assert_eq!(reduce(4), (ReduceOp::Sum, vec![0, 2], true));
}

#[test]
fn layout_methods() {
    let g = graph(
        "fn f(x: f32[2, 3, 4]) -> (f32[2, 4, 3], f32[4, 3, 2], f32[3, 2, 4], f32[6, 4], f32[5, 2, 3, 4], f32[2, 1, 4], f32[4, 3, 4]) {
            (x.t(), x.transpose(0, -1), x.permute([1, 0, 2]), x.reshape([6, 4]), x.broadcast_to([5, 2, 3, 4]),
             x.slice(1, 2, 3), concat([x, x], 0))
        }",
    );
    let op = |i: usize| g.nodes[g.outputs[i].index()].op.clone();
    assert_eq!(op(0), Op::Permute { input: NodeId(0), perm: vec![0, 2, 1] });
    assert_eq!(op(1), Op::Permute { input: NodeId(0), perm: vec![2, 1, 0] });
    assert_eq!(op(2), Op::Permute { input: NodeId(0), perm: vec![1, 0, 2] });
    assert_eq!(op(3), Op::Reshape(NodeId(0)));
    assert_eq!(op(4), Op::Broadcast(NodeId(0)));
    assert_eq!(op(5), Op::Slice { input: NodeId(0), axis: 1, start: 2, end: 3 });
    assert_eq!(op(6), Op::Concat { inputs: vec![NodeId(0), NodeId(0)], axis: 0 });
}

#[test]
fn reshape_and_broadcast_take_shape_variables() {
    let g = graph(
        "fn f(x: f32[N, D], y: f32[D]) -> (f32[D, N], f32[N, D]) { (x.reshape([D, N]), y.broadcast_to([N, D])) }",
    );
    assert_eq!(g.nodes[2].ty, ty(DType::F32, &["D", "N"]));
    assert_eq!(g.nodes[3].ty, ty(DType::F32, &["N", "D"]));
}

#[test]
fn casts_in_both_forms() {
    let g = graph("fn f(x: f16[N]) -> (f32[N], i32[N]) { (x.cast::<f32>(), cast::<i32>(x)) }");
    assert_eq!(ops(&g), ["input: f16[N]", "cast: f32[N]", "cast: i32[N]"]);
}

#[test]
fn scalars_and_integer_literals_in_float_context() {
    let g = graph("fn f(s: f32[], x: bf16[N]) -> (f32[], bf16[N]) { (s * 3, x / 2) }");
    assert_eq!(g.params[0].ty, ty(DType::F32, &[]));
    assert_eq!(g.nodes[2].op, Op::Constant { value: 3.0 });
    assert_eq!(g.nodes[2].ty.dtype, DType::F32);
    assert_eq!(g.nodes[4].ty.dtype, DType::BF16);
}

#[test]
fn a_literal_result_takes_the_declared_scalar_type() {
    let g = graph("fn one() -> f16[] { 1.5 }");
    assert_eq!(ops(&g), ["const: f16[]"]);
    assert_eq!(g.outputs, [NodeId(0)]);
}

#[test]
fn calls_are_inlined_with_shape_variables_substituted() {
    let m = module(
        "fn softmax(x: f32[N, D]) -> f32[N, D] {
            let e = exp(x - x.max(-1, keepdim));
            e / e.sum(-1, keepdim)
        }
        fn scores(q: f32[S, 64], k: f32[T, 64]) -> f32[S, T] {
            softmax(q @ k.t() / 8.0)
        }",
    );
    assert_eq!(m.functions.len(), 2);
    let s = m.function("scores").unwrap();
    assert_eq!(
        ops(s),
        [
            "input: f32[S, 64]",
            "input: f32[T, 64]",
            "permute: f32[64, T]",
            "matmul: f32[S, T]",
            "const: f32[]",
            "div: f32[S, T]",
            "reduce_max: f32[S, 1]",
            "sub: f32[S, T]",
            "exp: f32[S, T]",
            "reduce_sum: f32[S, 1]",
            "div: f32[S, T]",
        ]
    );
    assert_eq!(s.outputs, [NodeId(10)]);
    // The callee is a function of the module too, with its own shape variables.
    assert_eq!(ops(m.function("softmax").unwrap())[0], "input: f32[N, D]");
}

#[test]
fn shape_variables_are_substituted_simultaneously() {
    // The callee's `A` and `B` are bound to the caller's `B` and `A`: no capture.
    let m = module(
        "fn swap(x: f32[A, B]) -> f32[B, A] { x.t() }
         fn f(y: f32[B, A]) -> f32[A, B] { swap(y) }",
    );
    let f = m.function("f").unwrap();
    assert_eq!(ops(f), ["input: f32[B, A]", "permute: f32[A, B]"]);
}

#[test]
fn tuple_results_of_calls_are_destructured() {
    let m = module(
        "fn two(x: f32[N]) -> (f32[N], f32[N]) { (x * 2.0, -x) }
         fn f(x: f32[N]) -> f32[N] { let (a, b) = two(x); a + b }",
    );
    let f = m.function("f").unwrap();
    assert_eq!(ops(f), ["input: f32[N]", "const: f32[]", "mul: f32[N]", "neg: f32[N]", "add: f32[N]"]);
}

#[test]
fn literal_arguments_take_scalar_parameter_types() {
    let m = module(
        "fn scale(x: f16[N], s: f16[]) -> f16[N] { x * s }
         fn f(x: f16[N]) -> f16[N] { scale(x, 3) }",
    );
    let f = m.function("f").unwrap();
    assert_eq!(ops(f), ["input: f16[N]", "const: f16[]", "mul: f16[N]"]);
}

#[test]
fn a_fn_without_declared_result_returns_what_it_computes() {
    let g = graph("fn f(x: f32[N]) { (x.sum(0), x) }");
    assert_eq!(g.outputs, [NodeId(1), NodeId(0)]);
}

#[test]
fn comments_doc_comments_and_keyword_like_names_are_fine() {
    let m = module(
        "/// Doubles.
         fn double(x: f32[N]) -> f32[N] { x * 2 } // trailing comment
         /* block */ fn where_(input: f32[N]) -> f32[N] { where(input > 0, input, 0) }",
    );
    assert_eq!(m.functions.len(), 2);
}

#[test]
fn unicode_identifiers_are_names() {
    let g = graph("fn größe(ä: f32[Ñ]) -> f32[Ñ] { ä * 2.0 }");
    assert_eq!(g.name, "größe");
    assert_eq!(g.params[0].ty, ty(DType::F32, &["Ñ"]));
}

#[test]
fn every_example_of_the_workspace_lowers() {
    let dir = workspace().join("examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "tc") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        match tcc_frontend::parse_source(&path.display().to_string(), &text) {
            Ok(m) => assert!(!m.functions.is_empty()),
            Err(d) => panic!("{} does not lower:\n{}", path.display(), d.render(false)),
        }
        n += 1;
    }
    assert!(n > 0, "no examples found");
}

#[test]
fn parse_bytes_accepts_utf8_and_a_byte_order_mark() {
    let m = tcc_frontend::parse_bytes("bom.tc", "\u{feff}fn f(x: f32[N]) -> f32[N] { x }".as_bytes()).unwrap();
    assert_eq!(m.functions.len(), 1);
}

#[test]
fn a_causal_mask_is_math_of_positions() {
    // `iota(N)` is the i32 vector 0..N of a shape variable or a constant; `inf` is a float literal.
    let g = graph(
        "fn masked(s: f32[S, T]) -> f32[S, T] {
            let keep = iota(S).reshape([S, 1]) >= iota(T);
            select(keep, s, -inf)
        }",
    );
    assert_eq!(
        ops(&g),
        [
            "input: f32[S, T]",
            "iota: i32[S]",
            "reshape: i32[S, 1]",
            "iota: i32[T]",
            "ge: bool[S, T]",
            "const: f32[]",
            "select: f32[S, T]",
        ]
    );
    assert!(g.nodes.iter().any(|n| matches!(n.op, Op::Constant { value } if value == f64::NEG_INFINITY)));
    // Positions of a constant length, and `inf` as an operand of arithmetic.
    let g = graph("fn f(x: f32[4]) -> f32[4] { x + iota(4).cast::<f32>() - inf }");
    assert!(ops(&g).contains(&"iota: i32[4]".to_string()), "{:?}", ops(&g));
}
