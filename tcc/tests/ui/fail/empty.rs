// An invocation with no fn.
tcc::kernel! {}

fn main() {}
