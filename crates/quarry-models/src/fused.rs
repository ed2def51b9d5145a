//! A fused CPU forward pass for post-LN BERT / XLM-R encoders.
//!
//! Same weights and the same arithmetic as `candle_transformers::models::{bert, xlm_roberta}`,
//! but the element-wise work around the matrix products is fused into single passes:
//!
//! * embeddings: gather word + position + token-type rows and LayerNorm in one pass;
//! * Q, K and V come from one matrix product against the concatenated `[3H, H]` weight;
//! * batches are packed: sequences one after another with no padding, so every matrix
//!   product and element-wise pass works on real tokens only, whatever the mix of lengths;
//! * attention runs per sequence and head: the bias and `1/sqrt(d)` applied while gathering
//!   that head's Q, K, V, then `QKᵀ`, softmax and `·V` in a per-worker scratch (no
//!   `[b, heads, len, len]` score tensor, no mask);
//! * `bias + GELU` and `bias + residual + LayerNorm` are single passes.
//!
//! The large matrix products are candle's (gemm, multi-threaded); the per-head attention
//! products call the same `gemm` single-threaded, one task per sequence and head. The
//! element-wise kernels run in parallel over rows with rayon and are written so LLVM vectorises them: erf uses a rational
//! approximation (max error ≈ 1e-7) and exp a Cephes-style polynomial, instead of scalar libm
//! calls. With candle's own ops these steps took ~40 % of the forward pass on MiniLM.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor, bail};
use candle_nn::VarBuilder;
use rayon::prelude::*;

/// Activation of the feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    GeluErf,
    GeluTanh,
    Relu,
}

pub(crate) struct FusedConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub max_positions: usize,
    pub type_vocab_size: usize,
    pub eps: f64,
    pub act: Act,
    /// `Some(pad_id)` for XLM-R position numbering (`pad + 1 + i`), `None` for BERT (`i`).
    pub xlmr_pad: Option<u32>,
}

struct Layer {
    wqkv_t: Tensor,
    bqkv: Vec<f32>,
    wo_t: Tensor,
    bo: Vec<f32>,
    ln1: (Vec<f32>, Vec<f32>),
    wi_t: Tensor,
    bi: Vec<f32>,
    wo2_t: Tensor,
    bo2: Vec<f32>,
    ln2: (Vec<f32>, Vec<f32>),
}

pub(crate) struct FusedEncoder {
    cfg: FusedConfig,
    word: Tensor,
    pos: Vec<f32>,
    types: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

fn vec1(vb: &VarBuilder, n: usize, name: &str) -> Result<Vec<f32>> {
    vb.get(n, name)?.to_vec1::<f32>()
}

fn ln(vb: &VarBuilder, h: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok((vec1(vb, h, "weight")?, vec1(vb, h, "bias")?))
}

impl FusedEncoder {
    /// Loads from a VarBuilder rooted at the encoder (`embeddings.*`, `encoder.layer.*`).
    pub(crate) fn load(vb: &VarBuilder, cfg: FusedConfig) -> Result<Self> {
        let (h, f) = (cfg.hidden_size, cfg.intermediate_size);
        let e = vb.pp("embeddings");
        let word = e.get((cfg.vocab_size, h), "word_embeddings.weight")?;
        let pos = e
            .get((cfg.max_positions, h), "position_embeddings.weight")?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let types = e
            .get((cfg.type_vocab_size, h), "token_type_embeddings.weight")?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let emb_ln = ln(&e.pp("LayerNorm"), h)?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let s = a.pp("self");
            let wq = s.get((h, h), "query.weight")?;
            let wk = s.get((h, h), "key.weight")?;
            let wv = s.get((h, h), "value.weight")?;
            let wqkv = Tensor::cat(&[&wq, &wk, &wv], 0)?;
            let mut bqkv = vec1(&s, h, "query.bias")?;
            bqkv.extend(vec1(&s, h, "key.bias")?);
            bqkv.extend(vec1(&s, h, "value.bias")?);
            let o = a.pp("output");
            layers.push(Layer {
                wqkv_t: wqkv.t()?,
                bqkv,
                wo_t: o.get((h, h), "dense.weight")?.t()?,
                bo: vec1(&o, h, "dense.bias")?,
                ln1: ln(&o.pp("LayerNorm"), h)?,
                wi_t: l.get((f, h), "intermediate.dense.weight")?.t()?,
                bi: vec1(&l, f, "intermediate.dense.bias")?,
                wo2_t: l.get((h, f), "output.dense.weight")?.t()?,
                bo2: vec1(&l, h, "output.dense.bias")?,
                ln2: ln(&l.pp("output.LayerNorm"), h)?,
            });
        }
        Ok(FusedEncoder {
            cfg,
            word,
            pos,
            types,
            emb_ln,
            layers,
        })
    }

    /// `ids`, `type_ids`: the batch's sequences packed one after another, no padding;
    /// `lens[i]` tokens in sequence i (they sum to `ids.len()`). Returns the last hidden state
    /// `[Σ lens, H]`, packed the same way: a short sequence batched with a long one costs
    /// only its own tokens.
    pub(crate) fn forward(&self, ids: &[u32], type_ids: &[u32], lens: &[usize]) -> Result<Tensor> {
        let cfg = &self.cfg;
        let m: usize = lens.iter().sum();
        let h = cfg.hidden_size;
        if ids.len() != m || type_ids.len() != m {
            bail!("fused encoder: expected {m} ids, got {}", ids.len());
        }
        if lens.contains(&0) {
            bail!("fused encoder: empty sequence");
        }
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= cfg.vocab_size) {
            bail!(
                "token id {bad} is outside the vocabulary ({})",
                cfg.vocab_size
            );
        }
        if let Some(bad) = type_ids
            .iter()
            .find(|&&t| t as usize >= cfg.type_vocab_size)
        {
            bail!(
                "token type {bad} is outside type_vocab_size ({})",
                cfg.type_vocab_size
            );
        }
        let starts: Vec<usize> = lens
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect();
        // Position ids: BERT counts from 0; XLM-R (HF create_position_ids_from_input_ids)
        // numbers non-pad tokens pad+1, pad+2, … and gives pad tokens the pad position.
        let mut pos_ids = vec![0u32; m];
        for (&start, &n) in starts.iter().zip(lens) {
            let r = &ids[start..start + n];
            let p = &mut pos_ids[start..start + n];
            match cfg.xlmr_pad {
                None => p.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32),
                Some(pad) => {
                    let mut count = 0u32;
                    for (x, &id) in p.iter_mut().zip(r) {
                        if id != pad {
                            count += 1;
                            *x = pad + count;
                        } else {
                            *x = pad;
                        }
                    }
                }
            }
        }
        if let Some(bad) = pos_ids.iter().find(|&&p| p as usize >= cfg.max_positions) {
            bail!(
                "position {bad} is outside max_position_embeddings ({})",
                cfg.max_positions
            );
        }
        let eps = cfg.eps as f32;
        let mut x = self.word.apply_op1_no_bwd(&EmbedLn {
            ids,
            pos_ids: &pos_ids,
            type_ids,
            pos: &self.pos,
            types: &self.types,
            gamma: &self.emb_ln.0,
            beta: &self.emb_ln.1,
            eps,
            h,
        })?;
        for layer in &self.layers {
            let ctx = x.matmul(&layer.wqkv_t)?.apply_op1_no_bwd(&Attention {
                bias: &layer.bqkv,
                starts: &starts,
                lens,
                heads: cfg.num_heads,
            })?;
            let attn = ctx.matmul(&layer.wo_t)?;
            x = attn.apply_op2_no_bwd(
                &x,
                &BiasResidualLn {
                    bias: &layer.bo,
                    gamma: &layer.ln1.0,
                    beta: &layer.ln1.1,
                    eps,
                },
            )?;
            let inter = x.matmul(&layer.wi_t)?.apply_op1_no_bwd(&BiasAct {
                bias: &layer.bi,
                act: cfg.act,
            })?;
            let out = inter.matmul(&layer.wo2_t)?;
            x = out.apply_op2_no_bwd(
                &x,
                &BiasResidualLn {
                    bias: &layer.bo2,
                    gamma: &layer.ln2.0,
                    beta: &layer.ln2.1,
                    eps,
                },
            )?;
        }
        debug_assert_eq!(x.dims(), [m, h]);
        Ok(x)
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

fn contiguous_f32<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    let data = s.as_slice::<f32>()?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => bail!("fused kernel needs a contiguous f32 input"),
    }
}

/// Minimum rows per rayon task, so tiny batches are not split into useless tasks.
fn min_rows(row_len: usize) -> usize {
    (16_384 / row_len.max(1)).max(1)
}

#[inline(always)]
fn layer_norm_row(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// exp(x) with a Cephes-style polynomial; relative error ~2e-7, vectorisable.
#[inline(always)]
fn exp_fast(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round x·log2(e) to the nearest integer with the 1.5·2^23 trick (no libm call).
    let fx = (x * std::f32::consts::LOG2_E + 12_582_912.0) - 12_582_912.0;
    let r = x - fx * 0.693_359_4 - fx * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    f32::from_bits(((fx as i32 + 127) as u32) << 23) * y
}

/// erf(x): rational approximation on [-4, 4] (the one Eigen and XLA use for f32).
#[inline(always)]
fn erf_fast(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 + -2.101_024e-6;
    p = p * x2 + -5.692_506_4e-5;
    p = p * x2 + -7.349_906_3e-4;
    p = p * x2 + -2.954_6e-3;
    p = p * x2 + -1.609_603_3e-2;
    let mut q = -1.456_607_2e-5f32;
    q = q * x2 + -2.133_740_6e-4;
    q = q * x2 + -1.682_827e-3;
    q = q * x2 + -7.373_329_2e-3;
    q = q * x2 + -1.426_474e-2;
    x * p / q
}

#[inline(always)]
fn act_fn(act: Act, x: f32) -> f32 {
    match act {
        Act::GeluErf => 0.5 * x * (1.0 + erf_fast(x * std::f32::consts::FRAC_1_SQRT_2)),
        Act::GeluTanh => {
            let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
            // tanh(u) = 1 - 2 / (exp(2u) + 1)
            0.5 * x * (2.0 - 2.0 / (exp_fast(2.0 * u) + 1.0))
        }
        Act::Relu => x.max(0.0),
    }
}

struct EmbedLn<'a> {
    ids: &'a [u32],
    pos_ids: &'a [u32],
    type_ids: &'a [u32],
    pos: &'a [f32],
    types: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
    h: usize,
}

impl CustomOp1 for EmbedLn<'_> {
    fn name(&self) -> &'static str {
        "quarry-embed-layernorm"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let table = contiguous_f32(s, l)?;
        let h = self.h;
        let m = self.ids.len();
        let mut out = vec![0f32; m * h];
        out.par_chunks_mut(h)
            .with_min_len(min_rows(h))
            .enumerate()
            .for_each(|(t, row)| {
                let w = &table[self.ids[t] as usize * h..][..h];
                let p = &self.pos[self.pos_ids[t] as usize * h..][..h];
                let ty = &self.types[self.type_ids[t] as usize * h..][..h];
                for (((o, a), b), c) in row.iter_mut().zip(w).zip(p).zip(ty) {
                    *o = a + b + c;
                }
                layer_norm_row(row, self.gamma, self.beta, self.eps);
            });
        Ok((CpuStorage::F32(out), Shape::from((m, h))))
    }
}

/// Multi-head self-attention from the fused Q, K, V projection `[tokens, 3H]` of a packed
/// batch (its bias not yet added) to the heads' context `[tokens, H]`.
///
/// One task per sequence and head gathers that head's Q (bias added, scaled by `1/sqrt(d)`),
/// K and V for the sequence's tokens, then runs `QKᵀ`, the softmax and `·V` in a per-worker
/// scratch. The scores never exist as a `[b, heads, len, len]` tensor (at 512 tokens that was
/// 400 MB for a full batch), there is no mask (a packed batch has no padding), and each small
/// product is one single-threaded `gemm` call instead of a multi-threaded call per head
/// (whose dispatch cost exceeded the work at these sizes).
struct Attention<'a> {
    bias: &'a [f32],
    /// First token of each sequence.
    starts: &'a [usize],
    /// Tokens of each sequence.
    lens: &'a [usize],
    heads: usize,
}

/// `dst = lhs · rhs` for `(m, n, k)` = (rows, columns, inner size), on this thread; each
/// matrix is its first element with its (row stride, column stride) in elements.
///
/// # Safety
/// Each pointer must address a live buffer covering every element its shape and strides
/// reach, and nothing else may access `dst`'s elements meanwhile.
unsafe fn small_matmul(
    (m, n, k): (usize, usize, usize),
    dst: (*mut f32, usize, usize),
    lhs: (*const f32, usize, usize),
    rhs: (*const f32, usize, usize),
) {
    // SAFETY: the caller's contract is gemm's.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.0,
            dst.2 as isize,
            dst.1 as isize,
            false,
            lhs.0,
            lhs.2 as isize,
            lhs.1 as isize,
            rhs.0,
            rhs.2 as isize,
            rhs.1 as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// One worker's buffers for [`Attention`], reused across its tasks.
#[derive(Default)]
struct AttentionScratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    scores: Vec<f32>,
}

/// The attention output, written by several tasks at once: each writes only its own
/// sequence's rows and its own head's columns, so no two tasks touch the same element.
#[derive(Clone, Copy)]
struct DisjointOut(*mut f32);
// SAFETY: see the type's documentation; the buffer outlives the parallel loop.
unsafe impl Send for DisjointOut {}
// SAFETY: as above.
unsafe impl Sync for DisjointOut {}

impl DisjointOut {
    /// The element at `offset` (a method, so closures capture the whole wrapper).
    fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

impl CustomOp1 for Attention<'_> {
    fn name(&self) -> &'static str {
        "quarry-attention"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s, l)?;
        let (_, three_h) = l.shape().dims2()?;
        let heads = self.heads;
        let h = three_h / 3;
        let d = h / heads;
        let m: usize = self.lens.iter().sum();
        if three_h != 3 * h || d * heads != h || x.len() != m * 3 * h || self.bias.len() != 3 * h {
            bail!(
                "attention: expected [{m}, {}] input, got {:?}",
                3 * h,
                l.shape()
            );
        }
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = vec![0f32; m * h];
        let dst = DisjointOut(out.as_mut_ptr());
        (0..self.lens.len() * heads).into_par_iter().for_each_init(
            AttentionScratch::default,
            |sc, task| {
                let (seq, head) = (task / heads, task % heads);
                let (start, n) = (self.starts[seq], self.lens[seq]);
                let col = head * d;
                sc.q.clear();
                sc.k.clear();
                sc.v.clear();
                for t in start..start + n {
                    let row = &x[t * 3 * h..][..3 * h];
                    for (part, buf) in [&mut sc.q, &mut sc.k, &mut sc.v].into_iter().enumerate() {
                        let at = part * h + col;
                        let mul = if part == 0 { scale } else { 1.0 };
                        buf.extend(
                            row[at..at + d]
                                .iter()
                                .zip(&self.bias[at..at + d])
                                .map(|(v, b)| (v + b) * mul),
                        );
                    }
                }
                sc.scores.resize(n * n, 0.0);
                // SAFETY: q and k are live n×d row-major buffers (k read as its transpose),
                // scores a live n×n one.
                unsafe {
                    small_matmul(
                        (n, n, d),
                        (sc.scores.as_mut_ptr(), n, 1),
                        (sc.q.as_ptr(), d, 1),
                        (sc.k.as_ptr(), 1, d),
                    );
                }
                for row in sc.scores.chunks_mut(n) {
                    let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0f32;
                    for v in row.iter_mut() {
                        *v = exp_fast(*v - max);
                        sum += *v;
                    }
                    let inv = 1.0 / sum;
                    row.iter_mut().for_each(|v| *v *= inv);
                }
                // SAFETY: scores n×n and v n×d are live row-major buffers; the destination is
                // rows start..start+n, columns col..col+d of `out` ([m, h]), which only this
                // task writes (see `DisjointOut`).
                unsafe {
                    small_matmul(
                        (n, d, n),
                        (dst.at(start * h + col), h, 1),
                        (sc.scores.as_ptr(), n, 1),
                        (sc.v.as_ptr(), d, 1),
                    );
                }
            },
        );
        Ok((CpuStorage::F32(out), Shape::from((m, h))))
    }
}

/// `act(x + bias)` over rows of `x`.
struct BiasAct<'a> {
    bias: &'a [f32],
    act: Act,
}

impl CustomOp1 for BiasAct<'_> {
    fn name(&self) -> &'static str {
        "quarry-bias-act"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s, l)?;
        let n = self.bias.len();
        let mut out = vec![0f32; x.len()];
        let act = self.act;
        out.par_chunks_mut(n)
            .with_min_len(min_rows(n))
            .zip(x.par_chunks(n))
            .for_each(|(dst, src)| match act {
                Act::GeluErf => {
                    for ((o, s), b) in dst.iter_mut().zip(src).zip(self.bias) {
                        *o = act_fn(Act::GeluErf, s + b);
                    }
                }
                Act::GeluTanh => {
                    for ((o, s), b) in dst.iter_mut().zip(src).zip(self.bias) {
                        *o = act_fn(Act::GeluTanh, s + b);
                    }
                }
                Act::Relu => {
                    for ((o, s), b) in dst.iter_mut().zip(src).zip(self.bias) {
                        *o = act_fn(Act::Relu, s + b);
                    }
                }
            });
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }
}

/// `LayerNorm(x + bias + residual)` over rows.
struct BiasResidualLn<'a> {
    bias: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
}

impl CustomOp2 for BiasResidualLn<'_> {
    fn name(&self) -> &'static str {
        "quarry-bias-residual-layernorm"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s1, l1)?;
        let res = contiguous_f32(s2, l2)?;
        if x.len() != res.len() {
            bail!(
                "residual shape mismatch: {:?} vs {:?}",
                l1.shape(),
                l2.shape()
            );
        }
        let h = self.bias.len();
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(h)
            .with_min_len(min_rows(h))
            .zip(x.par_chunks(h).zip(res.par_chunks(h)))
            .for_each(|(dst, (a, r))| {
                for (((o, a), r), b) in dst.iter_mut().zip(a).zip(r).zip(self.bias) {
                    *o = a + b + r;
                }
                layer_norm_row(dst, self.gamma, self.beta, self.eps);
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate() {
        let mut worst = 0f32;
        let mut x = -80.0f32;
        while x <= 0.0 {
            let rel = ((exp_fast(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
            x += 0.013;
        }
        assert!(worst < 1e-6, "exp relative error {worst}");
    }

    #[test]
    fn erf_is_accurate() {
        // erf values from a double-precision reference (Abramowitz & Stegun tables).
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (1.5, 0.966_105_146_475_310_7),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
            (6.0, 1.0),
        ] {
            let got = erf_fast(x) as f64;
            assert!((got - want).abs() < 5e-7, "erf({x}) = {got}, want {want}");
        }
    }
}
