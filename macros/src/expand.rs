//! The items generated for each checked fn.
//!
//! Design: a function and a module of the same name (they live in different namespaces).
//! `f(x, y)` reads like the DSL call it stands for and runs on the CPU; `f::on(&device, x, y)`
//! chooses the device; `f::on_device(&gpu, x, y)` keeps the outputs in the GPU's memory (any
//! argument may already be there); with `tcc`'s feature `ndarray`, `f::array(x, y)` and
//! `f::array_on(&device, x, y)` return `ndarray` arrays (the items are wrapped in
//! `::tcc::__with_ndarray!`, which expands to nothing in a build without the feature);
//! `f::kernel()`, `f::IR`, `f::PARAMS` expose the rest. A unit struct with a
//! `call` method was the alternative; it is rejected because a unit struct cannot be shadowed by a
//! `let` (`let softmax = softmax.call(..)` would not compile).
//!
//! Both items allow `dead_code`: a kernel called only through `f::on` must not make `f` warn.
//!
//! Every path in the generated code is absolute (`::tcc::..`, `::core::..`); items the generated
//! code defines are reached through `self::` (so a DSL parameter named `kernel` cannot shadow
//! them) and the device parameter has a `mixed_site` span (so a DSL parameter named `device`
//! cannot collide with it).

use std::collections::HashMap;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use tcc_ir::{DType, Graph, Module};

use crate::names::FnNames;

/// The items of every fn of `module`, or compile errors for fns whose names cannot be Rust names.
pub fn module(module: &Module, names: &HashMap<String, FnNames>) -> TokenStream {
    module.functions.iter().map(|g| function(g, names.get(&g.name))).collect()
}

/// The Rust type of one element of `dtype`, at the span of the DSL's dtype token (so a Rust type
/// error about an argument points at the parameter's declared dtype).
fn element(dtype: DType, span: Span) -> TokenStream {
    match dtype {
        DType::F32 => quote_spanned!(span=> ::core::primitive::f32),
        DType::F16 => quote_spanned!(span=> ::tcc::f16),
        DType::BF16 => quote_spanned!(span=> ::tcc::bf16),
        DType::I32 => quote_spanned!(span=> ::core::primitive::i32),
        DType::Bool => quote_spanned!(span=> ::core::primitive::bool),
    }
}

/// `name` as a Rust identifier at `span`, if it is one (keywords are not).
fn ident(name: &str, span: Span) -> Option<Ident> {
    let mut i: Ident = syn::parse_str(name).ok()?;
    i.set_span(span);
    Some(i)
}

fn function(g: &Graph, names: Option<&FnNames>) -> TokenStream {
    let name_span = names.map_or_else(Span::call_site, |n| n.name);
    let Some(name) = ident(&g.name, name_span) else {
        let msg = format!("`{}` cannot name a Rust function: rename the fn", g.name);
        return quote_spanned!(name_span=> ::core::compile_error!(#msg););
    };
    let ir = tcc_ir::text::print_graph(g);
    if let Err(e) = tcc_ir::text::parse_graph(&ir) {
        let msg = format!("internal error in tcc: the IR text of `{}` does not parse back: {e}", g.name);
        return quote_spanned!(name_span=> ::core::compile_error!(#msg););
    }
    let mut params = Vec::with_capacity(g.params.len());
    let mut types = Vec::with_capacity(g.params.len());
    let mut dtype_spans = Vec::with_capacity(g.params.len());
    for (i, p) in g.params.iter().enumerate() {
        let spans = names.and_then(|n| n.params.get(&p.name)).copied();
        let span = spans.map_or_else(Span::call_site, |s| s.name);
        match ident(&p.name, span) {
            Some(id) => params.push(id),
            None => {
                let msg = format!("parameter {i} `{}` of `{}` cannot name a Rust parameter: rename it", p.name, g.name);
                return quote_spanned!(span=> ::core::compile_error!(#msg););
            }
        }
        let dtype_span = spans.map_or_else(Span::call_site, |s| s.dtype);
        types.push(element(p.ty.dtype, dtype_span));
        dtype_spans.push(dtype_span);
    }
    let param_names: Vec<&str> = g.params.iter().map(|p| p.name.as_str()).collect();
    let fn_name = g.name.as_str();
    let signature = ir.lines().next().unwrap_or_default().trim_end_matches('{').trim_end();
    let doc_fn = format!(
        " The tcc kernel `{signature}`, run on the CPU (`tcc::Device::default_cpu`).\n\n \
         Shape variables are bound from the arguments' shapes; a mismatch is a `tcc::Error::Shape` \
         naming the parameter. [`{fn_name}::on`] runs on any device."
    );
    let doc_mod = format!(" The kernel `{signature}`: running it on a device, and its embedded IR.");
    let doc_ir = format!(" The checked program in tcc's canonical IR text:\n\n ```text\n{ir}\n ```");

    let outs: Vec<Ident> =
        (0..g.outputs.len()).map(|k| format_ident!("__tcc_out{}", k, span = Span::mixed_site())).collect();
    let n_outs = outs.len();
    let (ret, ret_device, value) = match outs.as_slice() {
        [one] => (quote!(::tcc::HostTensor), quote!(::tcc::device::DeviceTensor), quote!(#one)),
        _ => {
            let tys = outs.iter().map(|_| quote!(::tcc::HostTensor));
            let dev = outs.iter().map(|_| quote!(::tcc::device::DeviceTensor));
            (quote!((#(#tys,)*)), quote!((#(#dev,)*)), quote!((#(#outs,)*)))
        }
    };
    // With `tcc`'s feature `ndarray`: the outputs as arrays of their dtypes' elements.
    let out_elems: Vec<TokenStream> = g
        .outputs
        .iter()
        .map(|&id| g.ty(id).map_or_else(|| quote!(::core::primitive::f32), |t| element(t.dtype, Span::call_site())))
        .collect();
    let (ret_array, value_array) = match (outs.as_slice(), out_elems.as_slice()) {
        ([one], [elem]) => {
            (quote!(::tcc::ndarray::ArrayD<#elem>), quote!(::tcc::arrays::into_array::<#elem>(self::NAME, &#one)))
        }
        _ => {
            let tys = out_elems.iter().map(|e| quote!(::tcc::ndarray::ArrayD<#e>));
            let vals =
                outs.iter().zip(&out_elems).map(|(o, e)| quote!(::tcc::arrays::into_array::<#e>(self::NAME, &#o)?));
            (quote!((#(#tys,)*)), quote!(::core::result::Result::Ok((#(#vals,)*))))
        }
    };
    let device = Ident::new("device", Span::mixed_site());
    let bounds = types.iter().zip(&dtype_spans).map(|(ty, &sp)| quote_spanned!(sp=> ::tcc::IntoTensor<'a, #ty>));
    let args = quote!(#(#params: impl #bounds),*);

    quote! {
        #[doc = #doc_fn]
        // Reason: keeps the DSL fn's name, may be unused, and takes one argument per DSL parameter.
        #[allow(non_snake_case, dead_code, clippy::too_many_arguments)]
        pub fn #name<'a>(#args) -> ::core::result::Result<#ret, ::tcc::Error> {
            #name::on(::tcc::Device::default_cpu()?, #(#params),*)
        }

        #[doc = #doc_mod]
        // Reason: the module shares the fn's DSL name, and a kernel may use only some of its items.
        #[allow(non_snake_case, dead_code)]
        pub mod #name {
            /// The function's name.
            pub const NAME: &str = #fn_name;
            #[doc = #doc_ir]
            pub const IR: &str = #ir;
            /// The parameters' names, in order.
            pub const PARAMS: &[&str] = &[#(#param_names),*];

            /// The kernel (parsed, optimized and compiled on first use; shared by every call).
            pub fn kernel() -> &'static ::tcc::Kernel {
                static KERNEL: ::tcc::Kernel = ::tcc::Kernel::from_ir(self::NAME, self::IR);
                &KERNEL
            }

            /// Runs the kernel on `device`; the first call for a device and set of shapes compiles.
            // Reason: one argument per DSL parameter, plus the device.
            #[allow(clippy::too_many_arguments)]
            pub fn on<'a>(#device: &::tcc::Device, #args) -> ::core::result::Result<#ret, ::tcc::Error> {
                let [#(#outs),*] = self::kernel().run_array::<#n_outs>(
                    #device,
                    ::std::vec![#(::tcc::IntoTensor::<'a, #types>::into_tensor(#params)),*],
                )?;
                ::core::result::Result::Ok(#value)
            }

            /// Runs the kernel on a CUDA `device` and leaves the outputs in its memory
            /// (`tcc::device::DeviceTensor`, read back with `device.download`); arguments may be
            /// host data or device tensors of the same device (used in place).
            // Reason: one argument per DSL parameter, plus the device.
            #[allow(clippy::too_many_arguments)]
            pub fn on_device<'a>(
                #device: &::tcc::Device,
                #args
            ) -> ::core::result::Result<#ret_device, ::tcc::Error> {
                let [#(#outs),*] = self::kernel().run_device_array::<#n_outs>(
                    #device,
                    ::std::vec![#(::tcc::IntoTensor::<'a, #types>::into_tensor(#params)),*],
                )?;
                ::core::result::Result::Ok(#value)
            }

            ::tcc::__with_ndarray! {
                /// Runs the kernel on the CPU and returns its outputs as `ndarray` arrays (feature
                /// `ndarray` of `tcc`); arguments may be arrays or views of any layout.
                // Reason: one argument per DSL parameter.
                #[allow(clippy::too_many_arguments)]
                pub fn array<'a>(#args) -> ::core::result::Result<#ret_array, ::tcc::Error> {
                    self::array_on(::tcc::Device::default_cpu()?, #(#params),*)
                }

                /// Runs the kernel on `device` and returns its outputs as `ndarray` arrays.
                // Reason: one argument per DSL parameter, plus the device.
                #[allow(clippy::too_many_arguments)]
                pub fn array_on<'a>(
                    #device: &::tcc::Device,
                    #args
                ) -> ::core::result::Result<#ret_array, ::tcc::Error> {
                    let [#(#outs),*] = self::kernel().run_array::<#n_outs>(
                        #device,
                        ::std::vec![#(::tcc::IntoTensor::<'a, #types>::into_tensor(#params)),*],
                    )?;
                    #value_array
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::module;
    use crate::names::scan;

    fn expand(tokens: proc_macro2::TokenStream) -> String {
        let names = scan(&tokens);
        let m = tcc_frontend::parse_tokens(tokens).unwrap();
        module(&m, &names).to_string()
    }

    #[test]
    fn one_function_and_one_module_per_fn_with_typed_parameters() {
        let out = expand(quote! {
            fn scale(x: f16[N], s: f32[]) -> f16[N] { x * s.cast::<f16>() }
            fn pair(x: i32[N]) -> (i32[N], bool[N]) { (x, x > 0) }
        });
        assert!(out.contains("pub fn scale < 'a > (x : impl :: tcc :: IntoTensor < 'a , :: tcc :: f16 >"), "{out}");
        assert!(out.contains("s : impl :: tcc :: IntoTensor < 'a , :: core :: primitive :: f32 >"), "{out}");
        assert!(out.contains("pub mod scale"), "{out}");
        assert!(out.contains("pub mod pair"), "{out}");
        assert!(out.contains("run_array :: < 2usize >"), "{out}");
        assert!(out.contains(":: core :: primitive :: bool") || out.contains(":: core :: primitive :: i32"), "{out}");
    }

    #[test]
    fn the_embedded_ir_parses_back_to_the_checked_graph() {
        let tokens = quote! { fn f(x: f32[M, 4]) -> f32[M, 4] { exp(x) + 1.0 } };
        let m = tcc_frontend::parse_tokens(tokens.clone()).unwrap();
        let out = expand(tokens);
        let ir = tcc_ir::text::print_graph(&m.functions[0]);
        assert!(out.contains(&format!("{ir:?}")), "{out}");
        assert_eq!(tcc_ir::text::parse_graph(&ir).unwrap(), m.functions[0]);
    }
}
