//! The printer of the text form.

use std::fmt::Write;

use super::lex::{is_ident_continue, is_ident_start};
use crate::graph::Graph;
use crate::op::{NodeId, Op, TensorType};
use crate::shape::Dim;

/// Appends `name` as the text form writes names: bare when it is an identifier, quoted otherwise
/// (control characters and whitespace other than a space are escaped, so a name never breaks a line).
pub fn write_name(out: &mut String, name: &str) {
    let mut chars = name.chars();
    let ident = chars.next().is_some_and(is_ident_start) && chars.all(is_ident_continue);
    if ident {
        out.push_str(name);
        return;
    }
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `value` so that parsing it gives back the same bits: Rust's shortest round-tripping
/// form for finite values, `inf`, `-inf`, `nan` for the canonical NaN and `nan(0x<bits>)` for any
/// other NaN.
pub fn write_f64(out: &mut String, value: f64) {
    if value.is_nan() {
        if value.to_bits() == f64::NAN.to_bits() {
            out.push_str("nan");
        } else {
            let _ = write!(out, "nan(0x{:016x})", value.to_bits());
        }
    } else if value == f64::INFINITY {
        out.push_str("inf");
    } else if value == f64::NEG_INFINITY {
        out.push_str("-inf");
    } else {
        let _ = write!(out, "{value:?}");
    }
}

fn ty(out: &mut String, t: &TensorType) {
    out.push_str(t.dtype.name());
    out.push('[');
    for (i, d) in t.shape.0.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match d {
            Dim::Const(n) => {
                let _ = write!(out, "{n}");
            }
            Dim::Var(v) => write_name(out, v),
        }
    }
    out.push(']');
}

fn values(out: &mut String, ids: &[NodeId]) {
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{id}");
    }
}

fn list(out: &mut String, items: &[usize]) {
    out.push('[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

fn op(out: &mut String, op: &Op) {
    match op {
        Op::Input { index } => {
            let _ = write!(out, "input {index}");
        }
        Op::Constant { value } => {
            out.push_str("const ");
            write_f64(out, *value);
        }
        Op::Iota => out.push_str("iota"),
        Op::Permute { input, perm } => {
            let _ = write!(out, "permute {input} perm=");
            list(out, perm);
        }
        Op::Slice { input, axis, start, end } => {
            let _ = write!(out, "slice {input} axis={axis} start={start} end={end}");
        }
        Op::Concat { inputs, axis } => {
            out.push_str("concat ");
            values(out, inputs);
            let _ = write!(out, " axis={axis}");
        }
        Op::Reduce { input, axes, keepdim, .. } => {
            let _ = write!(out, "{} {input} axes=", op.kind_name());
            list(out, axes);
            if *keepdim {
                out.push_str(" keepdim");
            }
        }
        Op::Unary(..)
        | Op::Cast(_)
        | Op::Binary(..)
        | Op::Compare(..)
        | Op::Select { .. }
        | Op::Broadcast(_)
        | Op::Reshape(_)
        | Op::MatMul(..) => {
            out.push_str(&op.kind_name());
            out.push(' ');
            values(out, &op.operands());
        }
    }
}

/// Appends the text of one function, ending with a newline.
pub(super) fn graph(out: &mut String, g: &Graph) {
    out.push_str("fn ");
    write_name(out, &g.name);
    out.push('(');
    for (i, p) in g.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_name(out, &p.name);
        out.push_str(": ");
        ty(out, &p.ty);
    }
    out.push_str(") -> (");
    for (i, id) in g.outputs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match g.ty(*id) {
            Some(t) => ty(out, t),
            // Only a graph that does not verify gets here; `?` makes its text fail to parse.
            None => out.push('?'),
        }
    }
    out.push_str(") {\n");
    for (i, node) in g.nodes.iter().enumerate() {
        let _ = write!(out, "  %{i} = ");
        op(out, &node.op);
        out.push_str(" : ");
        ty(out, &node.ty);
        out.push('\n');
    }
    out.push_str("  return");
    if !g.outputs.is_empty() {
        out.push(' ');
        values(out, &g.outputs);
    }
    out.push_str("\n}\n");
}
