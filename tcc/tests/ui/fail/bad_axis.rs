// Axis 2 does not exist in a matrix.
tcc::kernel! {
    fn f(x: f32[N, D]) -> f32[N] {
        x.sum(2)
    }
}

fn main() {}
