//! Running optimized [`Program`]s: each launch's kernel graph runs on the interpreter, reading
//! parameters and buffers and writing buffers, exactly as a backend would execute the program.

use crate::limits;
use crate::program::{Launch, Program, ValueRef};
use crate::shape::Bindings;

use super::eval::resolve;
use super::{InterpError, Tensor, bind_params, run_graph_within};

/// Runs `p` on `inputs`, refusing any single value above [`limits::DEFAULT_MAX_MEMORY`] bytes.
pub fn run_program(p: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
    run_program_with_limit(p, inputs, limits::DEFAULT_MAX_MEMORY)
}

/// Runs `p` on `inputs`: binds shapes from the program's parameters, runs the launches in order
/// (each kernel graph on [`run_graph_with_limit`]), checks that every value written fits its
/// buffer's declared type, frees each buffer after its last read, and returns the program outputs.
pub fn run_program_with_limit(p: &Program, inputs: &[Tensor], max_bytes: u64) -> Result<Vec<Tensor>, InterpError> {
    let bindings = bind_params(&p.name, &p.params, inputs)?;
    let mut state = State { inputs, buffers: (0..p.buffers.len()).map(|_| None).collect(), reads: read_counts(p) };
    for (index, launch) in p.launches.iter().enumerate() {
        run_launch(p, &bindings, &mut state, index, launch, max_bytes)?;
    }
    let mut outputs = Vec::with_capacity(p.outputs.len());
    for (pos, value) in p.outputs.iter().enumerate() {
        outputs.push(state.read(*value, &format!("output {pos}"))?);
    }
    Ok(outputs)
}

/// The values a running program holds.
struct State<'a> {
    inputs: &'a [Tensor],
    buffers: Vec<Option<Tensor>>,
    /// Reads of each buffer still to come.
    reads: Vec<usize>,
}

impl State<'_> {
    /// The value of `r` (a copy, or the buffer itself at its last read).
    fn read(&mut self, r: ValueRef, context: &str) -> Result<Tensor, InterpError> {
        let bad =
            |reason: &str| InterpError::BadValueRef { context: context.to_string(), value: r, reason: reason.into() };
        match r {
            ValueRef::Param(i) => {
                let t = self.inputs.get(i).ok_or_else(|| bad("names no parameter"))?;
                Ok(Tensor {
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    data: t.data.iter().map(|&v| t.dtype.round(v)).collect(),
                })
            }
            ValueRef::Buffer(i) => {
                let (Some(slot), Some(reads)) = (self.buffers.get_mut(i), self.reads.get_mut(i)) else {
                    return Err(bad("names no buffer"));
                };
                *reads = reads.saturating_sub(1);
                let value = if *reads == 0 { slot.take() } else { slot.clone() };
                value.ok_or_else(|| bad("is read before any launch writes it"))
            }
        }
    }
}

/// How many times each buffer is read (by launches and as a program output).
fn read_counts(p: &Program) -> Vec<usize> {
    let mut reads = vec![0usize; p.buffers.len()];
    let refs = p.launches.iter().flat_map(|l| l.inputs.iter()).chain(&p.outputs);
    for r in refs {
        if let ValueRef::Buffer(i) = r
            && let Some(c) = reads.get_mut(*i)
        {
            *c += 1;
        }
    }
    reads
}

fn run_launch(
    p: &Program,
    bindings: &Bindings,
    state: &mut State<'_>,
    index: usize,
    launch: &Launch,
    max_bytes: u64,
) -> Result<(), InterpError> {
    let kernel = &launch.kernel.name;
    let mut args = Vec::with_capacity(launch.inputs.len());
    for (pos, r) in launch.inputs.iter().enumerate() {
        args.push(state.read(*r, &format!("launch {index} (`{kernel}`) input {pos}"))?);
    }
    let results = run_graph_within(&launch.kernel.graph, &args, bindings, max_bytes)
        .map_err(|e| InterpError::Kernel { launch: index, kernel: kernel.clone(), source: Box::new(e) })?;
    if results.len() != launch.outputs.len() {
        return Err(InterpError::BadValueRef {
            context: format!("launch {index} (`{kernel}`)"),
            value: launch.outputs.first().copied().unwrap_or(ValueRef::Buffer(usize::MAX)),
            reason: format!(
                "the kernel returns {} values but the launch writes {}",
                results.len(),
                launch.outputs.len()
            ),
        });
    }
    for (output, (value, r)) in results.into_iter().zip(&launch.outputs).enumerate() {
        let context = format!("launch {index} (`{kernel}`) output {output}");
        let bad =
            |reason: &str| InterpError::BadValueRef { context: context.clone(), value: *r, reason: reason.into() };
        let ValueRef::Buffer(buffer) = *r else {
            return Err(bad("is not a buffer (launches write buffers only)"));
        };
        let expected = p.buffers.get(buffer).ok_or_else(|| bad("names no buffer"))?;
        let shape = resolve(expected, bindings, &format!("buffer {buffer}"))?;
        if value.dtype != expected.dtype || value.shape != shape {
            return Err(InterpError::BufferMismatch {
                launch: index,
                kernel: kernel.clone(),
                output,
                buffer,
                expected: expected.clone(),
                got_dtype: value.dtype,
                got_shape: value.shape,
            });
        }
        if let Some(slot) = state.buffers.get_mut(buffer) {
            *slot = Some(value);
        }
    }
    Ok(())
}
