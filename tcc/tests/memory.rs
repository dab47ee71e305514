//! The library's `--max-memory` (issue 21): a device with a memory limit refuses a run whose
//! tensors together exceed it before anything is compiled or allocated, naming the largest tensor
//! and its size; smaller runs are unaffected.

use tcc::{Device, Error};

tcc::kernel! {
    // Scores of every query against every key: small inputs, an output of S x T.
    fn scores(q: f32[S, 4], k: f32[T, 4]) -> f32[S, T] {
        q @ k.t()
    }
}

#[test]
fn a_device_with_a_memory_limit_refuses_a_run_over_it_before_any_work() {
    // 100,000 x 100,000 f32 scores are 40 GB: without the limit this aborted the process.
    let (s, t) = (100_000usize, 100_000usize);
    let q = vec![0.5f32; s * 4];
    let k = vec![0.25f32; t * 4];
    for device in [Device::cpu().unwrap(), Device::interp()] {
        let name = device.name();
        let limited = device.with_max_memory(1 << 30);
        assert_eq!(limited.max_memory(), Some(1 << 30));
        let e = scores::on(&limited, (&q, [s, 4]), (&k, [t, 4])).unwrap_err();
        assert!(e.is_argument_error(), "{name}: {e}");
        let Error::MemoryLimit { kernel, source } = &e else {
            panic!("{name}: expected a memory limit error, got {e}")
        };
        assert_eq!(kernel, "scores");
        let text = e.to_string();
        assert!(text.contains("more than the limit of 1073741824"), "{name}: {text}");
        assert!(text.contains("f32[100000, 100000], 40000000000 bytes"), "{name}: {text}");
        assert!(matches!(source, tcc::memory::MemoryError::OverLimit { bytes: 40_000_000_000, .. }), "{name}: {text}");
        assert_eq!(limited.compilations(), 0, "{name}: refused before compiling");
    }
    // The same device runs what fits.
    let small = Device::cpu().unwrap().with_max_memory(1 << 20);
    let out = scores::on(&small, (&[1.0f32; 8], [2, 4]), (&[2.0f32; 12], [3, 4])).unwrap();
    assert_eq!(out.shape(), &[2, 3]);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![8.0; 6]);
    // A limit below the inputs themselves is refused too, naming the largest tensor.
    let tiny = Device::cpu().unwrap().with_max_memory(64);
    let e = scores::on(&tiny, (&[1.0f32; 8], [2, 4]), (&[2.0f32; 12], [3, 4])).unwrap_err();
    assert!(e.to_string().contains("the largest tensor is parameter `k`, f32[3, 4], 48 bytes"), "{e}");
}
