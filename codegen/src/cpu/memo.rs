//! The values a phase emitter has computed, by expression and lane count, in nested scopes: one
//! scope per loop body, so that every expression is computed once per body (the arena is
//! hash-consed) and a value computed inside a loop is not used after it.

use std::collections::HashMap;
use std::hash::Hash;

use super::analysis::{ExprReads, buf_bit};
use crate::loops::{BufId, ExprId};

/// Computed values `V` by expression and lane count `L` (each tier says lanes its own way), in
/// scopes: a lookup sees every open scope, innermost first; a value goes into the innermost.
#[derive(Debug, Clone)]
pub(crate) struct Memo<L, V> {
    scopes: Vec<HashMap<(ExprId, L), V>>,
}

impl<L: Copy + Eq + Hash, V: Clone> Memo<L, V> {
    /// A memo with one open scope (the function's).
    pub(crate) fn new() -> Memo<L, V> {
        Memo { scopes: vec![HashMap::new()] }
    }

    /// Opens a scope (a loop body begins).
    pub(crate) fn enter(&mut self) {
        self.scopes.push(HashMap::new());
    }

    /// Closes the innermost scope, forgetting what was computed in it.
    pub(crate) fn leave(&mut self) {
        self.scopes.pop();
    }

    /// The value of `e` in `lanes` lanes, if an open scope has it.
    pub(crate) fn get(&self, e: ExprId, lanes: L) -> Option<V> {
        self.scopes.iter().rev().find_map(|scope| scope.get(&(e, lanes)).cloned())
    }

    /// Records the value of `e` in `lanes` lanes in the innermost scope.
    pub(crate) fn insert(&mut self, e: ExprId, lanes: L, v: V) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert((e, lanes), v);
        }
    }

    /// Forgets, in every scope, the values that read `buf` (it was just written).
    pub(crate) fn forget_readers(&mut self, buf: BufId, reads: &ExprReads) {
        let bit = buf_bit(buf);
        for scope in &mut self.scopes {
            scope.retain(|(e, _), _| !reads.any_of(*e, bit));
        }
    }
}
