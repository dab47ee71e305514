// f64 is not a dtype of tcc.
tcc::kernel! {
    fn f(x: f64[N]) -> f32[N] {
        x
    }
}

fn main() {}
