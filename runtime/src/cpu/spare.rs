//! Reused temporary memory of a compiled launch: its scratch buffers and each call's local
//! buffers (packed matmul panels) are taken from here and given back when the launch is done, so
//! repeated runs write to pages already mapped. Fresh pages cost one fault per 4 KiB: a 4 MiB
//! buffer took about 3 ms of faults on this project's (virtualized) CPU machine, a tenth of a
//! 1024^3 GEMM.

use std::sync::Mutex;

/// The byte a debug build fills temporaries with (0xFF bytes: NaN as f32, f16 and bf16).
const POISON: u8 = 0xFF;

/// At most this many spare buffers are kept per launch.
const MAX_SPARES: usize = 64;

/// Spare zero-able byte buffers, reused by exact length.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Spares {
    /// `len` bytes of temporary memory ([`tcc_codegen::BufKind::Scratch`] or `Local`: unspecified
    /// contents): a spare buffer of that length as it was left, or a fresh one. (Clearing a
    /// 1024^3 GEMM's packed panels on every run cost several percent of it.) A debug build fills
    /// it with NaN bytes, so that a kernel that reads an element before writing it shows NaN in
    /// every test.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            free.iter().position(|v| v.len() == len).map(|i| free.swap_remove(i))
        };
        let poison = cfg!(debug_assertions);
        match reused {
            Some(mut v) => {
                if poison {
                    v.fill(POISON);
                }
                v
            }
            None => vec![if poison { POISON } else { 0 }; len],
        }
    }

    /// Keeps `v` for a later [`Spares::take`] (dropped when enough are kept).
    pub(crate) fn give(&self, v: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if free.len() < MAX_SPARES {
            free.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_length_and_poisoned_in_debug_builds() {
        let s = Spares::default();
        let mut a = s.take(16);
        a.fill(7);
        let ptr = a.as_ptr();
        s.give(a);
        assert_eq!(s.take(8).len(), 8);
        let c = s.take(16);
        assert_eq!(c.as_ptr(), ptr, "the spare of that length is reused");
        let expected = if cfg!(debug_assertions) { POISON } else { 7 };
        assert_eq!(c, vec![expected; 16]);
    }
}
