// A kernel inside a function body, with parameters named like the generated items (`device`,
// `kernel`, `on`) and a result pair; `let` may shadow the kernel's name.
#![deny(warnings)]

fn main() {
    tcc::kernel! {
        fn split(device: f32[N], kernel: f32[N], on: f32[N]) -> (f32[N], f32[N]) {
            (device + kernel, kernel * on)
        }
    }
    let cpu = tcc::Device::cpu().unwrap();
    let a = [1.0f32, 2.0];
    let (sum, product) = split::on(&cpu, (&a, [2]), (&a, [2]), (&a, [2])).unwrap();
    assert_eq!(sum.to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert_eq!(product.to_vec::<f32>().unwrap(), [1.0, 4.0]);
    let split = split((&a, [2]), (&a, [2]), (&a, [2])).unwrap();
    assert_eq!(split.0, sum);
    assert_eq!(split::kernel().name(), "split");
}
