//! Inline PTX for the instructions LLVM has no intrinsics for: `wgmma.mma_async` and its fence,
//! commit and wait, the async-proxy fence, and mbarriers. Each helper writes one LLVM `asm
//! sideeffect` call into the function; the accumulators go in and out as tied `f` operands.

use tcc_ir::DType;

use crate::llvm_text::Func;

/// An LLVM struct type of `n` floats.
fn floats(n: usize) -> String {
    format!("{{{}}}", vec!["float"; n].join(", "))
}

/// Emits `asm sideeffect` returning `ret` (`void` for none) with `constraints` and typed args.
fn asm(f: &mut Func, ret: &str, text: &str, constraints: &str, args: &[(String, String)]) -> Option<String> {
    let list = args.iter().map(|(t, v)| format!("{t} {v}")).collect::<Vec<_>>().join(", ");
    let call = format!("call {ret} asm sideeffect \"{text}\", \"{constraints}\"({list})");
    if ret == "void" {
        f.op(call);
        None
    } else {
        Some(f.v(call))
    }
}

/// Splits an asm call's struct result into its `n` fields.
fn fields(f: &mut Func, ty: &str, r: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| f.v(format!("extractvalue {ty} {r}, {i}"))).collect()
}

/// `wgmma.fence.sync.aligned`: orders register accesses before the next wgmma.
pub(crate) fn fence(f: &mut Func) {
    asm(f, "void", "wgmma.fence.sync.aligned;", "~{memory}", &[]);
}

/// `wgmma.commit_group.sync.aligned`: closes the batch of wgmmas issued so far.
pub(crate) fn commit(f: &mut Func) {
    asm(f, "void", "wgmma.commit_group.sync.aligned;", "~{memory}", &[]);
}

/// `wgmma.wait_group.sync.aligned n` without touching accumulators (frees shared memory only).
pub(crate) fn wait(f: &mut Func, n: u32) {
    asm(f, "void", &format!("wgmma.wait_group.sync.aligned {n};"), "~{memory}", &[]);
}

/// `wgmma.wait_group.sync.aligned n` with the accumulators passed through, so nothing reads them
/// before the wait returns.
pub(crate) fn wait_acc(f: &mut Func, n: u32, acc: &[String]) -> Vec<String> {
    let k = acc.len();
    let ty = floats(k);
    let cons: Vec<String> = (0..k).map(|_| "=f".to_string()).chain((0..k).map(|i| i.to_string())).collect();
    let args: Vec<(String, String)> = acc.iter().map(|v| ("float".to_string(), v.clone())).collect();
    let text = format!("wgmma.wait_group.sync.aligned {n};");
    let r = asm(f, &ty, &text, &format!("{},~{{memory}}", cons.join(",")), &args).unwrap_or_default();
    fields(f, &ty, &r, k)
}

/// One `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}` from shared-memory
/// descriptors `da`, `db` (i64) into `acc` (n / 2 floats): adds to them when `scale` (an i32)
/// is nonzero, else overwrites them; `trans_b` for an MN-major B. Returns the new accumulators.
// Reason: one instruction's operands (dtype, shape, accumulators, two descriptors, scale, transpose).
#[allow(clippy::too_many_arguments)]
pub(crate) fn mma(
    f: &mut Func,
    dtype: DType,
    n: u32,
    acc: &[String],
    da: &str,
    db: &str,
    scale: &str,
    trans_b: bool,
) -> Vec<String> {
    wgmma(f, (dtype, n), acc, WgA::Shared(da), db, scale, trans_b)
}

/// One `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}` with A from registers: `a`
/// this thread's four words of the 64 x 16 A tile (per warp the layout of `mma.sync`'s A
/// fragment), B from the shared-memory descriptor `db` (i64), into `acc` (n / 2 floats); adds
/// when `scale` (an i32) is nonzero, else overwrites; `trans_b` for an MN-major B. Returns the new
/// accumulators.
// Reason: one instruction's operands (dtype, shape, accumulators, A words, descriptor, scale, transpose).
#[allow(clippy::too_many_arguments)]
pub(crate) fn mma_rs(
    f: &mut Func,
    dtype: DType,
    n: u32,
    acc: &[String],
    a: &[String],
    db: &str,
    scale: &str,
    trans_b: bool,
) -> Vec<String> {
    wgmma(f, (dtype, n), acc, WgA::Registers(a), db, scale, trans_b)
}

/// Where a wgmma's A comes from.
enum WgA<'a> {
    /// A shared-memory descriptor (i64).
    Shared(&'a str),
    /// This thread's A words (i32s).
    Registers(&'a [String]),
}

/// The asm call of one wgmma ([`mma`], [`mma_rs`]): accumulators in and out as tied operands,
/// then A's operands, B's descriptor and the scale; the `.pred` from the scale chooses between
/// adding and overwriting.
fn wgmma(
    f: &mut Func,
    (dtype, n): (DType, u32),
    acc: &[String],
    a: WgA,
    db: &str,
    scale: &str,
    trans_b: bool,
) -> Vec<String> {
    let k = acc.len();
    let ty = floats(k);
    let t = if dtype == DType::BF16 { "bf16" } else { "f16" };
    let regs = (0..k).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
    let mut args: Vec<(String, String)> = acc.iter().map(|v| ("float".to_string(), v.clone())).collect();
    let mut cons: Vec<String> = (0..k).map(|_| "=f".to_string()).chain((0..k).map(|i| i.to_string())).collect();
    // A's operand text, and the immediates after the scale (scale-a, scale-b, [transpose-a,] transpose-b).
    let (a_text, imms) = match a {
        WgA::Shared(da) => {
            args.push(("i64".into(), da.to_string()));
            cons.push("l".into());
            (format!("${}", 2 * k), format!("1, 1, 0, {}", u32::from(trans_b)))
        }
        WgA::Registers(words) => {
            args.extend(words.iter().map(|w| ("i32".to_string(), w.clone())));
            cons.extend(words.iter().map(|_| "r".to_string()));
            let list = (0..words.len()).map(|i| format!("${}", 2 * k + i)).collect::<Vec<_>>().join(", ");
            (format!("{{{list}}}"), format!("1, 1, {}", u32::from(trans_b)))
        }
    };
    // Operand numbers: the outputs, then the arguments in order (the accumulators tied first).
    let at = k + args.len();
    args.push(("i64".into(), db.to_string()));
    args.push(("i32".into(), scale.to_string()));
    cons.extend(["l".to_string(), "r".to_string()]);
    let text = format!(
        "{{\\0A\\09.reg .pred p;\\0A\\09setp.ne.b32 p, ${}, 0;\\0A\\09\
         wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{regs}}}, {a_text}, ${at}, p, {imms};\\0A}}",
        at + 1,
    );
    let r = asm(f, &ty, &text, &format!("{},~{{memory}}", cons.join(",")), &args).unwrap_or_default();
    fields(f, &ty, &r, k)
}

/// The descriptor bits above the start address of a 128-byte swizzled operand whose 8-row
/// groups are `sbo` bytes apart and whose 64-element column blocks (MN-major) are `lbo` apart.
pub(crate) const fn swizzle_128b(lbo: u32, sbo: u32) -> u64 {
    (1 << 62) | (((sbo as u64) >> 4) << 32) | (((lbo as u64) >> 4) << 16)
}

/// `fence.proxy.async.shared::cta`: makes this thread's generic-proxy shared-memory writes
/// (ordinary stores, `cp.async`) visible to the async proxy (wgmma) after the next barrier.
pub(crate) fn fence_proxy_async(f: &mut Func) {
    asm(f, "void", "fence.proxy.async.shared::cta;", "~{memory}", &[]);
}

/// `mbarrier.init.shared::cta.b64 [bar], count` (bar: a 32-bit shared address).
pub(crate) fn mbar_init(f: &mut Func, bar: &str, count: u32) {
    let args = [("i32".to_string(), bar.to_string()), ("i32".to_string(), count.to_string())];
    asm(f, "void", "mbarrier.init.shared::cta.b64 [$0], $1;", "r,n,~{memory}", &args);
}

/// `fence.mbarrier_init.release.cluster`: makes barrier initialisation visible.
pub(crate) fn mbar_init_fence(f: &mut Func) {
    asm(f, "void", "fence.mbarrier_init.release.cluster;", "~{memory}", &[]);
}

/// One arrival on `bar` (`mbarrier.arrive.shared::cta.b64`).
pub(crate) fn mbar_arrive(f: &mut Func, bar: &str) {
    let args = [("i32".to_string(), bar.to_string())];
    asm(f, "void", "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", &args);
}

/// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar]`: one arrival on `bar` once every
/// earlier `cp.async` of this thread has landed (the barrier's count must include it).
pub(crate) fn mbar_arrive_cp_async(f: &mut Func, bar: &str) {
    let args = [("i32".to_string(), bar.to_string())];
    asm(f, "void", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", &args);
}

/// Waits until the phase of `bar` with parity `parity` (an i32 0 or 1) has completed.
pub(crate) fn mbar_wait(f: &mut Func, bar: &str, parity: &str) {
    let text = "{\\0A\\09.reg .pred p;\\0AWAIT:\\0A\\09mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\\0A\\09@!p bra WAIT;\\0A}";
    let args = [("i32".to_string(), bar.to_string()), ("i32".to_string(), parity.to_string())];
    asm(f, "void", text, "r,r,~{memory}", &args);
}

/// `setmaxnreg.{inc,dec}.sync.aligned.u32 n`: moves registers between warpgroups (every warp of
/// the warpgroup executes it).
pub(crate) fn setmaxnreg(f: &mut Func, inc: bool, n: u32) {
    let dir = if inc { "inc" } else { "dec" };
    asm(f, "void", &format!("setmaxnreg.{dir}.sync.aligned.u32 {n};"), "~{memory}", &[]);
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes`: one arrival on `bar` that also
/// expects `bytes` (an i32) more bytes of asynchronous copies to complete on it.
pub(crate) fn mbar_arrive_expect_tx(f: &mut Func, bar: &str, bytes: u32) {
    let args = [("i32".to_string(), bar.to_string()), ("i32".to_string(), bytes.to_string())];
    asm(f, "void", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,n,~{memory}", &args);
}

/// `prefetch.tensormap [map]`: fetches a tensor map (a generic address, i64) into the cache.
pub(crate) fn prefetch_tensormap(f: &mut Func, map: &str) {
    let args = [("i64".to_string(), map.to_string())];
    asm(f, "void", "prefetch.tensormap [$0];", "l,~{memory}", &args);
}

/// One TMA tile load (`cp.async.bulk.tensor.{n}d`, 1 to 5 coordinates, innermost first, i32s)
/// of tensor map `map` (a generic address of a `grid_constant` parameter, i64) into shared
/// address `dst` (i32), the box's bytes completing on the mbarrier `bar` (i32).
pub(crate) fn tma_load(f: &mut Func, dst: &str, map: &str, coords: &[String], bar: &str) {
    let n = coords.len();
    let list = (0..n).map(|i| format!("${}", i + 2)).collect::<Vec<_>>().join(", ");
    let text = format!(
        "cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {{{list}}}], [${}];",
        n + 2
    );
    let mut args = vec![("i32".to_string(), dst.to_string()), ("i64".to_string(), map.to_string())];
    args.extend(coords.iter().map(|c| ("i32".to_string(), c.clone())));
    args.push(("i32".to_string(), bar.to_string()));
    let cons = ["r", "l"].into_iter().chain(std::iter::repeat_n("r", n + 1)).collect::<Vec<_>>().join(",");
    asm(f, "void", &text, &format!("{cons},~{{memory}}"), &args);
}

/// One TMA tile store (`cp.async.bulk.tensor.{n}d.global.shared::cta`, bulk-group completion) of
/// the box at shared address `src` (i32) to tensor map `map` (i64) at `coords` (i32s, innermost
/// first); elements outside the tensor are not written.
pub(crate) fn tma_store(f: &mut Func, map: &str, coords: &[String], src: &str) {
    let n = coords.len();
    let list = (0..n).map(|i| format!("${}", i + 1)).collect::<Vec<_>>().join(", ");
    let text = format!("cp.async.bulk.tensor.{n}d.global.shared::cta.tile.bulk_group [$0, {{{list}}}], [${}];", n + 1);
    let mut args = vec![("i64".to_string(), map.to_string())];
    args.extend(coords.iter().map(|c| ("i32".to_string(), c.clone())));
    args.push(("i32".to_string(), src.to_string()));
    let cons = ["l"].into_iter().chain(std::iter::repeat_n("r", n + 1)).collect::<Vec<_>>().join(",");
    asm(f, "void", &text, &format!("{cons},~{{memory}}"), &args);
}

/// `cp.async.bulk.commit_group`: closes this thread's bulk copies issued so far into a group.
pub(crate) fn bulk_commit(f: &mut Func) {
    asm(f, "void", "cp.async.bulk.commit_group;", "~{memory}", &[]);
}

/// `cp.async.bulk.wait_group.read n`: waits until at most `n` of this thread's bulk groups still
/// read their shared-memory sources.
pub(crate) fn bulk_wait_read(f: &mut Func, n: u32) {
    asm(f, "void", &format!("cp.async.bulk.wait_group.read {n};"), "~{memory}", &[]);
}

/// `cp.async.bulk.wait_group 0`: waits until every bulk group of this thread has completed.
pub(crate) fn bulk_wait_all(f: &mut Func) {
    asm(f, "void", "cp.async.bulk.wait_group 0;", "~{memory}", &[]);
}

/// `bar.sync id, threads`: a named barrier among `threads` threads (whole warps).
pub(crate) fn named_barrier(f: &mut Func, id: &str, threads: u32) {
    let args = [("i32".to_string(), id.to_string())];
    asm(f, "void", &format!("bar.sync $0, {threads};"), "r,~{memory}", &args);
}

/// `bar.arrive id, threads`: this warp's arrival at named barrier `id` of `threads` threads,
/// without waiting for the others.
pub(crate) fn named_barrier_arrive(f: &mut Func, id: &str, threads: u32) {
    let args = [("i32".to_string(), id.to_string())];
    asm(f, "void", &format!("bar.arrive $0, {threads};"), "r,~{memory}", &args);
}
