//! Property tests: random and mutated sources never panic; an error always has diagnostics that
//! render.

use proptest::prelude::*;
use tcc_frontend::parse_bytes;

/// Valid programs whose mutations are tested.
const SEEDS: &[&str] = &[
    "fn softmax(x: f32[N, D]) -> f32[N, D] {\n    let m = x.max(-1, keepdim);\n    let e = exp(x - m);\n    e / e.sum(-1, keepdim)\n}\n",
    "fn mlp(x: f16[M, 4096], w: f16[4096, 11008], b: f16[11008]) -> f16[M, 11008] { gelu(x @ w + b) }\n",
    "fn two(x: f32[N]) -> (f32[N], f32[N]) { (x * 2.0, -x) }\nfn f(x: f32[N]) -> f32[N] { let (a, b) = two(x); a + b }\n",
    "fn layernorm(x: f32[N, D], g: f32[D], b: f32[D]) -> f32[N, D] {\n    let mu = x.mean(-1, keepdim);\n    let xc = x - mu;\n    xc * rsqrt((xc * xc).mean(-1, keepdim) + 0.00001) * g + b\n}\n",
    "fn f(x: f32[2, 3, 4], c: bool[4]) -> f32[4, 3, 2] { where(c, x, 0).permute([2, 1, 0]).cast::<f32>() }\n",
    "fn f(x: i32[4]) -> bool[2] { concat([x, x], 0).slice(0, 1, 3).reshape([2]) >= 1 }\n",
];

/// Checks one input: no panic, and an error has diagnostics that render.
fn check(bytes: &[u8]) {
    match parse_bytes("prop.tc", bytes) {
        Ok(m) => assert!(!m.functions.is_empty()),
        Err(d) => {
            assert!(!d.is_empty());
            let _ = d.render(false);
        }
    }
}

/// Splits a source into rough tokens: identifiers/numbers, single punctuation, whitespace runs.
fn rough_tokens(src: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in src.chars() {
        let word = c.is_alphanumeric() || c == '_' || c == '.';
        match out.last_mut() {
            Some(last) if word && last.chars().all(|l| l.is_alphanumeric() || l == '_' || l == '.') => last.push(c),
            Some(last) if c.is_whitespace() && last.chars().all(char::is_whitespace) => last.push(c),
            _ => out.push(c.to_string()),
        }
    }
    out
}

/// Pieces random sources are made of.
const PIECES: &[&str] = &[
    "fn", "let", "f", "x", "y", "N", "D", "(", ")", "[", "]", "{", "}", ",", ";", ":", "->", "+", "-", "*", "/", "@",
    "==", "<", ">=", ".", "::", "<f32>", "f32", "f16", "i32", "bool", "1", "2.0", "-1", "keepdim", "exp", "sum", "max",
    "t", "reshape", "concat", "cast", "where", " ", "\n", "\t", "\r\n", "é", "€", "中文", "e\u{301}", "\u{200d}", "\"",
    "'", "/*", "//", "0xff", "1e40", "\u{feff}",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check(&bytes);
    }

    #[test]
    fn random_token_soup_never_panics(picks in prop::collection::vec(0..PIECES.len(), 0..80)) {
        let src: String = picks.iter().map(|&i| PIECES[i]).collect::<Vec<_>>().join(" ");
        check(src.as_bytes());
        let src = format!("fn f(x: f32[N, D]) -> f32[N, D] {{ {src} }}");
        check(src.as_bytes());
    }

    #[test]
    fn byte_flips_never_panic(seed in 0..SEEDS.len(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut bytes = SEEDS[seed].as_bytes().to_vec();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        check(&bytes);
    }

    #[test]
    fn deleted_and_duplicated_tokens_never_panic(
        seed in 0..SEEDS.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 1..4),
    ) {
        let mut toks = rough_tokens(SEEDS[seed]);
        for (at, duplicate) in edits {
            if toks.is_empty() {
                break;
            }
            let i = at.index(toks.len());
            if duplicate {
                let t = toks[i].clone();
                toks.insert(i, t);
            } else {
                toks.remove(i);
            }
        }
        check(toks.concat().as_bytes());
    }
}

#[test]
fn the_seeds_are_valid() {
    for seed in SEEDS {
        if let Err(d) = tcc_frontend::parse_source("seed.tc", seed) {
            panic!("{}", d.render(false));
        }
    }
}
