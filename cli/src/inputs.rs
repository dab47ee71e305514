//! Random inputs for `tcc run`: normal values (never exactly zero), deterministic for a seed.

use rand::SeedableRng;
use tcc::inputs::sample;
use tcc_ir::interp::Tensor;
use tcc_ir::{Bindings, Graph};

use super::error::CliError;

/// One tensor per parameter of `graph`, shaped under `bindings`, refusing more than `max_bytes`
/// in total.
pub fn random_inputs(graph: &Graph, bindings: &Bindings, seed: u64, max_bytes: u64) -> Result<Vec<Tensor>, CliError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut total_bytes: u64 = 0;
    let mut inputs = Vec::with_capacity(graph.params.len());
    for param in &graph.params {
        let shape = param.ty.shape.resolve(bindings).ok_or_else(|| {
            CliError::invalid(format!("parameter `{}` has an unbound shape {}", param.name, param.ty.shape))
        })?;
        let numel = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        let bytes = numel.and_then(|n| n.checked_mul(param.ty.dtype.size_bytes() as u64));
        total_bytes = match bytes.and_then(|b| total_bytes.checked_add(b)) {
            Some(t) if t <= max_bytes => t,
            _ => {
                return Err(CliError::invalid(format!(
                    "the inputs need more than --max-memory ({max_bytes} bytes); parameter `{}` is {}{:?}",
                    param.name, param.ty.dtype, shape
                )));
            }
        };
        let numel = numel.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        let data: Vec<f64> = (0..numel).map(|_| sample(&mut rng, param.ty.dtype)).collect();
        let tensor = Tensor::new(param.ty.dtype, shape, data)
            .map_err(|e| CliError::Environment(format!("internal error building input `{}`: {e}", param.name)))?;
        inputs.push(tensor);
    }
    Ok(inputs)
}
