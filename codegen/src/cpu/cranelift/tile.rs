//! The register tile of a matrix product as x86-64 machine code, assembled by cranelift's own
//! assembler (`cranelift-assembler-x64`) and defined in the JIT module next to the phases.
//!
//! Cranelift lowers `fma` only to `vfmadd213`/`vfmadd132`, which overwrite a multiplicand: an
//! accumulator updated in place needs a copy per update or a rotation of every accumulator at the
//! loop's back edge, and a broadcast shared by several columns a copy per use (wasmtime PR #11143:
//! "Cranelift never uses the 231 variant"). The tile loop therefore sat at about half of the
//! 128-bit FMA ceiling. Here every update is one `vfmadd231ps acc, broadcast, b` with the
//! accumulators pinned to registers, one broadcast per row and one load per column vector.
//!
//! The function (System V ABI) is `tile(a, b, depth, out)`: `a` the packed A panel (`depth`
//! steps of `mr` floats), `b` the packed B panel (`depth` steps of `4 * nv` floats), `out` the
//! `mr x nv` f32x4 accumulators, stored row by row (`out[(i * nv + v) * 4 + lane]`). It touches
//! only caller-saved registers and no stack.

use cranelift_assembler_x64 as asm;
use cranelift_assembler_x64::inst;

/// Depth steps per iteration of the main loop.
const UNROLL: u32 = 4;

/// xmm registers of x86-64 (without AVX-512).
const XMM_REGISTERS: u32 = 16;

// The argument registers of the System V ABI.
const RDI: u8 = 7;
const RSI: u8 = 6;
const RDX: u8 = 2;
const RCX: u8 = 1;

/// A tile kernel's shape: `mr` rows by `nv` vectors of four f32 columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileShape {
    /// Rows of the tile.
    pub mr: u32,
    /// Four-column vectors of the tile.
    pub nv: u32,
}

impl TileShape {
    /// Whether the accumulators, one B vector per column vector and the broadcast fit in the
    /// 16 xmm registers.
    pub fn fits(self) -> bool {
        self.mr >= 1 && self.nv >= 1 && self.mr * self.nv + self.nv < XMM_REGISTERS
    }

    /// The symbol of the tile kernel in a JIT module.
    pub fn symbol(self) -> String {
        format!("tcc_tile_{}x{}", self.mr, 4 * self.nv)
    }
}

/// Hardware register numbers for every operand kind.
struct Hw;

impl asm::Registers for Hw {
    type ReadGpr = u8;
    type ReadWriteGpr = u8;
    type WriteGpr = u8;
    type ReadXmm = u8;
    type ReadWriteXmm = u8;
    type WriteXmm = u8;
}

/// `[base + offset]`.
fn at(base: u8, offset: u32) -> asm::Amode<u8> {
    let offset = i32::try_from(offset).unwrap_or(i32::MAX);
    asm::Amode::ImmReg {
        base,
        simm32: asm::AmodeOffsetPlusKnownOffset { simm32: asm::AmodeOffset::new(offset), offset: None },
        trap: None,
    }
}

/// Machine code being assembled, with the jumps still to be resolved.
struct Code {
    bytes: Vec<u8>,
}

impl Code {
    fn put(&mut self, i: impl Into<asm::Inst<Hw>>) {
        i.into().encode(&mut self.bytes);
    }

    /// The displacement of a 6-byte `jcc rel32` at the current position to `target`.
    fn back_to(&self, target: usize) -> i32 {
        let end = self.bytes.len() + 6;
        i32::try_from(target).unwrap_or(0) - i32::try_from(end).unwrap_or(0)
    }

    /// Points the 6-byte `jcc rel32` that starts at `jump` to the current position.
    fn land(&mut self, jump: usize) {
        let displacement = u32::try_from(self.bytes.len() - (jump + 6)).unwrap_or(0);
        self.bytes[jump + 2..jump + 6].copy_from_slice(&displacement.to_le_bytes());
    }

    /// `steps` depth steps of the tile, the panel pointers advanced past them.
    fn steps(&mut self, shape: TileShape, steps: u32) {
        let TileShape { mr, nv } = shape;
        let (b0, broadcast) = (mr * nv, mr * nv + nv);
        for step in 0..steps {
            for v in 0..nv {
                let b = reg(b0 + v);
                self.put(inst::vmovups_a::new(b, asm::XmmMem::Mem(at(RSI, 16 * (step * nv + v)))));
            }
            for i in 0..mr {
                self.put(inst::vbroadcastss_a_m::new(reg(broadcast), at(RDI, 4 * (step * mr + i))));
                for v in 0..nv {
                    self.put(inst::vfmadd231ps_a::new(reg(i * nv + v), reg(broadcast), reg(b0 + v)));
                }
            }
        }
        self.put(inst::addq_mi_sxl::new(RDI, imm(4 * mr * steps)));
        self.put(inst::addq_mi_sxl::new(RSI, imm(16 * nv * steps)));
    }
}

fn reg(index: u32) -> u8 {
    u8::try_from(index).unwrap_or(0)
}

fn imm(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The machine code of the tile kernel of `shape` (which must [fit](TileShape::fits)):
///
/// ```text
///   acc[..] = 0
///   while depth >= UNROLL { UNROLL steps; depth -= UNROLL }
///   while depth > 0 { one step; depth -= 1 }
///   out[..] = acc[..]
/// ```
pub fn assemble(shape: TileShape) -> Vec<u8> {
    let accumulators = shape.mr * shape.nv;
    let mut code = Code { bytes: Vec::with_capacity(1024) };
    for j in 0..accumulators {
        code.put(inst::vxorps_b::new(reg(j), reg(j), reg(j)));
    }
    let unroll = i8::try_from(UNROLL).unwrap_or(1);
    code.put(inst::cmpq_mi_sxb::new(RDX, unroll));
    let skip_main = code.bytes.len();
    code.put(inst::jl_d32::new(0));
    let main = code.bytes.len();
    code.steps(shape, UNROLL);
    code.put(inst::subq_mi_sxb::new(RDX, unroll));
    code.put(inst::cmpq_mi_sxb::new(RDX, unroll));
    code.put(inst::jge_d32::new(code.back_to(main)));
    code.land(skip_main);
    code.put(inst::cmpq_mi_sxb::new(RDX, 1));
    let skip_tail = code.bytes.len();
    code.put(inst::jl_d32::new(0));
    let tail = code.bytes.len();
    code.steps(shape, 1);
    code.put(inst::subq_mi_sxb::new(RDX, 1));
    code.put(inst::jg_d32::new(code.back_to(tail)));
    code.land(skip_tail);
    for j in 0..accumulators {
        code.put(inst::vmovups_b::new(asm::XmmMem::Mem(at(RCX, 16 * j)), reg(j)));
    }
    code.put(inst::retq_zo::new());
    code.bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_fit_the_sixteen_registers() {
        assert!(TileShape { mr: 4, nv: 2 }.fits());
        assert!(TileShape { mr: 4, nv: 3 }.fits(), "12 accumulators, 3 B vectors, a broadcast");
        assert!(!TileShape { mr: 3, nv: 4 }.fits(), "12 + 4 + 1 registers");
        assert!(!TileShape { mr: 0, nv: 2 }.fits());
        assert_eq!(TileShape { mr: 6, nv: 2 }.symbol(), "tcc_tile_6x8");
    }

    #[test]
    fn the_kernel_is_its_loops_and_a_return() {
        let code = assemble(TileShape { mr: 4, nv: 2 });
        assert_eq!(code.last(), Some(&0xC3), "ends in ret");
        // vfmadd231ps: VEX 0F38 B8 (three-byte VEX prefix C4 or two-byte C5 cannot encode 0F38).
        let fmas = code.windows(4).filter(|w| w[0] == 0xC4 && w[3] == 0xB8).count();
        assert_eq!(fmas, 8 * (UNROLL as usize + 1), "one per accumulator and step, main and tail loops");
    }
}
