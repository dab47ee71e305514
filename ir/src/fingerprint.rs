//! Stable content hashes of graphs and kernels, for caches and lockfiles.
//!
//! A fingerprint is the blake3 hash of a canonical text, never of `DefaultHasher` output, so it is
//! the same across processes, machines and Rust versions.
//!
//! Names: a graph's fingerprint is the hash of [`print_graph`], which includes the function's name
//! and its parameter names (two graphs with different names are different graphs). A kernel's
//! fingerprint must let identical kernels share cache entries, so it ignores the kernel's name, its
//! graph's name and its parameter names: the graph is printed with the function named `kernel` and
//! the parameters named `p0, p1, ...`. Shape variable names are kept: they are bound by name at
//! call time, so they are part of the kernel's meaning.

use std::fmt;
use std::str::FromStr;

use crate::graph::Graph;
use crate::program::{Kernel, Schedule};
use crate::text::{print_graph, write_name};

/// A 256-bit blake3 hash; displays as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The blake3 hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Fingerprint {
        Fingerprint(*blake3::hash(bytes).as_bytes())
    }

    /// The raw hash.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Wraps raw hash bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Fingerprint {
        Fingerprint(bytes)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint is 64 hex digits, found {0:?}")]
pub struct ParseFingerprintError(pub String);

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;

    /// Parses 64 hex digits (either case).
    fn from_str(s: &str) -> Result<Fingerprint, ParseFingerprintError> {
        let bad = || ParseFingerprintError(s.chars().take(80).collect());
        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(s.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(out))
    }
}

impl serde::Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Fingerprint, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The blake3 hash of the graph's canonical text ([`print_graph`]); names are included.
pub fn fingerprint_graph(g: &Graph) -> Fingerprint {
    Fingerprint::of(print_graph(g).as_bytes())
}

/// The canonical text a kernel fingerprint hashes: a version line, the target, the class, every
/// schedule field by name, and the kernel graph with positional names (see the module docs).
pub fn kernel_text(k: &Kernel, target: &str) -> String {
    // Destructured without `..`, so a new schedule field cannot be forgotten here.
    let Schedule {
        tier,
        tile_m,
        tile_n,
        tile_k,
        micro_m,
        micro_n,
        vector_width,
        stages,
        warps,
        split_k,
        swizzle,
        threads,
    } = k.schedule;
    let mut graph = k.graph.clone();
    graph.name = "kernel".to_string();
    for (i, p) in graph.params.iter_mut().enumerate() {
        p.name = format!("p{i}");
    }
    let mut text = String::from("tcc kernel fingerprint v1\ntarget ");
    write_name(&mut text, target);
    text.push_str(&format!(
        "\nclass {}\nschedule tier={} tile_m={tile_m} tile_n={tile_n} tile_k={tile_k} micro_m={micro_m} \
         micro_n={micro_n} vector_width={vector_width} stages={stages} warps={warps} split_k={split_k} \
         swizzle={swizzle} threads={threads}\n",
        k.class.name(),
        tier.name(),
    ));
    text.push_str(&print_graph(&graph));
    text
}

/// The blake3 hash of [`kernel_text`]: depends on the kernel's graph (not its names), class,
/// schedule and `target`.
pub fn fingerprint_kernel(k: &Kernel, target: &str) -> Fingerprint {
    Fingerprint::of(kernel_text(k, target).as_bytes())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde::de::IntoDeserializer;

    use super::*;
    use crate::dtype::DType;
    use crate::op::{BinaryOp, Op, ReduceOp};
    use crate::program::{KernelClass, Tier};
    use crate::text::tests::{every_op_graph, tt};

    fn small_graph() -> Graph {
        let mut g = Graph::new("softmax_head");
        let x = g.add_param("x", tt(DType::F32, &["M", "128"])).unwrap();
        let m = g.push(Op::Reduce { op: ReduceOp::Max, input: x, axes: vec![1], keepdim: true }).unwrap();
        let d = g.push(Op::Binary(BinaryOp::Sub, x, m)).unwrap();
        g.outputs = vec![d];
        g
    }

    fn kernel(name: &str, graph: Graph) -> Kernel {
        Kernel {
            name: name.into(),
            class: KernelClass::RowReduction,
            graph,
            schedule: Schedule::default_for(Tier::Cranelift),
        }
    }

    #[test]
    fn graph_fingerprint_is_the_hash_of_the_text_and_stable() {
        let g = small_graph();
        let fp = fingerprint_graph(&g);
        assert_eq!(fp, Fingerprint::of(print_graph(&g).as_bytes()));
        // Golden value, computed once by this code: a change means every cache key changes.
        assert_eq!(fp.to_string(), "636c152d13241d6211e9ff4f74490df05cf97f36f712e48736b41394feacb732");
        assert_eq!(fingerprint_graph(&g.clone()), fp);
    }

    #[test]
    fn kernel_fingerprint_is_stable() {
        let fp = fingerprint_kernel(&kernel("k0_softmax", small_graph()), "cpu:cranelift");
        assert_eq!(fp.to_string(), "eb111ade1aa2e36f977ffbefb5025f88c56c417255ebeefdae1919f0c6018773");
    }

    #[test]
    fn graph_fingerprint_sees_names_and_every_change() {
        let g = small_graph();
        let mut renamed = g.clone();
        renamed.params[0].name = "y".into();
        assert_ne!(fingerprint_graph(&renamed), fingerprint_graph(&g));
        let mut other = g.clone();
        other.nodes[1].op = Op::Reduce { op: ReduceOp::Min, input: crate::NodeId(0), axes: vec![1], keepdim: true };
        assert_ne!(fingerprint_graph(&other), fingerprint_graph(&g));
        assert_ne!(fingerprint_graph(&every_op_graph()), fingerprint_graph(&g));
    }

    #[test]
    fn kernel_fingerprint_ignores_names_only() {
        let base = kernel("k0_softmax", small_graph());
        let fp = fingerprint_kernel(&base, "sm_80");
        let mut renamed = base.clone();
        renamed.name = "k7_other".into();
        renamed.graph.name = "whatever".into();
        renamed.graph.params[0].name = "\"weird\" name".into();
        assert_eq!(fingerprint_kernel(&renamed, "sm_80"), fp);

        assert_ne!(fingerprint_kernel(&base, "sm_90a"), fp);
        let mut class = base.clone();
        class.class = KernelClass::Generic;
        assert_ne!(fingerprint_kernel(&class, "sm_80"), fp);
        let mut sched = base.clone();
        sched.schedule.swizzle = 8;
        assert_ne!(fingerprint_kernel(&sched, "sm_80"), fp);
        let mut tier = base.clone();
        tier.schedule.tier = Tier::Ptx;
        assert_ne!(fingerprint_kernel(&tier, "sm_80"), fp);
        let mut dims = base.clone();
        dims.graph.params[0].ty = tt(DType::F32, &["N", "128"]);
        dims.graph.nodes[0].ty = tt(DType::F32, &["N", "128"]);
        assert_ne!(fingerprint_kernel(&dims, "sm_80"), fp);
        // A target cannot forge the lines after it.
        assert_ne!(fingerprint_kernel(&base, "sm_80\nclass generic"), fp);
    }

    #[test]
    fn hex_parses_back() {
        let fp = fingerprint_graph(&small_graph());
        let hex = fp.to_string();
        assert_eq!(hex.len(), 64);
        assert!(hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(hex.parse::<Fingerprint>().unwrap(), fp);
        assert_eq!(hex.to_uppercase().parse::<Fingerprint>().unwrap(), fp);
        assert_eq!(Fingerprint::from_bytes(*fp.as_bytes()), fp);
        assert!("abc".parse::<Fingerprint>().is_err());
        assert!("é".repeat(32).parse::<Fingerprint>().is_err());
        assert!(format!("{}g", &hex[1..]).parse::<Fingerprint>().is_err());
        let de: Result<Fingerprint, serde::de::value::Error> =
            Fingerprint::deserialize(hex.as_str().into_deserializer());
        assert_eq!(de.unwrap(), fp);
        let bad: Result<Fingerprint, serde::de::value::Error> = Fingerprint::deserialize("zz".into_deserializer());
        assert!(bad.is_err());
    }
}
