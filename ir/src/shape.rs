//! Shapes: lists of dimensions, each a constant or a named shape variable bound at call time.

use std::collections::BTreeMap;
use std::fmt;

use crate::limits;

/// One dimension of a shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Dim {
    /// A size known at compile time.
    Const(u64),
    /// A named shape variable (`M`, `N`, `batch`) bound when the program is called.
    Var(String),
}

impl Dim {
    /// The constant size, if this dimension is one.
    pub fn as_const(&self) -> Option<u64> {
        match self {
            Dim::Const(n) => Some(*n),
            Dim::Var(_) => None,
        }
    }

    /// True if this is the constant 1 (the dimension numpy broadcasting stretches).
    pub fn is_one(&self) -> bool {
        matches!(self, Dim::Const(1))
    }

    /// The size under a binding of shape variables; `None` if the variable is unbound.
    pub fn resolve(&self, bindings: &Bindings) -> Option<u64> {
        match self {
            Dim::Const(n) => Some(*n),
            Dim::Var(name) => bindings.get(name).copied(),
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Const(n) => write!(f, "{n}"),
            Dim::Var(name) => f.write_str(name),
        }
    }
}

/// Values of shape variables, by name.
pub type Bindings = BTreeMap<String, u64>;

/// The shape of a tensor: one [`Dim`] per axis; rank 0 is a scalar.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    /// A scalar (rank 0).
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// A shape of constant dimensions.
    pub fn from_consts(dims: &[u64]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Const(d)).collect())
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[Dim] {
        &self.0
    }

    /// Names of the shape variables used, sorted and without duplicates.
    pub fn vars(&self) -> Vec<String> {
        let mut vars: Vec<String> = self
            .0
            .iter()
            .filter_map(|d| match d {
                Dim::Var(v) => Some(v.clone()),
                Dim::Const(_) => None,
            })
            .collect();
        vars.sort();
        vars.dedup();
        vars
    }

    /// The concrete sizes under `bindings`; `None` if a variable is unbound.
    pub fn resolve(&self, bindings: &Bindings) -> Option<Vec<usize>> {
        self.0.iter().map(|d| d.resolve(bindings).and_then(|n| usize::try_from(n).ok())).collect()
    }

    /// The element count if every dimension is constant and the product does not overflow.
    pub fn const_numel(&self) -> Option<u64> {
        self.0.iter().try_fold(1u64, |acc, d| d.as_const().and_then(|n| acc.checked_mul(n)))
    }

    /// True when every constant dimension and the constant part of the element count are below
    /// [`limits::MAX_ELEMENTS`] (variables count as 1 here; they are checked again when bound).
    pub fn within_element_limit(&self) -> bool {
        let mut acc: u64 = 1;
        for d in &self.0 {
            if let Dim::Const(n) = d {
                if *n >= limits::MAX_ELEMENTS {
                    return false;
                }
                match acc.checked_mul(*n) {
                    Some(v) if v < limits::MAX_ELEMENTS => acc = v,
                    _ => return false,
                }
            }
        }
        true
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Converts a possibly negative axis (`-1` is the last) to an index, or `None` if out of range.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let rank_i = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis + rank_i } else { axis };
    if (0..rank_i).contains(&a) { usize::try_from(a).ok() } else { None }
}
