//! Reused temporary memory of a compiled launch: its scratch buffers and each call's local
//! buffers (packed matmul panels) are taken from here and given back when the launch is done, so
//! repeated runs write to pages already mapped. Fresh pages cost one fault per 4 KiB: a 4 MiB
//! buffer took about 3 ms of faults on this project's (virtualized) CPU machine, a tenth of a
//! 1024^3 GEMM. Every buffer starts on a cache line: a packed panel at the system allocator's
//! 16-byte alignment splits every 64-byte vector load in two, which cost a C replica of the
//! AVX-512 micro-kernel about 15% of its speed (the `tcc` binary's mimalloc aligns large blocks
//! anyway; library users on the system allocator did not).

use std::sync::Mutex;

/// The byte a debug build fills temporaries with (0xFF bytes: NaN as f32, f16 and bf16).
const POISON: u8 = 0xFF;

/// At most this many spare buffers are kept per launch.
const MAX_SPARES: usize = 64;

/// The alignment of every temporary buffer: a cache line, and the widest vector (zmm).
pub(crate) const ALIGN: usize = 64;

/// `len` bytes of temporary memory starting on an [`ALIGN`] boundary.
#[derive(Debug)]
pub(crate) struct TempBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl TempBuf {
    /// `len` bytes filled with `byte`.
    fn filled(len: usize, byte: u8) -> TempBuf {
        let storage = vec![byte; len + ALIGN - 1];
        let offset = storage.as_ptr().align_offset(ALIGN);
        TempBuf { storage, offset, len }
    }

    /// The buffer's first byte (aligned to [`ALIGN`]).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes_mut().as_mut_ptr()
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Its bytes.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// Spare temporary buffers, reused by exact length.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    free: Mutex<Vec<TempBuf>>,
}

impl Spares {
    /// `len` bytes of temporary memory ([`tcc_codegen::BufKind::Scratch`] or `Local`: unspecified
    /// contents): a spare buffer of that length as it was left, or a fresh one. (Clearing a
    /// 1024^3 GEMM's packed panels on every run cost several percent of it.) A debug build fills
    /// it with NaN bytes, so that a kernel that reads an element before writing it shows NaN in
    /// every test.
    pub(crate) fn take(&self, len: usize) -> TempBuf {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            free.iter().position(|v| v.len() == len).map(|i| free.swap_remove(i))
        };
        let poison = cfg!(debug_assertions);
        match reused {
            Some(mut v) => {
                if poison {
                    v.bytes_mut().fill(POISON);
                }
                v
            }
            None => TempBuf::filled(len, if poison { POISON } else { 0 }),
        }
    }

    /// Keeps `v` for a later [`Spares::take`] (dropped when enough are kept).
    pub(crate) fn give(&self, v: TempBuf) {
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
        a.bytes_mut().fill(7);
        let ptr = a.as_mut_ptr();
        s.give(a);
        assert_eq!(s.take(8).len(), 8);
        let mut c = s.take(16);
        assert_eq!(c.as_mut_ptr(), ptr, "the spare of that length is reused");
        let expected = if cfg!(debug_assertions) { POISON } else { 7 };
        assert_eq!(c.bytes_mut(), &[expected; 16][..]);
    }

    #[test]
    fn buffers_start_on_a_cache_line() {
        let s = Spares::default();
        for len in [1, 17, 4096, 1 << 20, (1 << 22) + 3] {
            let mut b = s.take(len);
            assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0, "{len} bytes");
            assert_eq!(b.bytes_mut().len(), len);
        }
    }
}
