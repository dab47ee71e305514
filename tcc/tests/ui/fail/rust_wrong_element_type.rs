// The generated function is typed: an f16 slice cannot be passed where f32 is declared.
tcc::kernel! {
    fn double(x: f32[N]) -> f32[N] {
        x * 2.0
    }
}

fn main() {
    let data = vec![tcc::f16::from_f32(1.0); 4];
    let _ = double((&data, [4]));
}
