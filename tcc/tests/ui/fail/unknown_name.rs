// A typo in a binding name: the error points at the typo and suggests the binding.
tcc::kernel! {
    fn f(x: f32[N]) -> f32[N] {
        let scaled = x * 2.0;
        scaeld + x
    }
}

fn main() {}
