// Operands of different dtypes.
tcc::kernel! {
    fn f(x: f32[N], y: f16[N]) -> f32[N] {
        x * y
    }
}

fn main() {}
