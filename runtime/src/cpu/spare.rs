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
    /// `len` bytes: a spare buffer of that length (cleared if `zeroed`, else as it was left), or
    /// a fresh zeroed one. Clearing a 1024^3 GEMM's packed panels on every run cost several
    /// percent of it; a kernel declares which temporaries it needs cleared.
    pub(crate) fn take(&self, len: usize, zeroed: bool) -> Vec<u8> {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            free.iter().position(|v| v.len() == len).map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut v) => {
                if zeroed {
                    v.fill(0);
                }
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
impl Spares {
    /// Fills every kept buffer with `byte` (0xFF: f32 NaN in every element), so that a test sees
    /// what a kernel reads of memory it was handed without zeros.
    pub(crate) fn poison(&self, byte: u8) {
        let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for v in free.iter_mut() {
            v.fill(byte);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_zeroed_and_by_length() {
        let s = Spares::default();
        let mut a = s.take(16, true);
        a.fill(7);
        let ptr = a.as_ptr();
        s.give(a);
        let b = s.take(8, true);
        assert_eq!(b, vec![0u8; 8]);
        let c = s.take(16, true);
        assert_eq!(c.as_ptr(), ptr, "the spare of that length is reused");
        assert_eq!(c, vec![0u8; 16]);
    }

    #[test]
    fn a_buffer_that_needs_no_zeros_comes_back_as_it_was_left() {
        let s = Spares::default();
        assert_eq!(s.take(8, false), vec![0u8; 8], "fresh memory is zeroed either way");
        let mut a = s.take(16, false);
        a.fill(7);
        s.give(a);
        assert_eq!(s.take(16, false), vec![7u8; 16]);
    }
}
