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
//! steps of `mr` floats), `b` the packed B panel (`depth` steps of `nr` floats), `out` the
//! `mr x nr` sums, stored row by row (`out[i * nr + j]`). It touches only caller-saved registers
//! and no stack.
//!
//! A tile whose `nr` is a multiple of 8 computes in 256-bit `ymm` registers (the same
//! instructions with VEX.L set: every host with AVX and FMA has them), others in 128-bit `xmm`
//! ones. Cranelift's own vectors are 128-bit; only this kernel, which cranelift calls, is wider,
//! and it clears the upper halves (`vzeroupper`) before it returns, so the SSE code around it
//! pays no transition.

use cranelift_assembler_x64 as asm;
use cranelift_assembler_x64::inst;

/// Depth steps per iteration of the main loop.
const UNROLL: u32 = 4;

/// Vector registers of x86-64 without AVX-512: xmm0-15, the low halves of ymm0-15.
const VECTOR_REGISTERS: u32 = 16;

// The argument registers of the System V ABI.
const RDI: u8 = 7;
const RSI: u8 = 6;
const RDX: u8 = 2;
const RCX: u8 = 1;

/// The vector registers a tile kernel computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Width {
    /// 128-bit `xmm` registers, four f32 lanes.
    Xmm,
    /// 256-bit `ymm` registers, eight f32 lanes.
    Ymm,
}

impl Width {
    /// f32 lanes of one register.
    pub fn lanes(self) -> u32 {
        match self {
            Width::Xmm => 4,
            Width::Ymm => 8,
        }
    }

    /// Bytes of one register.
    fn bytes(self) -> u32 {
        4 * self.lanes()
    }
}

/// A tile kernel's shape: `mr` rows by `nv` vectors of `width.lanes()` f32 columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileShape {
    /// Rows of the tile.
    pub mr: u32,
    /// Column vectors of the tile.
    pub nv: u32,
    /// The registers it computes in.
    pub width: Width,
}

impl TileShape {
    /// The assembled kernel of an `mr x nr` register tile: in `ymm` registers where `nr` is a
    /// multiple of 8 and they hold the tile, else in `xmm` ones where `nr` is a multiple of 4 and
    /// they hold it; `None` where neither does (cranelift IR computes that tile).
    pub fn for_tile(mr: u32, nr: u32) -> Option<TileShape> {
        [Width::Ymm, Width::Xmm]
            .into_iter()
            .filter(|w| nr.is_multiple_of(w.lanes()))
            .map(|width| TileShape { mr, nv: nr / width.lanes(), width })
            .find(|shape| shape.fits())
    }

    /// Columns of the tile.
    pub fn nr(self) -> u32 {
        self.nv * self.width.lanes()
    }

    /// Whether the accumulators, one B vector per column vector and the broadcast fit in the
    /// 16 vector registers.
    pub fn fits(self) -> bool {
        self.mr >= 1 && self.nv >= 1 && self.mr * self.nv + self.nv < VECTOR_REGISTERS
    }

    /// The symbol of the tile kernel in a JIT module.
    pub fn symbol(self) -> String {
        let suffix = match self.width {
            Width::Xmm => "",
            Width::Ymm => "_ymm",
        };
        format!("tcc_tile_{}x{}{suffix}", self.mr, self.nr())
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
    /// The width of the vector instructions [`Code::vector`] emits.
    width: Width,
}

impl Code {
    fn put(&mut self, i: impl Into<asm::Inst<Hw>>) {
        i.into().encode(&mut self.bytes);
    }

    /// A VEX-encoded vector instruction at the tile's width: the assembler encodes the 128-bit
    /// form (VEX.L = 0), whose 256-bit form differs only in VEX.L (bit 2 of the last VEX prefix
    /// byte: the second of `C5 xx`, the third of `C4 xx xx`).
    fn vector(&mut self, i: impl Into<asm::Inst<Hw>>) {
        let start = self.bytes.len();
        self.put(i);
        if self.width == Width::Ymm {
            let l_byte = match self.bytes.get(start) {
                Some(0xC5) => start + 1,
                Some(0xC4) => start + 2,
                // Every instruction passed here is VEX-encoded (see the tests).
                _ => return,
            };
            self.bytes[l_byte] |= 0x04;
        }
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
        let TileShape { mr, nv, width } = shape;
        let (b0, broadcast) = (mr * nv, mr * nv + nv);
        let vector_bytes = width.bytes();
        for step in 0..steps {
            for v in 0..nv {
                let b = reg(b0 + v);
                self.vector(inst::vmovups_a::new(b, asm::XmmMem::Mem(at(RSI, vector_bytes * (step * nv + v)))));
            }
            for i in 0..mr {
                self.vector(inst::vbroadcastss_a_m::new(reg(broadcast), at(RDI, 4 * (step * mr + i))));
                for v in 0..nv {
                    self.vector(inst::vfmadd231ps_a::new(reg(i * nv + v), reg(broadcast), reg(b0 + v)));
                }
            }
        }
        self.put(inst::addq_mi_sxl::new(RDI, imm(4 * mr * steps)));
        self.put(inst::addq_mi_sxl::new(RSI, imm(vector_bytes * nv * steps)));
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
///   vzeroupper (256-bit tiles)
/// ```
pub fn assemble(shape: TileShape) -> Vec<u8> {
    let accumulators = shape.mr * shape.nv;
    let mut code = Code { bytes: Vec::with_capacity(1024), width: shape.width };
    for j in 0..accumulators {
        code.vector(inst::vxorps_b::new(reg(j), reg(j), reg(j)));
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
        code.vector(inst::vmovups_b::new(asm::XmmMem::Mem(at(RCX, shape.width.bytes() * j)), reg(j)));
    }
    if shape.width == Width::Ymm {
        code.bytes.extend_from_slice(&VZEROUPPER);
    }
    code.put(inst::retq_zo::new());
    code.bytes
}

/// `vzeroupper` (VEX.128.0F.WIG 77), which the assembler does not offer.
const VZEROUPPER: [u8; 3] = [0xC5, 0xF8, 0x77];

#[cfg(test)]
mod tests {
    use super::*;

    fn xmm(mr: u32, nv: u32) -> TileShape {
        TileShape { mr, nv, width: Width::Xmm }
    }

    #[test]
    fn shapes_fit_the_sixteen_registers() {
        assert!(xmm(4, 2).fits());
        assert!(xmm(4, 3).fits(), "12 accumulators, 3 B vectors, a broadcast");
        assert!(!xmm(3, 4).fits(), "12 + 4 + 1 registers");
        assert!(!xmm(0, 2).fits());
        assert_eq!(xmm(6, 2).symbol(), "tcc_tile_6x8");
    }

    #[test]
    fn a_tile_is_256_bit_where_its_columns_and_the_registers_allow() {
        let ymm = |mr, nv| Some(TileShape { mr, nv, width: Width::Ymm });
        assert_eq!(TileShape::for_tile(6, 16), ymm(6, 2), "12 ymm accumulators, 2 B vectors, a broadcast");
        assert_eq!(TileShape::for_tile(4, 24), ymm(4, 3));
        assert_eq!(TileShape::for_tile(4, 12), Some(xmm(4, 3)), "12 columns are not whole ymm vectors");
        assert_eq!(TileShape::for_tile(3, 32), None, "12 + 4 + 1 ymm registers; 8 xmm vectors are more");
        assert_eq!(TileShape::for_tile(2, 32), ymm(2, 4));
        assert_eq!(TileShape::for_tile(4, 6), None);
        assert_eq!(TileShape::for_tile(6, 16).map(TileShape::symbol), Some("tcc_tile_6x16_ymm".to_string()));
    }

    /// The VEX prefixes (`C4 RXBmmmmm WvvvvLpp` or `C5 RvvvvLpp`) that start each instruction of
    /// `code` whose map and opcode are `(map, opcode)`, with their L bits.
    fn vex_l_bits(code: &[u8], map: u8, opcode: u8) -> Vec<bool> {
        let mut out = Vec::new();
        for i in 0..code.len().saturating_sub(3) {
            match code[i] {
                0xC4 if code[i + 1] & 0x1F == map && code[i + 3] == opcode => out.push(code[i + 2] & 4 != 0),
                0xC5 if map == 1 && code[i + 2] == opcode => out.push(code[i + 1] & 4 != 0),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn the_kernel_is_its_loops_and_a_return() {
        for (shape, ymm) in [(xmm(4, 2), false), (TileShape { mr: 4, nv: 2, width: Width::Ymm }, true)] {
            let code = assemble(shape);
            assert_eq!(code.last(), Some(&0xC3), "ends in ret");
            assert_eq!(code.ends_with(&[0xC5, 0xF8, 0x77, 0xC3]), ymm, "vzeroupper before ret only in ymm tiles");
            // vfmadd231ps: VEX map 0F38 (mmmmm = 2), B8; only the three-byte prefix encodes 0F38.
            let fmas = vex_l_bits(&code, 2, 0xB8);
            assert_eq!(fmas.len(), 8 * (UNROLL as usize + 1), "one per accumulator and step, main and tail loops");
            assert!(fmas.iter().all(|&l| l == ymm), "every FMA at the tile's width");
            // vbroadcastss (0F38 18) and vmovups loads and stores (0F 10, 11), vxorps (0F 57).
            for (map, opcode, count) in [(2, 0x18, 4 * 5), (1, 0x10, 2 * 5), (1, 0x11, 8), (1, 0x57, 8)] {
                let l = vex_l_bits(&code, map, opcode);
                assert_eq!(l.len(), count, "opcode {opcode:#x}");
                assert!(l.iter().all(|&l| l == ymm), "opcode {opcode:#x} at the tile's width");
            }
        }
    }
}
