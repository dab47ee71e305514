// The inner dimensions of a matrix product differ.
tcc::kernel! {
    fn f(a: f32[4, 5], b: f32[6, 7]) -> f32[4, 7] {
        a @ b
    }
}

fn main() {}
