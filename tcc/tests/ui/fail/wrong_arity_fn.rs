// A call of another fn of the invocation with too few arguments.
tcc::kernel! {
    fn scale(x: f32[N], s: f32[]) -> f32[N] {
        x * s
    }

    fn f(x: f32[N]) -> f32[N] {
        scale(x)
    }
}

fn main() {}
