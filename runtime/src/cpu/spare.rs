//! Reused temporary memory of a compiled launch: its scratch buffers and each call's local
//! buffers (packed matmul panels) are taken from here and given back when the launch is done, so
//! repeated runs write to pages already mapped. Fresh pages cost one fault per 4 KiB: a 4 MiB
//! buffer took about 3 ms of faults on this project's (virtualized) CPU machine, a tenth of a
//! 1024^3 GEMM.

use std::sync::Mutex;

/// At most this many spare buffers are kept per launch.
const MAX_SPARES: usize = 64;

/// Spare zero-able byte buffers, reused by exact length.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Spares {
    /// `len` zero bytes: a spare buffer of that length cleared, or a fresh one.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            free.iter().position(|v| v.len() == len).map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut v) => {
                v.fill(0);
                v
            }
            None => vec![0u8; len],
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
    fn buffers_come_back_zeroed_and_by_length() {
        let s = Spares::default();
        let mut a = s.take(16);
        a.fill(7);
        let ptr = a.as_ptr();
        s.give(a);
        let b = s.take(8);
        assert_eq!(b, vec![0u8; 8]);
        let c = s.take(16);
        assert_eq!(c.as_ptr(), ptr, "the spare of that length is reused");
        assert_eq!(c, vec![0u8; 16]);
    }
}
