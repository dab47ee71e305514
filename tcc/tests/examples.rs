//! Every example program, run by the reference interpreter on tiny hand-made inputs and compared
//! with values computed by hand.

use std::path::Path;

use tcc_ir::DType;
use tcc_ir::interp::{Tensor, run_graph};

fn load(file: &str, function: &str) -> tcc_ir::Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    let module = match tcc_frontend::parse_source(file, &source) {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render(false)),
    };
    module.function(function).unwrap().clone()
}

fn f32s(shape: &[usize], data: Vec<f64>) -> Tensor {
    Tensor::new(DType::F32, shape.to_vec(), data).unwrap()
}

fn filled(shape: &[usize], value: f64) -> Tensor {
    f32s(shape, vec![value; shape.iter().product()])
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!((a - e).abs() <= 1e-5 * (1.0 + e.abs()), "element {i}: {a} vs {e}");
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

#[test]
fn softmax_by_hand() {
    let g = load("softmax.tc", "softmax");
    let x = f32s(&[2, 3], vec![0.0, 2f64.ln(), 5f64.ln(), 3.0, 3.0, 3.0]);
    let out = run_graph(&g, &[x]).unwrap();
    assert_eq!(out[0].shape, vec![2, 3]);
    assert_close(&out[0].data, &[0.125, 0.25, 0.625, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
}

#[test]
fn layernorm_by_hand() {
    let g = load("layernorm.tc", "layernorm");
    let x = f32s(&[1, 3], vec![1.0, 2.0, 3.0]);
    let out = run_graph(&g, &[x, filled(&[3], 2.0), filled(&[3], 1.0)]).unwrap();
    let s = 1.0 / (2.0f64 / 3.0 + 1e-5).sqrt();
    assert_close(&out[0].data, &[1.0 - 2.0 * s, 1.0, 1.0 + 2.0 * s]);
}

#[test]
fn rmsnorm_by_hand() {
    let g = load("rmsnorm.tc", "rmsnorm");
    let out = run_graph(&g, &[f32s(&[1, 2], vec![3.0, 4.0]), f32s(&[2], vec![1.0, 2.0])]).unwrap();
    let r = 1.0 / (12.5f64 + 1e-6).sqrt();
    assert_close(&out[0].data, &[3.0 * r, 8.0 * r]);
}

#[test]
fn mlp_by_hand() {
    let g = load("mlp.tc", "mlp");
    let inputs = [
        filled(&[1, 64], 1.0),
        filled(&[64, 256], 0.01),
        filled(&[256], 0.5),
        filled(&[256, 64], 0.01),
        filled(&[64], -1.0),
    ];
    let out = run_graph(&g, &inputs).unwrap();
    // Each hidden unit is gelu(64 * 0.01 + 0.5); each output sums 256 of them times 0.01, minus 1.
    let h = gelu(0.64 + 0.5);
    assert_close(&out[0].data, &vec![256.0 * 0.01 * h - 1.0; 64]);
}

#[test]
fn attention_scores_by_hand() {
    let g = load("attention_scores.tc", "attention_scores");
    let q = filled(&[1, 64], 1.0);
    let mut k = vec![1.0; 64];
    k.extend(vec![0.5; 64]);
    let out = run_graph(&g, &[q, f32s(&[2, 64], k)]).unwrap();
    // Scores are 64/8 = 8 and 32/8 = 4.
    let (a, b) = (8f64.exp(), 4f64.exp());
    assert_close(&out[0].data, &[a / (a + b), b / (a + b)]);
}

#[test]
fn residual_by_hand() {
    let g = load("residual.tc", "residual");
    let inputs = [
        filled(&[1, 32], 1.0),
        filled(&[32], 1.0),
        filled(&[32, 128], 0.01),
        filled(&[128], 0.0),
        filled(&[128, 32], 0.01),
        filled(&[32], 0.0),
    ];
    let out = run_graph(&g, &inputs).unwrap();
    let r = 1.0 / (1.0f64 + 1e-6).sqrt();
    assert_close(&out[0].data, &vec![1.0 + 128.0 * 0.01 * 0.32 * r; 32]);
}

#[test]
fn mlp_f16_checks() {
    let g = load("mlp_f16.tc", "mlp_f16");
    assert_eq!(g.ty(g.outputs[0]).unwrap().to_string(), "f16[M, 11008]");
}
