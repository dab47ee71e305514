//! A tcc kernel on `ndarray` arrays: a view of any layout in, an `ArrayD` out.
//!
//! `cargo run -p tcc --example ndarray --features ndarray`

use tcc::ndarray::{Array2, s};

tcc::kernel! {
    fn softmax(x: f32[N, D]) -> f32[N, D] {
        let e = exp(x - x.max(-1, keepdim));
        e / e.sum(-1, keepdim)
    }
}

fn main() -> Result<(), tcc::Error> {
    let x = Array2::from_shape_fn((4, 6), |(i, j)| ((i * 6 + j) as f32 * 0.7).sin());
    // A standard-layout view, and a strided one (every other column of the transpose).
    let y = softmax::array(x.view())?;
    let strided = x.t();
    let z = softmax::array(strided.slice(s![.., ..;2]))?;
    println!(
        "softmax of {:?}: {:?} (rows sum to {:.6})",
        x.shape(),
        y.shape(),
        y.index_axis(tcc::ndarray::Axis(0), 0).sum()
    );
    println!("softmax of a strided {:?} view: {:?}\n{z:.4}", strided.slice(s![.., ..;2]).shape(), z.shape());
    Ok(())
}
