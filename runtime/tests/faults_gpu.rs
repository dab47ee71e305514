//! Device faults (feature `gpu-tests`, on a CUDA device): running out of device memory is an error
//! naming the allocation, after which the device keeps working; a kernel that faults is an error
//! naming the kernel, never a crash of the process. A fault leaves the CUDA context unusable (the
//! driver's rule), so it is provoked in a child process (this test binary again) and the parent's
//! device is checked to be unharmed — the same isolation the autotuner's worker processes give.

use tcc_codegen::ptx::{KernelIr, LaunchConfig, PtxKernel, PtxStep};
use tcc_ir::interp::Tensor;
use tcc_ir::{BinaryOp, DType, Dim, Graph, KernelClass, Op, Shape, TensorType};
use tcc_runtime::HostTensor;
use tcc_runtime::cuda::{CudaDevice, CudaError};

use crate::common::whole;

fn device() -> CudaDevice {
    CudaDevice::open(0).unwrap_or_else(|e| panic!("feature `gpu-tests` needs a CUDA device: {e}"))
}

/// `x + x` for f32[n]: a small program to show a device still works.
fn add_program(n: u64) -> (tcc_ir::Program, Vec<HostTensor>, Vec<f32>) {
    let mut g = Graph::new("double");
    let x = g.add_param("x", TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Const(n)]) }).unwrap();
    let y = g.push(Op::Binary(BinaryOp::Add, x, x)).unwrap();
    g.outputs.push(y);
    let data: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
    let t = Tensor::new(DType::F32, vec![n as usize], data.clone()).unwrap();
    let expected = data.iter().map(|v| (2.0 * v) as f32).collect();
    (whole(&g, KernelClass::Generic), vec![HostTensor::from_interp(&t).unwrap()], expected)
}

fn still_works(d: &CudaDevice) {
    let (program, inputs, expected) = add_program(1000);
    let out = d.run_program(&program, &inputs).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), expected);
}

#[test]
fn out_of_device_memory_is_an_error_naming_the_allocation_and_the_device_keeps_working() {
    let d = device();
    let total = d.info().total_memory;
    match d.alloc(total.saturating_mul(2), "a buffer twice the device's memory") {
        Err(e @ CudaError::OutOfMemory { .. }) => {
            let text = e.to_string();
            assert!(text.starts_with("out of device memory") && text.contains("twice the device's memory"), "{text}");
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // A program whose output alone needs more memory than the device has (2^35 f32 = 128 GiB).
    let mut g = Graph::new("too_big");
    let x = g.add_param("x", TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Const(1)]) }).unwrap();
    let big = TensorType { dtype: DType::F32, shape: Shape(vec![Dim::Const(1 << 17), Dim::Const(1 << 18)]) };
    let y = g.push_typed(Op::Broadcast(x), big).unwrap();
    g.outputs.push(y);
    let input = HostTensor::from_vec(vec![1], vec![1.0f32]).unwrap();
    if (1u64 << 37) > total {
        let err = d.run_program(&whole(&g, KernelClass::Generic), &[input]).unwrap_err();
        assert!(matches!(err, CudaError::OutOfMemory { .. }), "{err}");
    }
    still_works(&d);
}

/// One entry that stores to address 0: an illegal-address fault.
fn faulting_kernel(d: &CudaDevice) -> PtxKernel {
    let ptx = "\
.version 7.0
.target sm_80
.address_size 64

.visible .entry tcc_fault(.param .u64 out, .param .u64 scratch)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    mov.u64 %rd1, 0;
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}
";
    PtxKernel {
        ptx: ptx.to_string(),
        ir: KernelIr {
            name: "deliberate_fault".into(),
            arch: d.info().arch,
            llvm_ir: String::new(),
            steps: vec![PtxStep {
                tensor_maps: Vec::new(),
                entry: "tcc_fault".into(),
                lowering: "elementwise",
                launch: LaunchConfig {
                    block_threads: 32,
                    max_blocks: 1,
                    blocks_per_sm: 1,
                    shared_bytes: 0,
                    dynamic_shared_bytes: 0,
                },
            }],
            inputs: 0,
            outputs: 1,
            scratch_bytes: 0,
        },
    }
}

#[test]
#[ignore = "the child process of a_faulting_kernel_is_an_error_naming_it_and_the_process_survives"]
fn faulting_kernel_child() {
    let d = device();
    let loaded = d.load(&faulting_kernel(&d)).unwrap();
    let out = d.alloc(16, "the faulting kernel's output").unwrap();
    let scratch = d.alloc(16, "scratch").unwrap();
    let fault = d.launch(&loaded, &[], &[&out], &scratch).and_then(|()| d.sync_after("deliberate_fault"));
    let err = fault.expect_err("a store to address 0 did not fault");
    println!("FAULT: {err}");
    assert!(matches!(err, CudaError::Fault { .. } | CudaError::Launch { .. }), "{err:?}");
    // The context is unusable now: later calls are errors too, never a crash.
    let (program, inputs, _) = add_program(10);
    let after = d.run_program(&program, &inputs);
    println!("AFTER: {}", after.as_ref().map_or_else(|e| e.to_string(), |_| "ok".to_string()));
    println!("CHILD DONE");
}

#[test]
fn a_faulting_kernel_is_an_error_naming_it_and_the_process_survives() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "faults_gpu::faulting_kernel_child", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed ({:?}):\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.contains("FAULT: kernel `deliberate_fault`")
            || stdout.contains("FAULT: launching kernel `deliberate_fault`"),
        "{stdout}"
    );
    assert!(stdout.contains("CHILD DONE"), "{stdout}");
    // This process's device never saw the fault.
    still_works(&device());
}
