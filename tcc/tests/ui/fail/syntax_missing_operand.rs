// An operator with nothing on its right.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] {
        let y = x * ;
        y
    }
}

fn main() {}
