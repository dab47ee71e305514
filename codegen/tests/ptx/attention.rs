//! The GPU attention kernel assembled by ptxas for sm_80 and sm_90a: every schedule of the
//! tuner's space at every head dimension it runs (16 to 128), with every score form and mask,
//! grouped-query heads, lengths off the blocks, f16 and bf16 — one `attention` entry each, no
//! spills. Runs on a GPU are the runtime's `gpu-tests` (`runtime/tests/attention_gpu.rs`).

use tcc_codegen::ptx::GpuArch;
use tcc_ir::attention::GpuAttention;
use tcc_ir::schedule::GpuAttentionSchedule;
use tcc_ir::testing::attention::{AttentionCase, MaskForm, ScoreForm};
use tcc_ir::{Bindings, DType, Kernel, KernelClass};

use super::{check_kernel, kernel, lowerings};

fn case(dtype: DType, head_dim: u64, score: ScoreForm, mask: MaskForm) -> AttentionCase {
    AttentionCase { dtype, score, mask, ..AttentionCase::grouped_heads(200, 333, head_dim) }
}

fn attention_kernel(c: &AttentionCase, schedule: GpuAttentionSchedule) -> Kernel {
    let mut k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
    k.schedule = schedule.encode();
    k
}

/// The schedule space of case `c` (its head dimensions and the tensors its score function reads).
fn space(c: &AttentionCase) -> Vec<GpuAttentionSchedule> {
    let shape = GpuAttention::find(&c.graph().unwrap()).expect("an attention the GPU kernel runs").shape();
    GpuAttentionSchedule::space(&shape, GpuArch::Sm80.caps().max_shared_optin_bytes)
}

#[test]
fn every_schedule_of_the_space_assembles_without_spills() {
    for head_dim in (16..=128u64).step_by(16) {
        // The plain score function in f16 and bf16, and a bias tensor (the most registers).
        let forms = [
            (DType::F16, ScoreForm::Plain, MaskForm::Causal),
            (DType::BF16, ScoreForm::Plain, MaskForm::None),
            (DType::F16, ScoreForm::BiasTensor, MaskForm::Causal),
        ];
        for (dtype, score, mask) in forms {
            let c = case(dtype, head_dim, score, mask);
            let space = space(&c);
            assert!(space.len() >= 2, "head dim {head_dim}, {score:?}: {space:?}");
            for s in space {
                for compiled in check_kernel(&attention_kernel(&c, s), &Bindings::new()) {
                    assert_eq!(lowerings(&compiled), ["attention"], "{s:?}");
                }
            }
        }
    }
}

#[test]
fn every_score_form_and_mask_assembles_with_the_default_schedule() {
    let forms = [
        (ScoreForm::Plain, MaskForm::None),
        (ScoreForm::Plain, MaskForm::Window(100)),
        (ScoreForm::Alibi(0.125), MaskForm::Causal),
        (ScoreForm::SoftCap(30.0), MaskForm::None),
        (ScoreForm::BiasTensor, MaskForm::Causal),
        (ScoreForm::Plain, MaskForm::Tensor),
    ];
    for head_dim in [32u64, 80, 128] {
        for (score, mask) in forms {
            let c = case(DType::BF16, head_dim, score, mask);
            // The kernel's schedule is not one of the space: it runs the default.
            let k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
            for compiled in check_kernel(&k, &Bindings::new()) {
                assert_eq!(lowerings(&compiled), ["attention"], "{c:?}");
            }
        }
    }
}

#[test]
fn f32_attention_and_other_head_dims_keep_the_generic_plan() {
    for (dtype, head_dim) in [(DType::F32, 64u64), (DType::F16, 40)] {
        let c = case(dtype, head_dim, ScoreForm::Plain, MaskForm::Causal);
        assert!(GpuAttention::find(&c.graph().unwrap()).is_none(), "{c:?}");
        let k = kernel("attn", KernelClass::Attention, c.graph().unwrap());
        for compiled in check_kernel(&k, &Bindings::new()) {
            assert!(!lowerings(&compiled).contains(&"attention"), "{c:?}");
        }
    }
}
