//! A CPU emulator of the PTX backend's kernels, for tests without a GPU: the kernel's LLVM IR is
//! retargeted to the host (special registers, barriers and warp shuffles become calls into this
//! file; `ex2/lg2/rcp.approx` become host functions; the inline-PTX i32 negation becomes `0 - x`)
//! and JIT-compiled; each block runs as one OS thread per GPU thread, blocks one after another,
//! entries in launch order.
//!
//! The tensor-core `mma.sync` path runs too: `cp.async` copies land when the thread waits for
//! their group (`cp.async.wait_group`) or arrives on an mbarrier behind them (after a pause there,
//! so that a reader that does not wait for the barrier reads the stage's old bytes); `ldmatrix`
//! and `mma.sync.m16n8k16` exchange their lanes' registers through the warp, and the dynamic
//! shared memory is one host array (blocks and entries run one after another), aligned to its
//! size so that a shared address's low 18 bits are its offset. Warpgroup MMAs
//! (`wgmma.mma_async` from shared-memory descriptors with the 128-byte swizzle, A from shared
//! memory or registers) run too, each thread computing its own accumulators (fences, commits and
//! waits do nothing). Named barriers (`bar.sync` and `bar.arrive id, n`) and mbarriers (init,
//! arrivals, the parity wait) run, so kernels with a `cp.async` producer warpgroup do; TMA does
//! not.
//!
//! It checks everything the backend decides (plans, index mappings, scalar semantics, loops,
//! shared memory, reductions across lanes and warps); NVPTX instruction selection itself is
//! checked by ptxas and, on a GPU, by the runtime's `gpu-tests`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use inkwell::OptimizationLevel;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use tcc_codegen::ptx::KernelIr;
use tcc_ir::interp::Tensor;
use tcc_ir::{DType, TensorType};

/// What one emulated GPU thread knows about itself.
#[derive(Clone)]
struct ThreadState {
    tid: u32,
    ctaid: u32,
    ntid: u32,
    nctaid: u32,
    block: Arc<Barrier>,
    warp: Arc<Warp>,
    sync: Arc<BlockSync>,
}

/// A block's named barriers and mbarriers, by id and by shared address.
#[derive(Default)]
struct BlockSync {
    named: Mutex<HashMap<u32, Arc<NamedBarrier>>>,
    mbarriers: Mutex<HashMap<u32, Mbarrier>>,
    /// Signalled whenever an mbarrier completes a phase.
    phase_done: Condvar,
}

/// One named barrier: the arrivals of its current generation, and that generation's number.
#[derive(Default)]
struct NamedBarrier {
    state: Mutex<(u32, u64)>,
    done: Condvar,
}

impl NamedBarrier {
    /// One arrival of `count`; with `wait`, until the generation completes (`bar.sync`), else not
    /// (`bar.arrive`).
    fn arrive(&self, count: u32, wait: bool) {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        if st.0 == count {
            *st = (0, st.1 + 1);
            self.done.notify_all();
            return;
        }
        let generation = st.1;
        while wait && st.1 == generation {
            st = self.done.wait(st).unwrap();
        }
    }
}

/// One mbarrier: its arrival count, the arrivals still pending in the current phase, and the
/// phase's number.
struct Mbarrier {
    count: u32,
    pending: u32,
    phase: u32,
}

/// The lanes of one warp exchanging values.
struct Warp {
    barrier: Barrier,
    slots: Vec<AtomicU32>,
    /// Wider exchanges (`ldmatrix` addresses, `mma` fragments): [`WIDE`] words per lane.
    wide: Vec<AtomicU32>,
}

/// Words per lane of [`Warp::wide`].
const WIDE: usize = 8;

/// Bytes of the emulated dynamic shared memory (more than any GPU block has), and its alignment.
const SHARED_BYTES: usize = 256 * 1024;

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
    /// One thread's warpgroup accumulators, passed in and out one by one around `sim_wg_mma`.
    static WG_ACC: RefCell<Vec<f32>> = RefCell::new(vec![0.0; 128]);
    /// One thread's `cp.async` copies in flight: committed groups, oldest first, then the open one.
    static COPIES: RefCell<(Vec<Vec<PendingCopy>>, Vec<PendingCopy>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A 16-byte `cp.async` not yet landed: its destination and the bytes read at issue.
struct PendingCopy {
    dst: usize,
    bytes: [u8; 16],
}

fn land(copies: Vec<PendingCopy>) {
    for c in copies {
        // SAFETY: `dst` is a 16-byte shared-memory destination the kernel passed to cp.async.
        unsafe { std::ptr::copy_nonoverlapping(c.bytes.as_ptr(), c.dst as *mut u8, 16) };
    }
}

/// Lands every copy of this thread still in flight.
fn land_all() {
    let (groups, open) = COPIES.with(|c| std::mem::take(&mut *c.borrow_mut()));
    groups.into_iter().for_each(land);
    land(open);
}

fn with<T>(f: impl FnOnce(&ThreadState) -> T) -> T {
    STATE.with(|s| f(s.borrow().as_ref().expect("emulated kernel code runs on an emulated thread")))
}

extern "C" fn sim_tid() -> i32 {
    with(|s| s.tid as i32)
}
extern "C" fn sim_ctaid() -> i32 {
    with(|s| s.ctaid as i32)
}
extern "C" fn sim_ntid() -> i32 {
    with(|s| s.ntid as i32)
}
extern "C" fn sim_nctaid() -> i32 {
    with(|s| s.nctaid as i32)
}
extern "C" fn sim_barrier() {
    let b = with(|s| s.block.clone());
    b.wait();
}

/// `bar.sync id, count` (`wait` 1) or `bar.arrive id, count` (0): the block's barrier `id`
/// among `count` threads.
extern "C" fn sim_named_barrier(id: i32, count: i32, wait: i32) {
    let sync = with(|s| s.sync.clone());
    let barrier = sync.named.lock().unwrap().entry(id as u32).or_default().clone();
    barrier.arrive(count as u32, wait != 0);
}
extern "C" fn sim_mbar_init(bar: i32, count: i32) {
    let sync = with(|s| s.sync.clone());
    let count = count as u32;
    sync.mbarriers.lock().unwrap().insert(bar as u32, Mbarrier { count, pending: count, phase: 0 });
}
/// One arrival: the last of a phase completes it and starts the next.
extern "C" fn sim_mbar_arrive(bar: i32) {
    let sync = with(|s| s.sync.clone());
    let mut all = sync.mbarriers.lock().unwrap();
    let m = all.get_mut(&(bar as u32)).expect("arrival on an mbarrier that was not initialised");
    m.pending -= 1;
    if m.pending == 0 {
        m.phase += 1;
        m.pending = m.count;
        sync.phase_done.notify_all();
    }
}
/// Waits until the phase of parity `parity` has completed: the current phase's parity differs.
extern "C" fn sim_mbar_wait(bar: i32, parity: i32) {
    let sync = with(|s| s.sync.clone());
    let mut all = sync.mbarriers.lock().unwrap();
    loop {
        let m = all.get(&(bar as u32)).expect("wait on an mbarrier that was not initialised");
        if m.phase & 1 != parity as u32 & 1 {
            return;
        }
        all = sync.phase_done.wait(all).unwrap();
    }
}

fn shfl_bits(bits: u32, off: i32) -> u32 {
    let (warp, lane) = with(|s| (s.warp.clone(), (s.tid % 32) as usize));
    warp.slots[lane].store(bits, Ordering::SeqCst);
    warp.barrier.wait();
    let other = warp.slots[(lane ^ off as usize) % 32].load(Ordering::SeqCst);
    warp.barrier.wait();
    other
}

extern "C" fn sim_shfl_f32(_mask: i32, v: f32, off: i32, _c: i32) -> f32 {
    f32::from_bits(shfl_bits(v.to_bits(), off))
}
extern "C" fn sim_shfl_i32(_mask: i32, v: i32, off: i32, _c: i32) -> i32 {
    shfl_bits(v as u32, off) as i32
}

/// Every lane of the warp stores `words` (at most [`WIDE`]) and gets the whole warp's back.
fn exchange(words: &[u32]) -> Vec<[u32; WIDE]> {
    let (warp, lane) = with(|s| (s.warp.clone(), (s.tid % 32) as usize));
    for (i, &w) in words.iter().enumerate() {
        warp.wide[lane * WIDE + i].store(w, Ordering::SeqCst);
    }
    warp.barrier.wait();
    let all = (0..32).map(|l| std::array::from_fn(|i| warp.wide[l * WIDE + i].load(Ordering::SeqCst))).collect();
    warp.barrier.wait();
    all
}

extern "C" fn sim_cp_async(dst: *mut u8, src: *const u8, size: i32) {
    let size = size.clamp(0, 16) as usize;
    let mut bytes = [0u8; 16];
    // SAFETY: for a nonzero size the kernel passes a source of that many readable bytes (as
    // cp.async requires).
    unsafe { std::ptr::copy_nonoverlapping(src, bytes.as_mut_ptr(), size) };
    COPIES.with(|c| c.borrow_mut().1.push(PendingCopy { dst: dst as usize, bytes }));
}
/// `cp.async.commit_group`.
extern "C" fn sim_cp_commit() {
    COPIES.with(|c| {
        let mut c = c.borrow_mut();
        let open = std::mem::take(&mut c.1);
        c.0.push(open);
    });
}
/// `cp.async.wait_group n`: every committed group but the newest `n` lands.
extern "C" fn sim_cp_wait(n: i32) {
    let done: Vec<Vec<PendingCopy>> = COPIES.with(|c| {
        let mut c = c.borrow_mut();
        let keep = (n.max(0) as usize).min(c.0.len());
        let land_now = c.0.len() - keep;
        c.0.drain(..land_now).collect()
    });
    done.into_iter().for_each(land);
}
/// `cp.async.mbarrier.arrive.noinc`: this thread's copies land (after a pause, which a reader
/// that does not wait for the barrier runs into), then the arrival.
extern "C" fn sim_cp_arrive(bar: i32) {
    std::thread::sleep(std::time::Duration::from_micros(200));
    land_all();
    sim_mbar_arrive(bar);
}
extern "C" fn sim_warp_sync(_: i32) {
    let warp = with(|s| s.warp.clone());
    warp.barrier.wait();
}

/// `ldmatrix.sync.aligned.m8n8.x4(.trans).b16`: lane `8 j + r` gives the address of row `r` of
/// matrix `j` (8 b16 values); lane `l` gets of each matrix the values at row `l / 4`, columns
/// `2 (l % 4)` and `+1` (transposed: rows `2 (l % 4)` and `+1` of column `l / 4`).
extern "C" fn sim_ldmatrix(p: *const u8, out: *mut u32, trans: i32) {
    let addr = p as u64;
    let all = exchange(&[addr as u32, (addr >> 32) as u32]);
    let lane = with(|s| (s.tid % 32) as usize);
    let row_ptr = |j: usize, r: usize| -> *const u16 {
        let w = all[8 * j + r];
        (u64::from(w[0]) | (u64::from(w[1]) << 32)) as *const u16
    };
    for j in 0..4 {
        // SAFETY: every lane's address points at 16 readable bytes of shared memory.
        let word = unsafe {
            if trans == 0 {
                let row = row_ptr(j, lane / 4);
                u32::from(*row.add(2 * (lane % 4))) | (u32::from(*row.add(2 * (lane % 4) + 1)) << 16)
            } else {
                let lo = *row_ptr(j, 2 * (lane % 4)).add(lane / 4);
                let hi = *row_ptr(j, 2 * (lane % 4) + 1).add(lane / 4);
                u32::from(lo) | (u32::from(hi) << 16)
            }
        };
        // SAFETY: `out` points at four u32.
        unsafe { *out.add(j) = word };
    }
}

/// `mma.sync.m16n8k16.row.col` with f32 accumulators: `regs` holds this lane's A (4 words) and
/// B (2 words) fragments of f16 (`bf16 = 0`) or bf16 pairs, `c` its 4 accumulators; `out` gets
/// `A B + C` at its places of the 16 x 8 tile.
extern "C" fn sim_mma(regs: *const u32, c: *const f32, out: *mut f32, bf16: i32) {
    // SAFETY: the wrappers pass 6 words, 4 floats and room for 4 floats.
    let (mine, acc) = unsafe { (std::slice::from_raw_parts(regs, 6), std::slice::from_raw_parts(c, 4)) };
    let all = exchange(mine);
    let lane = with(|s| (s.tid % 32) as usize);
    let val = |bits: u16| -> f32 {
        if bf16 != 0 { half::bf16::from_bits(bits).to_f32() } else { half::f16::from_bits(bits).to_f32() }
    };
    let half_of = |w: u32, hi: usize| val((w >> (16 * hi)) as u16);
    // A[row][k]: lane (row % 8) * 4 + (k % 8) / 2, word (row / 8) + 2 (k / 8), half k % 2.
    let a = |row: usize, k: usize| half_of(all[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k % 2);
    // B[k][col]: lane col * 4 + (k % 8) / 2, word 4 + k / 8, half k % 2.
    let b = |k: usize, col: usize| half_of(all[col * 4 + (k % 8) / 2][4 + k / 8], k % 2);
    let (g, t) = (lane / 4, lane % 4);
    for (i, (row, col)) in [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)].into_iter().enumerate() {
        let mut sum = acc[i];
        for k in 0..16 {
            sum = a(row, k).mul_add(b(k, col), sum);
        }
        // SAFETY: `out` has room for 4 floats.
        unsafe { *out.add(i) = sum };
    }
}

extern "C" fn sim_wg_put(i: i32, v: f32) {
    WG_ACC.with(|a| a.borrow_mut()[i as usize] = v);
}
extern "C" fn sim_wg_get(i: i32) -> f32 {
    WG_ACC.with(|a| a.borrow()[i as usize])
}

/// `wgmma.mma_async.m64n{n}k16` with f32 accumulators (this thread's, in [`WG_ACC`]): A from the
/// shared-memory descriptor `da` (K-major), or with `flags & 4` from the warp's registers (this
/// lane's four words `a*`, `mma.sync`'s A fragment per warp); B from `db`, K-major (`[n, k]`) or
/// with `flags & 2` MN-major (`[k, n]`, 64-column blocks LBO apart); f16, or bf16 with `flags & 1`.
/// Both descriptors use the 128-byte swizzle (chunk bits 4-6 of an address XOR its row bits 7-9)
/// and address the shared memory at `smem` by their low 18 bits. Adds `A B` to the accumulators,
/// or overwrites them when `scale` is 0.
// Reason: the instruction's operands as the retargeted IR passes them.
#[allow(clippy::too_many_arguments)]
extern "C" fn sim_wg_mma(
    smem: *const u8,
    da: i64,
    db: i64,
    scale: i32,
    n: i32,
    flags: i32,
    a0: i32,
    a1: i32,
    a2: i32,
    a3: i32,
) {
    assert_eq!(smem as usize % SHARED_BYTES, 0, "the emulated shared memory is aligned to its size");
    let (bf16, trans_b, regs_a) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
    let words = regs_a.then(|| exchange(&[a0, a1, a2, a3].map(|w| w as u32)));
    let tid = with(|s| s.tid as usize);
    let (warp, lane) = ((tid % 128) / 32, tid % 32);
    let val = |bits: u16| -> f32 {
        if bf16 { half::bf16::from_bits(bits).to_f32() } else { half::f16::from_bits(bits).to_f32() }
    };
    let read = |addr: u64| -> f32 {
        let swizzled = addr ^ (((addr >> 7) & 7) << 4);
        let off = (swizzled as usize) & (SHARED_BYTES - 1);
        // SAFETY: `smem` is the emulated shared memory of SHARED_BYTES bytes; `off + 1` is inside it.
        val(unsafe { u16::from_le_bytes([*smem.add(off), *smem.add(off + 1)]) })
    };
    let field = |d: i64, shift: u32| ((d as u64 >> shift) & 0x3fff) << 4;
    let (a_start, a_sbo) = (field(da, 0), field(da, 32));
    let (b_start, b_lbo, b_sbo) = (field(db, 0), field(db, 16), field(db, 32));
    // A[row][k] of this warp's 16 rows.
    let a = |row: usize, k: usize| -> f32 {
        match &words {
            Some(all) => val((all[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)] >> (16 * (k % 2))) as u16),
            None => {
                let r = (warp * 16 + row) as u64;
                read(a_start + (r / 8) * a_sbo + (r % 8) * 128 + 2 * k as u64)
            }
        }
    };
    let b = |k: usize, col: usize| -> f32 {
        let (k, col) = (k as u64, col as u64);
        if trans_b {
            read(b_start + (col / 64) * b_lbo + (k / 8) * b_sbo + (k % 8) * 128 + (col % 64) * 2)
        } else {
            read(b_start + (col / 8) * b_sbo + (col % 8) * 128 + k * 2)
        }
    };
    let (g, t) = (lane / 4, lane % 4);
    WG_ACC.with(|acc| {
        let mut acc = acc.borrow_mut();
        for j in 0..(n as usize) / 8 {
            for (i, (row, col)) in
                [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)].into_iter().enumerate()
            {
                let at = 4 * j + i;
                let mut sum = if scale != 0 { acc[at] } else { 0.0 };
                for k in 0..16 {
                    sum = a(row, k).mul_add(b(k, 8 * j + col), sum);
                }
                acc[at] = sum;
            }
        }
    });
}

extern "C" fn sim_exp2(x: f32) -> f32 {
    x.exp2()
}
extern "C" fn sim_rcp(x: f32) -> f32 {
    1.0 / x
}
extern "C" fn sim_log2(x: f32) -> f32 {
    x.log2()
}
extern "C" fn sim_fma(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
extern "C" fn sim_floor(x: f32) -> f32 {
    x.floor()
}
extern "C" fn sim_sqrt(x: f32) -> f32 {
    x.sqrt()
}

extern "C" fn sim_f32_to_f16(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}
extern "C" fn sim_f32_to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}
extern "C" fn sim_f16_to_f32(x: u16) -> f32 {
    half::f16::from_bits(x).to_f32()
}

/// Host functions the retargeted IR calls: name, return type, parameter types.
const HOST_FNS: &[(&str, &str, &[&str])] = &[
    ("sim_tid", "i32", &[]),
    ("sim_ctaid", "i32", &[]),
    ("sim_ntid", "i32", &[]),
    ("sim_nctaid", "i32", &[]),
    ("sim_barrier", "void", &[]),
    ("sim_shfl_f32", "float", &["i32", "float", "i32", "i32"]),
    ("sim_shfl_i32", "i32", &["i32", "i32", "i32", "i32"]),
    ("sim_exp2", "float", &["float"]),
    ("sim_log2", "float", &["float"]),
    ("sim_rcp", "float", &["float"]),
    ("sim_fma", "float", &["float", "float", "float"]),
    ("sim_floor", "float", &["float"]),
    ("sim_sqrt", "float", &["float"]),
    ("sim_f32_to_f16", "i16", &["float"]),
    ("sim_f32_to_bf16", "i16", &["float"]),
    ("sim_f16_to_f32", "float", &["i16"]),
    ("sim_cp_async", "void", &["ptr", "ptr", "i32"]),
    ("sim_cp_commit", "void", &[]),
    ("sim_cp_wait", "void", &["i32"]),
    ("sim_warp_sync", "void", &["i32"]),
    ("sim_ldmatrix", "void", &["ptr", "ptr", "i32"]),
    ("sim_mma", "void", &["ptr", "ptr", "ptr", "i32"]),
    ("sim_wg_put", "void", &["i32", "float"]),
    ("sim_wg_get", "float", &["i32"]),
    ("sim_wg_mma", "void", &["ptr", "i64", "i64", "i32", "i32", "i32", "i32", "i32", "i32", "i32"]),
    ("sim_named_barrier", "void", &["i32", "i32", "i32"]),
    ("sim_mbar_init", "void", &["i32", "i32"]),
    ("sim_mbar_arrive", "void", &["i32"]),
    ("sim_mbar_wait", "void", &["i32", "i32"]),
    ("sim_cp_arrive", "void", &["i32"]),
];

/// The host IR of a synchronization inline-asm call (a line without a result): mbarriers and
/// named barriers become calls of the host functions above; register moves between warpgroups
/// and the barrier-initialisation fence disappear. `None` for other lines.
fn sync_line(line: &str) -> Option<String> {
    let asm = line.split_once("asm sideeffect \"")?.1;
    let args = line.rsplit_once("\"(")?.1.strip_suffix(')')?;
    let call = |f: &str, args: &str| Some(format!("  call void @{f}({args})"));
    if asm.starts_with("mbarrier.init.shared") {
        call("sim_mbar_init", args)
    } else if asm.starts_with("mbarrier.arrive.shared") {
        call("sim_mbar_arrive", args)
    } else if asm.starts_with("cp.async.mbarrier.arrive.noinc") {
        call("sim_cp_arrive", args)
    } else if asm.contains("mbarrier.try_wait.parity") {
        call("sim_mbar_wait", args)
    } else if let Some(rest) = asm.strip_prefix("bar.sync $0, ") {
        let count = rest.split_once(';')?.0;
        call("sim_named_barrier", &format!("{args}, i32 {count}, i32 1"))
    } else if let Some(rest) = asm.strip_prefix("bar.arrive $0, ") {
        let count = rest.split_once(';')?.0;
        call("sim_named_barrier", &format!("{args}, i32 {count}, i32 0"))
    } else if asm.starts_with("setmaxnreg.") || asm.starts_with("fence.mbarrier_init") {
        Some(String::new())
    } else {
        None
    }
}

/// Warpgroup-MMA bookkeeping (fences, commits, waits without accumulators): nothing to do when
/// every wgmma completes at once.
const WGMMA_NOPS: [&str; 4] = [
    "asm sideeffect \"wgmma.fence.sync.aligned;\"",
    "asm sideeffect \"wgmma.commit_group.sync.aligned;\"",
    "asm sideeffect \"fence.proxy.async.shared::cta;\"",
    "asm sideeffect \"wgmma.wait_group.sync.aligned",
];

/// The host IR of one `wgmma` inline-asm call (`lhs = rhs`): a wait that passes the accumulators
/// through becomes the struct of its arguments; an MMA passes them to `sim_wg_mma` one by one
/// and reads them back. `None` for other lines.
fn wgmma_line(name: &str, rhs: &str) -> Option<String> {
    let is_mma = rhs.contains("wgmma.mma_async.sync.aligned.m64n");
    if !is_mma && !rhs.contains("asm sideeffect \"wgmma.wait_group.sync.aligned") {
        return None;
    }
    let ty = rhs.strip_prefix("call ")?.split_once(" asm")?.0;
    let k = ty.matches("float").count();
    let args: Vec<&str> = rhs.rsplit_once("\"(")?.1.strip_suffix(')')?.split(", ").collect();
    let value = |a: &str| a.split_once(' ').map(|(_, v)| v.to_string());
    let mut out = Vec::new();
    let acc: Vec<String> = if is_mma {
        for (i, a) in args[..k].iter().enumerate() {
            out.push(format!("  call void @sim_wg_put(i32 {i}, {a})"));
        }
        let rest = &args[k..];
        let regs_a = rest.len() == 6;
        let (words, db, scale) = if regs_a {
            (rest[..4].iter().map(|a| value(a)).collect::<Option<Vec<_>>>()?, value(rest[4])?, value(rest[5])?)
        } else {
            (vec!["0".to_string(); 4], value(rest[1])?, value(rest[2])?)
        };
        let da = if regs_a { "0".to_string() } else { value(rest[0])? };
        let n: u32 = rhs.split_once("m64n")?.1.split_once('k')?.0.parse().ok()?;
        let trans_b: u32 = rhs.split_once("p, 1, 1, ")?.1.split_once(';')?.0.rsplit(", ").next()?.parse().ok()?;
        let flags = u32::from(rhs.contains(".f32.bf16.bf16")) | (trans_b << 1) | (u32::from(regs_a) << 2);
        let w: Vec<String> = words.iter().map(|w| format!("i32 {w}")).collect();
        out.push(format!(
            "  call void @sim_wg_mma(ptr @sim_smem_all, i64 {da}, i64 {db}, i32 {scale}, i32 {n}, i32 {flags}, {})",
            w.join(", ")
        ));
        (0..k)
            .map(|i| {
                out.push(format!("  {name}.g{i} = call float @sim_wg_get(i32 {i})"));
                format!("float {name}.g{i}")
            })
            .collect()
    } else {
        args[..k].iter().map(|a| a.to_string()).collect()
    };
    let mut prev = "poison".to_string();
    for (i, a) in acc.iter().enumerate() {
        let dst = if i + 1 == k { name.to_string() } else { format!("{name}.s{i}") };
        out.push(format!("  {dst} = insertvalue {ty} {prev}, {a}, {i}"));
        prev = dst;
    }
    Some(out.join("\n"))
}

/// Host definitions of the tensor-core intrinsics the retargeted IR calls, over the host functions.
const TENSOR_CORE_WRAPPERS: &str = "
define {i32, i32, i32, i32} @sim_ldm(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @sim_ldmatrix(ptr %p, ptr %o, i32 0)
  %v = load {i32, i32, i32, i32}, ptr %o
  ret {i32, i32, i32, i32} %v
}
define {i32, i32, i32, i32} @sim_ldm_t(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @sim_ldmatrix(ptr %p, ptr %o, i32 1)
  %v = load {i32, i32, i32, i32}, ptr %o
  ret {i32, i32, i32, i32} %v
}
define {float, float, float, float} @sim_mma_words(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1, float %c0, float %c1, float %c2, float %c3, i32 %bf16) {
  %r = alloca [6 x i32], align 16
  %c = alloca [4 x float], align 16
  %o = alloca [4 x float], align 16
  store i32 %a0, ptr %r
  %r1 = getelementptr i32, ptr %r, i64 1
  store i32 %a1, ptr %r1
  %r2 = getelementptr i32, ptr %r, i64 2
  store i32 %a2, ptr %r2
  %r3 = getelementptr i32, ptr %r, i64 3
  store i32 %a3, ptr %r3
  %r4 = getelementptr i32, ptr %r, i64 4
  store i32 %b0, ptr %r4
  %r5 = getelementptr i32, ptr %r, i64 5
  store i32 %b1, ptr %r5
  store float %c0, ptr %c
  %k1 = getelementptr float, ptr %c, i64 1
  store float %c1, ptr %k1
  %k2 = getelementptr float, ptr %c, i64 2
  store float %c2, ptr %k2
  %k3 = getelementptr float, ptr %c, i64 3
  store float %c3, ptr %k3
  call void @sim_mma(ptr %r, ptr %c, ptr %o, i32 %bf16)
  %v = load {float, float, float, float}, ptr %o
  ret {float, float, float, float} %v
}
define {float, float, float, float} @sim_mma_bf16(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1, float %c0, float %c1, float %c2, float %c3) {
  %v = call {float, float, float, float} @sim_mma_words(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1, float %c0, float %c1, float %c2, float %c3, i32 1)
  ret {float, float, float, float} %v
}
define {float, float, float, float} @sim_mma_f16(<2 x half> %a0, <2 x half> %a1, <2 x half> %a2, <2 x half> %a3, <2 x half> %b0, <2 x half> %b1, float %c0, float %c1, float %c2, float %c3) {
  %w0 = bitcast <2 x half> %a0 to i32
  %w1 = bitcast <2 x half> %a1 to i32
  %w2 = bitcast <2 x half> %a2 to i32
  %w3 = bitcast <2 x half> %a3 to i32
  %w4 = bitcast <2 x half> %b0 to i32
  %w5 = bitcast <2 x half> %b1 to i32
  %v = call {float, float, float, float} @sim_mma_words(i32 %w0, i32 %w1, i32 %w2, i32 %w3, i32 %w4, i32 %w5, float %c0, float %c1, float %c2, float %c3, i32 0)
  ret {float, float, float, float} %v
}
";

/// The kernel's IR retargeted to the host, with one `sim_call_<entry>(ptr args)` per entry.
fn host_ir(ir: &KernelIr) -> String {
    let mut text = ir.llvm_ir.clone();
    for (from, to) in [
        ("target triple = \"nvptx64-nvidia-cuda\"", ""),
        ("addrspace(1) ", ""),
        ("addrspace(3) ", ""),
        ("@llvm.nvvm.read.ptx.sreg.tid.x", "@sim_tid"),
        ("@llvm.nvvm.read.ptx.sreg.ctaid.x", "@sim_ctaid"),
        ("@llvm.nvvm.read.ptx.sreg.ntid.x", "@sim_ntid"),
        ("@llvm.nvvm.read.ptx.sreg.nctaid.x", "@sim_nctaid"),
        ("@llvm.nvvm.barrier0", "@sim_barrier"),
        ("@llvm.nvvm.shfl.sync.bfly.f32", "@sim_shfl_f32"),
        ("@llvm.nvvm.shfl.sync.bfly.i32", "@sim_shfl_i32"),
        ("@llvm.nvvm.ex2.approx.f(", "@sim_exp2("),
        ("@llvm.nvvm.ex2.approx.ftz.f(", "@sim_exp2("),
        ("@llvm.nvvm.lg2.approx.f(", "@sim_log2("),
        ("@llvm.nvvm.rcp.approx.ftz.f(", "@sim_rcp("),
        ("@llvm.fma.f32(", "@sim_fma("),
        ("@llvm.floor.f32(", "@sim_floor("),
        ("@llvm.sqrt.f32(", "@sim_sqrt("),
        ("@llvm.nvvm.cp.async.cg.shared.global.16.s(", "@sim_cp_async("),
        ("@llvm.nvvm.cp.async.commit.group(", "@sim_cp_commit("),
        ("@llvm.nvvm.cp.async.wait.group(", "@sim_cp_wait("),
        ("call void @llvm.nvvm.cp.async.wait.all()", "call void @sim_cp_wait(i32 0)"),
        ("@llvm.nvvm.bar.warp.sync(", "@sim_warp_sync("),
        ("@llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3(", "@sim_ldm_t("),
        ("@llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3(", "@sim_ldm("),
        ("@llvm.nvvm.mma.m16n8k16.row.col.bf16(", "@sim_mma_bf16("),
        ("@llvm.nvvm.mma.m16n8k16.row.col.f32.f32(", "@sim_mma_f16("),
    ] {
        text = text.replace(from, to);
    }
    // Half-precision conversions would be libcalls on the host: route them through ours.
    text = text
        .lines()
        .map(|line| {
            if !line.contains(" = ") && WGMMA_NOPS.iter().any(|p| line.contains(p)) {
                return String::new();
            }
            if !line.contains(" = ")
                && let Some(host) = sync_line(line)
            {
                return host;
            }
            let Some((lhs, rhs)) = line.split_once(" = ") else { return line.to_string() };
            let conv = |op: &str, from: &str, to: &str| -> Option<String> {
                let v = rhs.strip_prefix(&format!("{op} {from} "))?.strip_suffix(&format!(" to {to}"))?;
                Some(v.to_string())
            };
            let name = lhs.trim();
            // The dynamic shared memory: one host array for every entry.
            if rhs.starts_with("external global [0 x i8]") {
                return format!("{name} = alias [{SHARED_BYTES} x i8], ptr @sim_smem_all");
            }
            if let Some(host) = wgmma_line(name, rhs) {
                return host;
            }
            // The opaque copy of the thread index (`epilogue::store_tile`): the value itself.
            if rhs.contains("asm sideeffect \"mov.u32 $0, $1;\"")
                && let Some(v) = rhs.rsplit_once("(i32 ").and_then(|(_, v)| v.strip_suffix(')'))
            {
                return format!("  {name} = add i32 {v}, 0");
            }
            // The opaque copy of a 64-bit offset (the attention kernel's copies): the value itself.
            if rhs.contains("asm sideeffect \"mov.b64 $0, $1;\"")
                && let Some(v) = rhs.rsplit_once("(i64 ").and_then(|(_, v)| v.strip_suffix(')'))
            {
                return format!("  {name} = add i64 {v}, 0");
            }
            // i32 negation is `~x + 1` in inline PTX (`math::ineg`): on the host, `0 - x`.
            if rhs.contains("asm \"{ .reg .b32 tcc_not;")
                && let Some(v) = rhs.rsplit_once("(i32 ").and_then(|(_, v)| v.strip_suffix(')'))
            {
                return format!("  {name} = sub i32 0, {v}");
            }
            // Two f32 rounded and packed as a 16-bit pair (`attention::softmax::pack`): the
            // first operand to the upper half.
            for (ty, f) in [("f16x2", "sim_f32_to_f16"), ("bf16x2", "sim_f32_to_bf16")] {
                if rhs.contains(&format!("asm \"cvt.rn.{ty}.f32 $0, $1, $2;\""))
                    && let Some(args) = rhs.rsplit_once("\"=r,f,f\"(").and_then(|(_, a)| a.strip_suffix(')'))
                    && let Some((hi, lo)) = args.split_once(", ")
                {
                    return format!(
                        "  {name}.h = call i16 @{f}({hi})\n  {name}.l = call i16 @{f}({lo})\n  \
                         {name}.hz = zext i16 {name}.h to i32\n  {name}.lz = zext i16 {name}.l to i32\n  \
                         {name}.hs = shl i32 {name}.hz, 16\n  {name} = or i32 {name}.hs, {name}.lz"
                    );
                }
            }
            if let Some(v) = conv("fptrunc", "float", "half") {
                format!("  {name}.b = call i16 @sim_f32_to_f16(float {v})\n  {name} = bitcast i16 {name}.b to half")
            } else if let Some(v) = conv("fptrunc", "float", "bfloat") {
                format!("  {name}.b = call i16 @sim_f32_to_bf16(float {v})\n  {name} = bitcast i16 {name}.b to bfloat")
            } else if let Some(v) = conv("fpext", "half", "float") {
                format!("  {name}.b = bitcast half {v} to i16\n  {name} = call float @sim_f16_to_f32(i16 {name}.b)")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    // The host functions are reached through pointers the runner stores in globals (robust
    // against symbol resolution in the JIT).
    let mut lines: Vec<String> =
        text.lines().filter(|l| !(l.starts_with("declare") && l.contains("@sim_"))).map(String::from).collect();
    for (name, ret, params) in HOST_FNS {
        let args: Vec<String> = params.iter().enumerate().map(|(i, t)| format!("{t} %x{i}")).collect();
        let call_args = args.join(", ");
        let (call, tail) = if *ret == "void" {
            (format!("  call void %f({call_args})"), "  ret void".to_string())
        } else {
            (format!("  %r = call {ret} %f({call_args})"), format!("  ret {ret} %r"))
        };
        lines.push(format!(
            "@{name}_ptr = global ptr null\ndefine {ret} @{name}({call_args}) {{\n  %f = load ptr, ptr @{name}_ptr\n{call}\n{tail}\n}}"
        ));
    }
    let mut init = String::from("define void @sim_init(ptr %table) {\n");
    for (i, (name, _, _)) in HOST_FNS.iter().enumerate() {
        init.push_str(&format!(
            "  %q{i} = getelementptr ptr, ptr %table, i64 {i}\n  %v{i} = load ptr, ptr %q{i}\n  store ptr %v{i}, ptr @{name}_ptr\n"
        ));
    }
    init.push_str("  ret void\n}");
    lines.push(init);
    lines.push(format!("@sim_smem_all = global [{SHARED_BYTES} x i8] zeroinitializer, align {SHARED_BYTES}"));
    lines.push(TENSOR_CORE_WRAPPERS.to_string());
    let mut text = lines.join("\n");
    let n = ir.inputs + ir.outputs + 1;
    for step in &ir.steps {
        text.push_str(&format!("\ndefine void @sim_call_{}(ptr %args) {{\n", step.entry));
        for i in 0..n {
            text.push_str(&format!("  %p{i} = getelementptr ptr, ptr %args, i64 {i}\n  %a{i} = load ptr, ptr %p{i}\n"));
        }
        let args: Vec<String> = (0..n).map(|i| format!("ptr %a{i}")).collect();
        text.push_str(&format!("  call void @{}({})\n  ret void\n}}\n", step.entry, args.join(", ")));
    }
    text
}

/// Device memory of the emulator: 16-byte aligned bytes.
struct Buf {
    words: Vec<u128>,
}

impl Buf {
    fn zeroed(bytes: usize) -> Buf {
        Buf { words: vec![0; bytes.div_ceil(16).max(1)] }
    }
    fn ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr().cast()
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: u128 has no padding; the slice covers exactly the vector's memory.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.words.len() * 16) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast(), self.words.len() * 16) }
    }
}

fn encode(t: &Tensor) -> Buf {
    let size = t.dtype.size_bytes();
    let mut b = Buf::zeroed(t.data.len() * size);
    let out = b.bytes_mut();
    for (i, &v) in t.data.iter().enumerate() {
        let at = &mut out[i * size..(i + 1) * size];
        match t.dtype {
            DType::F32 => at.copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => at.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => at.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::I32 => at.copy_from_slice(&(v as i32).to_le_bytes()),
            DType::Bool => at[0] = u8::from(v != 0.0),
        }
    }
    b
}

fn decode(b: &Buf, dtype: DType, shape: Vec<usize>) -> Tensor {
    let size = dtype.size_bytes();
    let n: usize = shape.iter().product();
    let bytes = b.bytes();
    let data = (0..n)
        .map(|i| {
            let at = &bytes[i * size..(i + 1) * size];
            match dtype {
                DType::F32 => f64::from(f32::from_le_bytes([at[0], at[1], at[2], at[3]])),
                DType::F16 => f64::from(half::f16::from_le_bytes([at[0], at[1]])),
                DType::BF16 => f64::from(half::bf16::from_le_bytes([at[0], at[1]])),
                DType::I32 => f64::from(i32::from_le_bytes([at[0], at[1], at[2], at[3]])),
                DType::Bool => f64::from(u8::from(at[0] != 0)),
            }
        })
        .collect();
    Tensor { dtype, shape, data }
}

/// Runs a compiled kernel on the CPU with `inputs`; returns one tensor per output type.
/// `sm_count` sets the emulated grid size (small values exercise the grid-stride loops).
pub fn run(
    ir: &KernelIr,
    inputs: &[Tensor],
    outputs: &[TensorType],
    bindings: &tcc_ir::Bindings,
    sm_count: u32,
) -> Vec<Tensor> {
    let context = Context::create();
    let text = host_ir(ir);
    if let Some(dir) = std::env::var_os("TCC_DUMP_PTX") {
        std::fs::write(std::path::Path::new(&dir).join(format!("{}_host.ll", ir.name)), &text).unwrap();
    }
    let module = context
        .create_module_from_ir(MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "sim"))
        .unwrap_or_else(|e| panic!("{}: host IR does not parse: {e}", ir.name));
    let ee = module.create_jit_execution_engine(OptimizationLevel::Less).unwrap();
    // In the order of HOST_FNS.
    let table: [usize; 30] = [
        sim_tid as extern "C" fn() -> i32 as usize,
        sim_ctaid as extern "C" fn() -> i32 as usize,
        sim_ntid as extern "C" fn() -> i32 as usize,
        sim_nctaid as extern "C" fn() -> i32 as usize,
        sim_barrier as extern "C" fn() as usize,
        sim_shfl_f32 as extern "C" fn(i32, f32, i32, i32) -> f32 as usize,
        sim_shfl_i32 as extern "C" fn(i32, i32, i32, i32) -> i32 as usize,
        sim_exp2 as extern "C" fn(f32) -> f32 as usize,
        sim_log2 as extern "C" fn(f32) -> f32 as usize,
        sim_rcp as extern "C" fn(f32) -> f32 as usize,
        sim_fma as extern "C" fn(f32, f32, f32) -> f32 as usize,
        sim_floor as extern "C" fn(f32) -> f32 as usize,
        sim_sqrt as extern "C" fn(f32) -> f32 as usize,
        sim_f32_to_f16 as extern "C" fn(f32) -> u16 as usize,
        sim_f32_to_bf16 as extern "C" fn(f32) -> u16 as usize,
        sim_f16_to_f32 as extern "C" fn(u16) -> f32 as usize,
        sim_cp_async as extern "C" fn(*mut u8, *const u8, i32) as usize,
        sim_cp_commit as extern "C" fn() as usize,
        sim_cp_wait as extern "C" fn(i32) as usize,
        sim_warp_sync as extern "C" fn(i32) as usize,
        sim_ldmatrix as extern "C" fn(*const u8, *mut u32, i32) as usize,
        sim_mma as extern "C" fn(*const u32, *const f32, *mut f32, i32) as usize,
        sim_wg_put as extern "C" fn(i32, f32) as usize,
        sim_wg_get as extern "C" fn(i32) -> f32 as usize,
        sim_wg_mma as extern "C" fn(*const u8, i64, i64, i32, i32, i32, i32, i32, i32, i32) as usize,
        sim_named_barrier as extern "C" fn(i32, i32, i32) as usize,
        sim_mbar_init as extern "C" fn(i32, i32) as usize,
        sim_mbar_arrive as extern "C" fn(i32) as usize,
        sim_mbar_wait as extern "C" fn(i32, i32) as usize,
        sim_cp_arrive as extern "C" fn(i32) as usize,
    ];
    assert_eq!(table.len(), HOST_FNS.len());
    let init = ee.get_function_address("sim_init").unwrap();
    // SAFETY: `sim_init` has the signature `void(ptr)` and reads HOST_FNS.len() pointers.
    let init: extern "C" fn(*const usize) = unsafe { std::mem::transmute(init) };
    init(table.as_ptr());
    let mut ins: Vec<Buf> = inputs.iter().map(encode).collect();
    let shapes: Vec<Vec<usize>> = outputs.iter().map(|t| t.shape.resolve(bindings).unwrap()).collect();
    let mut outs: Vec<Buf> = outputs
        .iter()
        .zip(&shapes)
        .map(|(t, s)| Buf::zeroed(s.iter().product::<usize>() * t.dtype.size_bytes()))
        .collect();
    let mut scratch = Buf::zeroed(ir.scratch_bytes as usize);
    let args: Vec<usize> =
        ins.iter_mut().chain(outs.iter_mut()).chain(std::iter::once(&mut scratch)).map(|b| b.ptr() as usize).collect();
    for step in &ir.steps {
        let addr = ee.get_function_address(&format!("sim_call_{}", step.entry)).unwrap();
        let grid = step.launch.grid(sm_count);
        let threads = step.launch.block_threads;
        for ctaid in 0..grid {
            let block = Arc::new(Barrier::new(threads as usize));
            let sync = Arc::new(BlockSync::default());
            let warps: Vec<Arc<Warp>> = (0..threads.div_ceil(32))
                .map(|w| {
                    let lanes = (threads - w * 32).min(32) as usize;
                    Arc::new(Warp {
                        barrier: Barrier::new(lanes),
                        slots: (0..32).map(|_| AtomicU32::new(0)).collect(),
                        wide: (0..32 * WIDE).map(|_| AtomicU32::new(0)).collect(),
                    })
                })
                .collect();
            std::thread::scope(|s| {
                for tid in 0..threads {
                    let state = ThreadState {
                        tid,
                        ctaid,
                        ntid: threads,
                        nctaid: grid,
                        block: block.clone(),
                        warp: warps[(tid / 32) as usize].clone(),
                        sync: sync.clone(),
                    };
                    let args = &args;
                    std::thread::Builder::new()
                        .stack_size(1 << 20)
                        .spawn_scoped(s, move || {
                            STATE.with(|st| *st.borrow_mut() = Some(state));
                            // SAFETY: `sim_call_<entry>` has the signature `void(ptr)` and reads
                            // exactly `args.len()` pointers; every buffer is large enough for the
                            // kernel's specialized shapes and outlives this scope.
                            let f: extern "C" fn(*const usize) = unsafe { std::mem::transmute(addr) };
                            f(args.as_ptr());
                            land_all();
                        })
                        .unwrap();
                }
            });
        }
    }
    outs.iter().zip(outputs).zip(shapes).map(|((b, t), s)| decode(b, t.dtype, s)).collect()
}
