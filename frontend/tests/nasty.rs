//! Hostile inputs, each on a thread with the default 2 MiB test stack: no panic, no stack overflow,
//! a result in reasonable time.

use std::time::{Duration, Instant};

use tcc_frontend::{MAX_SHOWN, parse_bytes, parse_source};
use tcc_ir::limits::{MAX_NESTING, MAX_OPS};

use crate::common::{messages, on_test_stack};

/// Parses `src` on a 2 MiB stack; returns the messages (empty when it lowered) and the time taken.
fn check(src: String) -> (Vec<String>, Duration) {
    on_test_stack(move || {
        let start = Instant::now();
        let result = parse_source("nasty.tc", &src);
        let took = start.elapsed();
        match result {
            Ok(_) => (Vec::new(), took),
            Err(d) => {
                let rendered = d.render(false);
                assert!(!rendered.is_empty());
                (messages(&d), took)
            }
        }
    })
}

fn sum_of_terms(n: usize) -> String {
    let mut s = String::with_capacity(n * 4 + 64);
    s.push_str("fn f(x: f32[N]) -> f32[N] { x");
    for _ in 1..n {
        s.push_str(" + x");
    }
    s.push_str(" }");
    s
}

#[test]
fn a_100k_op_program_lowers_quickly() {
    // 100k terms: one input and 99,999 adds, exactly the op limit.
    let (msgs, took) = check(sum_of_terms(MAX_OPS));
    assert!(msgs.is_empty(), "{msgs:?}");
    println!("parsing and lowering a {MAX_OPS}-op program took {took:?}");
    // The target is well under 2 s in debug; the bound here leaves room for a busy machine.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn one_op_more_than_the_limit_is_an_error() {
    let (msgs, _) = check(sum_of_terms(MAX_OPS + 1));
    assert_eq!(msgs, [format!("the program has more than {MAX_OPS} ops")]);
}

#[test]
fn nesting_up_to_the_limit_is_fine_and_beyond_it_an_error() {
    // The body's braces are one level, so 255 parentheses reach the limit of 256.
    let parens = |n: usize| format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "(".repeat(n), ")".repeat(n));
    assert!(check(parens(MAX_NESTING - 1)).0.is_empty());
    assert_eq!(check(parens(MAX_NESTING)).0, [format!("nesting is deeper than the limit of {MAX_NESTING}")]);
    assert_eq!(check(parens(10_000)).0, [format!("nesting is deeper than the limit of {MAX_NESTING}")]);
    // Unclosed: the lexer reports it.
    assert_eq!(check(format!("fn f() {{ {}", "(".repeat(100_000))).0, ["unclosed delimiter `(`"]);
    // Nested calls and lists count as nesting too.
    let calls = |n: usize| format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "exp(".repeat(n), ")".repeat(n));
    assert!(check(calls(MAX_NESTING - 1)).0.is_empty());
    assert_eq!(check(calls(5_000)).0.len(), 1);
    let lists = format!("fn f(x: f32[N]) -> f32[N] {{ x.reshape({}N{}) }}", "[".repeat(5_000), "]".repeat(5_000));
    assert_eq!(check(lists).0.len(), 1);
}

#[test]
fn unary_minus_chains_count_as_nesting() {
    let negs = |n: usize| format!("fn f(x: f32[N]) -> f32[N] {{ {}x }}", "-".repeat(n));
    let (msgs, _) = check(negs(MAX_NESTING - 1));
    assert!(msgs.is_empty(), "{msgs:?}");
    let (msgs, _) = check(negs(300_000));
    assert_eq!(msgs, [format!("expression nesting is deeper than the limit of {MAX_NESTING}")]);
    // Parentheses and minus signs together.
    let mixed = format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "-(".repeat(200), ")".repeat(200));
    assert_eq!(check(mixed).0.len(), 1);
}

#[test]
fn long_method_chains_are_iterative() {
    let (msgs, _) = check(format!("fn f(x: f32[N]) -> f32[N] {{ x{} }}", ".exp()".repeat(50_000)));
    assert!(msgs.is_empty(), "{msgs:?}");
}

#[test]
fn huge_literals_are_errors() {
    let (msgs, _) = check(format!("fn f(x: f32[N]) -> f32[N] {{ x * {} }}", "9".repeat(200_000)));
    assert_eq!(msgs, ["number literal is too long (200000 characters; the limit is 128)"]);
    let (msgs, _) = check(format!("fn f(x: f32[{}]) -> f32[N] {{ x }}", "9".repeat(100)));
    assert_eq!(msgs, ["dimension is too large (every dimension must be below 2^40)"]);
    let (msgs, _) = check("fn f(x: f32[N]) -> f32[N] { x * 1e999 }".into());
    assert_eq!(msgs, ["float literal is out of range"]);
    let (msgs, _) = check("fn f(x: f16[N]) -> f16[N] { x * 100000 }".into());
    assert_eq!(msgs, ["integer literal `100000` is out of range for f16"]);
    let (msgs, _) = check("fn f(x: i32[N]) -> i32[N] { x * 3000000000 }".into());
    assert_eq!(msgs, ["integer literal `3000000000` does not fit in i32"]);
}

#[test]
fn thousands_of_errors_are_capped() {
    let mut src = String::from("fn f(x: f32[N]) -> f32[N] { y");
    for _ in 1..20_000 {
        src.push_str(" + y");
    }
    src.push_str(" }");
    let (msgs, _) = check(src);
    assert_eq!(msgs.len(), MAX_SHOWN + 1);
    assert_eq!(msgs[MAX_SHOWN], format!("too many errors: {} more not shown", 20_000 - MAX_SHOWN));
}

#[test]
fn inlining_blowups_hit_the_limits() {
    // Each fn doubles the ops of the previous one.
    let mut ops = String::from("fn f0(x: f32[N]) -> f32[N] { x + x }\n");
    for i in 1..40 {
        ops.push_str(&format!("fn f{i}(x: f32[N]) -> f32[N] {{ f{p}(x) + f{p}(x) }}\n", p = i - 1));
    }
    assert_eq!(check(ops).0, [format!("the program has more than {MAX_OPS} ops")]);
    // The same without any op: only the work limit stops it.
    let mut calls = String::from("fn f0(x: f32[N]) -> f32[N] { x }\n");
    for i in 1..64 {
        calls.push_str(&format!("fn f{i}(x: f32[N]) -> f32[N] {{ let a = f{p}(x); f{p}(a) }}\n", p = i - 1));
    }
    let (msgs, took) = check(calls);
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].starts_with("the program is too large"), "{msgs:?}");
    println!("the call blowup stopped after {took:?}");
    // A long chain of calls (quadratic work when every fn inlines all the others).
    let mut chain = String::from("fn f0(x: f32[N]) -> f32[N] { x }\n");
    for i in 1..3_000 {
        chain.push_str(&format!("fn f{i}(x: f32[N]) -> f32[N] {{ f{}(x) }}\n", i - 1));
    }
    let (msgs, took) = check(chain);
    assert_eq!(msgs.len(), 1);
    println!("the call chain stopped after {took:?}");
}

#[test]
fn deep_recursion_cycles_are_found_without_recursion() {
    let n = 20_000;
    let mut src = String::new();
    for i in 0..n {
        src.push_str(&format!("fn f{i}(x: f32[N]) -> f32[N] {{ f{}(x) }}\n", (i + 1) % n));
    }
    let (msgs, _) = check(src);
    assert_eq!(msgs, ["recursive call to `f0`"]);
}

#[test]
fn garbage_and_unicode_do_not_panic() {
    let inputs = [
        "fn",
        "fn f",
        "fn f(",
        "fn f()",
        "fn f() ->",
        "fn f() -> f32",
        "fn f() -> f32[",
        "fn f() {",
        "fn f() { }",
        "fn f(x: f32[N]) -> f32[N] { x. }",
        "fn f(x: f32[N]) -> f32[N] { x.0 }",
        "fn f(x: f32[N]) -> f32[N] { x.cast::<>() }",
        "fn f(x: f32[N]) -> f32[N] { ::<f32> }",
        "fn f(x: f32[N]) -> f32[N] { 'a' }",
        "fn f(x: f32[N]) -> f32[N] { \"s\" }",
        "fn f(x: f32[N]) -> f32[N] { r#x }",
        "fn f(x: f32[N]) -> f32[N] { (/*ERROR*/) }",
        "#![attr] fn f(x: f32[N]) -> f32[N] { x }",
        "fn f(x: f32[N]) -> f32[N] { x } }",
        "fn 🦀(x: f32[N]) -> f32[N] { x }",
        "fn f(x: f32[N]) -> f32[N] { x ⊕ x }",
        "fn f(x: f32[N]) -> f32[N] { x\u{200b} }",
        "fn f(ﬁ: f32[N]) -> f32[N] { ﬁ }",
        "\u{feff}\u{feff}fn f() {}",
        "fn f(x: f32[N]) -> f32[N] {\r\n x +\r\n y \r\n}",
        "fn f(x: f32[N]) -> f32[N] { x\t+\ty }",
        "fn f(x: f32[N]) -> f32[N] { x @@ x }",
        "fn f(x: f32[N]) -> f32[N] { x <<= x }",
        "fn f(x: f32[N]) -> f32[N] { x -> x }",
        "fn f(x: f32[N]) -> f32[N] { let let = x; x }",
        "fn f(x: f32[N]) -> f32[N] { f32[N] }",
        "fn f(x: f32[-1]) -> f32[N] { x }",
        "fn f(x: f32[N]) -> f32[N] { x.sum(170141183460469231731687303715884105727) }",
        "fn f(x: f32[N]) -> f32[N] { x.slice(0, -1, 18446744073709551615) }",
        "fn f(x: f32[N]) -> f32[N] { x.reshape([18446744073709551615]) }",
        "fn f(x: f32[N]) -> f32[N] { x.broadcast_to([1099511627775, 1099511627775]) }",
        "fn f(x: bool[N]) -> bool[N] { -x }",
        "fn f(x: bool[N]) -> bool[N] { -true }",
        "fn f(x: f32[0, 0]) -> f32[0, 0] { x @ x }",
        "fn f(x: f32[N]) -> f32[N] { concat([], 0) }",
        "fn f(x: f32[N]) -> f32[N] { x.permute() }",
        "fn f(x: f32[N]) -> f32[N] { x.sum([]) }",
        "fn f(x: f32[]) -> f32[] { x.sum() }",
        "fn f(x: f32[]) -> f32[] { x.t() }",
    ];
    for input in inputs {
        let src = input.to_string();
        on_test_stack(move || match parse_source("garbage.tc", &src) {
            Ok(m) => assert!(!m.functions.is_empty()),
            Err(d) => {
                assert!(!d.is_empty(), "{src}");
                let _ = d.render(false);
                let _ = d.render(true);
            }
        });
    }
}

#[test]
fn encoding_errors_point_at_the_first_bad_byte() {
    let d = parse_bytes("latin1.tc", b"fn f(x: f32[N]) -> f32[N] { x } // gr\xf6\xdfe").unwrap_err();
    assert_eq!(messages(&d), ["the file is not valid UTF-8: byte 0xf6 at offset 37"]);
    assert_eq!(d.iter().next().unwrap().span.start, 37);
    let d = parse_bytes("nul.tc", b"fn f(x: f32[N]) -> f32[N] { x \0 }").unwrap_err();
    assert_eq!(messages(&d), ["the file contains a NUL byte"]);
    assert_eq!(d.iter().next().unwrap().span, 30..31);
    let d = parse_bytes("empty.tc", b"").unwrap_err();
    assert_eq!(messages(&d), ["no fn items"]);
    let d = parse_bytes("blank.tc", b"  \n\t\n// nothing\n").unwrap_err();
    assert_eq!(messages(&d), ["no fn items"]);
}

#[test]
fn oversized_files_are_refused() {
    let big = vec![b' '; tcc_frontend::MAX_SOURCE_BYTES + 1];
    let d = parse_bytes("big.tc", &big).unwrap_err();
    assert_eq!(d.len(), 1);
}

#[test]
fn many_bindings_and_unknown_names_stay_linear() {
    // Copying a tuple binding is cheap, and tuples do not nest.
    let mut src = String::from("fn f(x: f32[N]) -> f32[N] { let t0 = (x, x);");
    for i in 1..50_000 {
        src.push_str(&format!(" let t{i} = t{};", i - 1));
    }
    src.push_str(" let (a, b) = t49999; a + b }");
    let (msgs, took) = check(src);
    assert!(msgs.is_empty(), "{msgs:?}");
    println!("50k tuple bindings took {took:?}");
    // Thousands of bindings and thousands of unknown names: suggestions stop after the shown errors.
    let mut src = String::from("fn f(x: f32[N]) -> f32[N] {");
    for i in 0..20_000 {
        src.push_str(&format!(" let v{i} = x;"));
    }
    src.push_str(" w0");
    for i in 1..20_000 {
        src.push_str(&format!(" + w{i}"));
    }
    src.push_str(" }");
    let (msgs, took) = check(src);
    assert_eq!(msgs.len(), MAX_SHOWN + 1);
    println!("20k unknown names among 20k bindings took {took:?}");
}

#[test]
fn nested_tuples_are_refused() {
    let (msgs, _) = check("fn f(x: f32[N]) -> f32[N] { let a = (x, x); let b = (a, x); x }".into());
    assert_eq!(msgs, ["tuples cannot be nested: this element is a tuple of 2 values"]);
}

#[test]
fn the_deepest_valid_nesting_fits_in_half_the_test_stack() {
    // Every construct that nests, at the limit, on a 1 MiB stack: the 2 MiB test stack has margin.
    let depth = MAX_NESTING - 1;
    let sources = [
        format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "(".repeat(depth), ")".repeat(depth)),
        format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "x.pow(".repeat(depth), ")".repeat(depth)),
        format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "max(x, ".repeat(depth), ")".repeat(depth)),
        format!("fn f(x: f32[N]) -> f32[N] {{ x.reshape({}N{}) }}", "[".repeat(depth - 1), "]".repeat(depth - 1)),
        format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "-(".repeat(depth / 2), ")".repeat(depth / 2)),
        format!("fn f(x: f32[N]) -> f32[N] {{ {}x{} }}", "(x, ".repeat(depth), ")".repeat(depth)),
    ];
    for src in sources {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                if let Err(d) = parse_source("deep.tc", &src) {
                    let _ = d.render(false);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
