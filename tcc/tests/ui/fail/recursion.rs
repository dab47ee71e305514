// Calls are inlined, so a fn calling itself never ends.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] {
        f(x) + x
    }
}

fn main() {}
