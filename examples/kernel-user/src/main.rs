//! Runs the MLP block, the softmax and the f16 MLP through `tcc::kernel!` on a device and checks
//! each against the reference interpreter.
//!
//! `cargo run --release [-- --device T]` (a target as `tcc --target` takes it: cpu, cuda, interp, ...); exits 1 if a result is out of tolerance,
//! 2 if a kernel could not run (for example, no GPU).

use std::process::ExitCode;

use kernel_user::{check_all, check_device_buffers};
use tcc::Device;

fn device(args: &[String]) -> Result<Device, String> {
    let spec = match args {
        [] => tcc::ir::TargetSpec::BestCpu,
        [flag, name] if flag == "--device" => name.parse().map_err(|e| format!("{e}"))?,
        _ => return Err("usage: kernel-user [--device cpu|cpu:cranelift|cpu:llvm|cuda|sm_80|sm_90a|interp]".into()),
    };
    Device::for_target(spec).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let device = match device(&args) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let on_gpu = device.kind() == tcc::DeviceKind::Cuda;
    let all = check_all(&device).and_then(|mut r| {
        if on_gpu {
            r.extend(check_device_buffers(&device, 8)?);
        }
        Ok(r)
    });
    let reports = match all {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!("on {}:", device.name());
    for r in &reports {
        println!(
            "  {:<16} {:<10} max |error| {:.2e}  first call {:>9.3} ms, second {:>8.3} ms  {}",
            r.kernel,
            format!("{:?}", r.shape),
            r.max_abs_error,
            r.first_call.as_secs_f64() * 1e3,
            r.second_call.as_secs_f64() * 1e3,
            if r.ok() { "ok" } else { "MISMATCH" },
        );
    }
    if reports.iter().all(|r| r.ok()) {
        println!("all kernels match the interpreter");
        ExitCode::SUCCESS
    } else {
        eprintln!("some kernels do not match the interpreter");
        ExitCode::FAILURE
    }
}
