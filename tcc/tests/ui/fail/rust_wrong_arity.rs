// The generated function takes one argument per DSL parameter.
tcc::kernel! {
    fn add(a: f32[N], b: f32[N]) -> f32[N] {
        a + b
    }
}

fn main() {
    let data = [1.0f32; 4];
    let _ = add((&data, [4]));
}
