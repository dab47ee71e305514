// Shapes that do not broadcast: the error points at the `+` expression.
tcc::kernel! {
    fn f(x: f32[4, 5], y: f32[3]) -> f32[4, 5] {
        x + y
    }
}

fn main() {}
