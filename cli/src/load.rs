//! Reading a program file, printing its diagnostics, and choosing the fn and the shape bindings.

use std::io::IsTerminal;
use std::path::Path;

use tcc_ir::{Bindings, Graph, Module};

use super::args::ProgramArgs;
use super::error::CliError;

/// A parsed program file.
pub struct Loaded {
    /// The file name as given.
    pub name: String,
    /// The checked module.
    pub module: Module,
}

/// Reads and checks the file; diagnostics go to stderr and make this an invalid-input error.
pub fn load(path: &Path) -> Result<Loaded, CliError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CliError::invalid(format!("cannot read `{name}`: no such file")),
        std::io::ErrorKind::IsADirectory => CliError::invalid(format!("`{name}` is a directory, not a program file")),
        _ => CliError::Environment(format!("cannot read `{name}`: {e}")),
    })?;
    match tcc_frontend::parse_bytes(&name, &bytes) {
        Ok(module) => Ok(Loaded { name, module }),
        Err(diagnostics) => {
            let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            eprint!("{}", diagnostics.render(color));
            let count = diagnostics.len();
            eprintln!(
                "error: could not compile `{name}` due to {count} previous error{}",
                if count == 1 { "" } else { "s" }
            );
            Err(CliError::Invalid { message: format!("{count} errors"), printed: true })
        }
    }
}

/// The fn named by `--fn`, or the only fn of the module.
pub fn select_fn<'m>(loaded: &'m Loaded, args: &ProgramArgs) -> Result<&'m Graph, CliError> {
    let names = || loaded.module.functions.iter().map(|g| format!("`{}`", g.name)).collect::<Vec<_>>().join(", ");
    match &args.function {
        Some(name) => loaded.module.function(name).ok_or_else(|| {
            CliError::invalid(format!("`{}` has no fn named `{name}`; it defines {}", loaded.name, names()))
        }),
        None => match loaded.module.functions.as_slice() {
            [only] => Ok(only),
            _ => Err(CliError::invalid(format!(
                "`{}` defines several fns ({}); choose one with --fn NAME",
                loaded.name,
                names()
            ))),
        },
    }
}

/// Binds every shape variable `graph` uses from `--dim` values, naming every unbound one.
pub fn bind(graph: &Graph, dims: &[(String, u64)]) -> Result<Bindings, CliError> {
    let mut bindings = Bindings::new();
    let mut unbound = Vec::new();
    for var in graph.shape_vars() {
        match dims.iter().rev().find(|(name, _)| *name == var) {
            Some((_, value)) => {
                bindings.insert(var, *value);
            }
            None => unbound.push(var),
        }
    }
    if unbound.is_empty() {
        check_sizes(graph, &bindings)?;
        Ok(bindings)
    } else {
        let list = unbound.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
        let example = unbound.iter().map(|v| format!("--dim {v}=...")).collect::<Vec<_>>().join(" ");
        Err(CliError::invalid(format!(
            "fn `{}` has unbound shape variables {list}; bind them with {example}",
            graph.name
        )))
    }
}

/// Refuses bindings under which a tensor of `graph` (a parameter or a value) would have `2^40`
/// elements or more (contract §6): invalid input, before anything is compiled or allocated.
fn check_sizes(graph: &Graph, bindings: &Bindings) -> Result<(), CliError> {
    let limit = tcc_ir::limits::MAX_ELEMENTS;
    let types = graph
        .params
        .iter()
        .map(|p| (format!("parameter `{}`", p.name), &p.ty))
        .chain(graph.nodes.iter().enumerate().map(|(i, n)| (format!("value %{i}"), &n.ty)));
    for (what, ty) in types {
        let Some(dims) = ty.shape.resolve(bindings) else { continue };
        let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        if elements.is_none_or(|n| n >= limit) {
            return Err(CliError::invalid(format!(
                "fn `{}`: {what} would be {}{dims:?}, {} elements, over the limit of 2^40",
                graph.name,
                ty.dtype,
                elements.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
            )));
        }
    }
    Ok(())
}
