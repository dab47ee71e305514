//! Helpers shared by the tests: devices, simple partitions of a graph into programs, comparison.

use std::sync::OnceLock;

use tcc_codegen::LowerOptions;
use tcc_ir::interp::{Tensor, run_graph};
use tcc_ir::testing::{Tolerance, compare_outputs};
use tcc_ir::{Graph, Kernel, KernelClass, Launch, Op, Program, Schedule, Tier, ValueRef};
use tcc_runtime::{CpuDevice, HostTensor};

/// The default device (fused lowering, every core).
pub fn device() -> &'static CpuDevice {
    static D: OnceLock<CpuDevice> = OnceLock::new();
    D.get_or_init(|| CpuDevice::new().unwrap())
}

/// A device whose lowering materializes every node and runs matmuls as plain loop nests (the
/// simplest path).
pub fn materializing_device() -> &'static CpuDevice {
    static D: OnceLock<CpuDevice> = OnceLock::new();
    D.get_or_init(|| {
        CpuDevice::with_options(LowerOptions { materialize_all: true, gemm: None, ..LowerOptions::default() }, 0)
            .unwrap()
    })
}

fn kernel(name: String, class: KernelClass, graph: Graph) -> Kernel {
    Kernel { name, class, graph, schedule: Schedule::default_for(Tier::Cranelift) }
}

/// The whole graph as one kernel of `class`.
pub fn whole(g: &Graph, class: KernelClass) -> Program {
    let buffers: Vec<_> = g.outputs.iter().map(|o| g.nodes[o.index()].ty.clone()).collect();
    let launch = Launch {
        kernel: kernel(format!("{}_all", g.name), class, g.clone()),
        inputs: (0..g.params.len()).map(ValueRef::Param).collect(),
        outputs: (0..g.outputs.len()).map(ValueRef::Buffer).collect(),
    };
    Program {
        name: g.name.clone(),
        params: g.params.clone(),
        buffers,
        launches: vec![launch],
        outputs: (0..g.outputs.len()).map(ValueRef::Buffer).collect(),
    }
}

/// Each op its own kernel of class Generic.
pub fn per_op(g: &Graph) -> Program {
    let mut values: Vec<ValueRef> = Vec::new();
    let mut buffers = Vec::new();
    let mut launches = Vec::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if let Op::Input { index } = node.op {
            values.push(ValueRef::Param(index));
            continue;
        }
        let mut kg = Graph::new(format!("op{i}"));
        let mut inputs = Vec::new();
        let mut map = std::collections::HashMap::new();
        for a in node.op.operands() {
            if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(a) {
                slot.insert(kg.add_param(format!("a{}", a.0), g.nodes[a.index()].ty.clone()).unwrap());
                inputs.push(values[a.index()]);
            }
        }
        let out = kg.push_typed(node.op.map_operands(|a| map[&a]), node.ty.clone()).unwrap();
        kg.outputs.push(out);
        let b = buffers.len();
        buffers.push(node.ty.clone());
        launches.push(Launch {
            kernel: kernel(format!("k{i}_{}", node.op.kind_name()), KernelClass::Generic, kg),
            inputs,
            outputs: vec![ValueRef::Buffer(b)],
        });
        values.push(ValueRef::Buffer(b));
    }
    Program {
        name: g.name.clone(),
        params: g.params.clone(),
        buffers,
        launches,
        outputs: g.outputs.iter().map(|o| values[o.index()]).collect(),
    }
}

/// Runs `program` on `device` with interpreter tensors as inputs and outputs.
pub fn run_on(device: &CpuDevice, program: &Program, inputs: &[Tensor]) -> Vec<Tensor> {
    let host: Vec<HostTensor> = inputs.iter().map(|t| HostTensor::from_interp(t).unwrap()).collect();
    device.run(program, &host).unwrap().iter().map(HostTensor::to_interp).collect()
}

/// Checks `program` against the interpreter's result for `g` on `inputs`.
pub fn check(
    device: &CpuDevice,
    g: &Graph,
    program: &Program,
    inputs: &[Tensor],
    tol: &Tolerance,
) -> Result<(), String> {
    let expected = run_graph(g, inputs).map_err(|e| format!("interp: {e}"))?;
    let actual = run_on(device, program, inputs);
    compare_outputs(&expected, &actual, tol).map_err(|m| format!("{m}"))
}
