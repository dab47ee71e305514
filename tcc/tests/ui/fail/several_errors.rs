// Each fn is checked on its own: both errors are reported.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] {
        x + y
    }

    fn g(x: f32[N]) -> f32[N] {
        tanhh(x)
    }
}

fn main() {}
