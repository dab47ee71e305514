//! Kernels at the top level of a crate: run on the CPU, checked against hand-computed values;
//! the generated items are documented and warning-free (one kernel is called only through `on`).
#![deny(warnings, missing_docs)]

tcc::kernel! {
    fn softmax(x: f32[N, D]) -> f32[N, D] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }

    fn affine(x: f32[M, 2], w: f32[2, 3], b: f32[3]) -> f32[M, 3] {
        relu(x @ w + b)
    }

    fn negate(x: i32[N]) -> i32[N] {
        -x
    }
}

fn main() -> Result<(), tcc::Error> {
    let y = softmax((&[0.0f32, 0.0, 1.0, 1.0], [2, 2]))?;
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.5, 0.5, 0.5, 0.5]);
    let x = [1.0f32, 2.0];
    let w = [1.0f32, 0.0, -1.0, 0.0, 1.0, -1.0];
    let b = [0.5f32, 0.5, 0.5];
    let y = affine((&x, [1, 2]), (&w, [2, 3]), (&b, [3]))?;
    assert_eq!(y.shape(), &[1, 3]);
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.5, 2.5, 0.0]);
    assert_eq!(affine::PARAMS, ["x", "w", "b"]);
    let n = negate::on(tcc::Device::default_cpu()?, (&[1, -2], [2]))?;
    assert_eq!(n.to_vec::<i32>().unwrap(), [-1, 2]);
    Ok(())
}
