// exp takes one argument.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] {
        exp(x, x)
    }
}

fn main() {}
