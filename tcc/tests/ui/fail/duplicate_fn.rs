// Two fns with one name.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] { x }
    fn f(x: f32[N]) -> f32[N] { x * 2.0 }
}

fn main() {}
