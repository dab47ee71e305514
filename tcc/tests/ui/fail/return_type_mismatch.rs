// keepdim leaves a size-1 axis: the body computes f32[N, 1].
tcc::kernel! {
    fn f(x: f32[N, D]) -> f32[N, D] {
        x.sum(-1, keepdim)
    }
}

fn main() {}
